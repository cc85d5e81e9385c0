"""The trainable probe: import a contract's `module:function` trainable as a trial would, and say
what happened.

This is the one place `plan validate` runs user code. `probe_trainable` puts the
contract's folder and the current folder first on sys.path, imports the module with
its output swallowed (it cannot corrupt `--json`) and with `os._exit` / `os.abort`
turned into an exception (a module that calls them at import would end the process
without a word), then restores sys.path and removes the user modules it imported
from sys.modules. It returns a `TrainableProbe`: plain facts, no diagnostics; the
rule P421 / P501-P503 that turns them into sentences is `rules.check_trainable`, a pure check.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import posix
import sys
from dataclasses import dataclass
from pathlib import Path

from planner._core.lazy import lazy_import

difflib = lazy_import(
    "difflib"
)  # the did-you-mean hints: only a contract with a mistake needs them


@dataclass(frozen=True)
class TrainableProbe:
    """What importing a trainable showed.

    `outcome`: `found` (importable and callable); `package_exit` / `module_exit` (a parent package
    or the module called `how`: os._exit or os.abort); `package_raised` / `module_raised` (`error`:
    "Type: first line"); `not_found` (no module file from `roots`; `near` is where it sits in a
    folder above, if it does); `no_function` (`close`: the nearest public callable name, if any);
    `not_callable`.
    """

    trainable: str
    outcome: str
    module: str
    function: str
    roots: tuple[str, ...]
    origin: str | None = None
    how: str | None = None
    error: str | None = None
    close: str | None = None
    near: tuple[str, str] | None = None  # (the module's file, the folder to run from)
    names: frozenset[str] = (
        frozenset()
    )  # every name the module's code uses (globals, attributes), when found


def probe_trainable(trainable: str, contract_dir: Path) -> TrainableProbe:
    """Import `module:function` with the contract's folder and the cwd first on sys.path (see the
    module)."""
    module_name, _, function = trainable.partition(":")
    roots = (str(contract_dir.resolve()), os.getcwd())
    facts = {"trainable": trainable, "module": module_name, "function": function, "roots": roots}
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    sys.path[:0] = roots
    importlib.invalidate_caches()
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return _probe(module_name, function, contract_dir, facts)
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:
            if name == "planner" or name.startswith("planner."):
                continue  # the planner's own modules stay: one copy of each class
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if (
                origin
                and any(_is_under(origin, root) for root in roots)
                and "site-packages" not in origin
            ):
                del sys.modules[name]
        importlib.invalidate_caches()


def _probe(module_name: str, function: str, contract_dir: Path, facts: dict) -> TrainableProbe:
    try:
        with _no_process_exit():
            spec = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:
        spec = None
    except _ProcessExit as ended:
        return TrainableProbe(**facts, outcome="package_exit", how=ended.how)
    except BaseException as error:  # a parent package that raises on import
        if isinstance(error, KeyboardInterrupt):
            raise
        return TrainableProbe(**facts, outcome="package_raised", error=_exc(error))
    if spec is None or not spec.has_location or not spec.origin or not os.path.isfile(spec.origin):
        return TrainableProbe(**facts, outcome="not_found", near=_near(module_name, contract_dir))
    try:
        with _no_process_exit():
            module = importlib.import_module(module_name)
    except _ProcessExit as ended:
        return TrainableProbe(**facts, outcome="module_exit", origin=spec.origin, how=ended.how)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        return TrainableProbe(
            **facts, outcome="module_raised", origin=spec.origin, error=_exc(error)
        )
    target = getattr(module, function, None)
    if target is None:
        names = [
            n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))
        ]
        close = difflib.get_close_matches(function, names, n=1)
        return TrainableProbe(
            **facts, outcome="no_function", origin=spec.origin, close=close[0] if close else None
        )
    if not callable(target):
        return TrainableProbe(**facts, outcome="not_callable", origin=spec.origin)
    return TrainableProbe(
        **facts, outcome="found", origin=spec.origin, names=_code_names(spec.origin)
    )


def _code_names(origin: str) -> frozenset[str]:
    """The names the module's code uses, in every function and class of it (code objects'
    `co_names`: globals and attribute names, as `planner.LightningCallback` names
    `LightningCallback`; comments and strings not)."""
    try:
        with open(origin, "rb") as handle:
            stack = [compile(handle.read(), origin, "exec", dont_inherit=True)]
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack += [const for const in code.co_consts if hasattr(const, "co_names")]
    return frozenset(names)


class _ProcessExit(BaseException):
    """os._exit or os.abort called while the trainable's module was imported (stopped, not done)."""

    def __init__(self, how: str):
        super().__init__(how)
        self.how = how


@contextlib.contextmanager
def _no_process_exit():
    """While a user module is imported, os._exit(n) and os.abort() raise _ProcessExit instead of
    ending planner."""

    def _exit(code=0):
        raise _ProcessExit(f"os._exit({code})")

    def _abort():
        raise _ProcessExit("os.abort()")

    saved = os._exit, posix._exit, os.abort
    os._exit = posix._exit = _exit
    os.abort = _abort
    try:
        yield
    finally:
        os._exit, posix._exit, os.abort = saved


def _is_under(path: str, root: str) -> bool:
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except OSError:
        return False


def _near(module_name: str, contract_dir: Path) -> tuple[str, str] | None:
    """(the module's file, its folder's root) when it sits in a folder up to three above the
    contract."""
    relative = Path(*module_name.split("."))
    folder = contract_dir.resolve()
    for parent in [folder, *folder.parents][:4]:
        for candidate in (parent / relative.with_suffix(".py"), parent / relative / "__init__.py"):
            if candidate.is_file():
                return str(candidate), str(parent)
    return None


def _exc(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
