"""A function trainable loaded for each trial: its module executed afresh (its globals start over),
the global RNGs seeded, and which top-level modules a trial loaded besides planner's and Ray's."""

from __future__ import annotations

import importlib
import importlib.util
import random
import sys
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from planner._trial.command import CommandTrainable
from planner._trial.spec import TrialSpec

MACHINERY = frozenset(
    {"planner", "ray"}
)  # planner's own and Ray's worker, never a trainable's package


# (how many modules, the last one's name and object id, their top-level names) at the last look
_LAST_LOOK: list = []


def top_level_modules() -> frozenset[str]:
    """The top-level names of the modules loaded in this process (`torch` for `torch.nn`).

    Asked four times a trial in a worker holding thousands of modules: while `sys.modules` has as
    many entries as at the last look and the same module object last (a module loaded since would
    be last), the names are the last look's."""
    modules = list(sys.modules)
    last = modules[-1] if modules else ""  # no module is named ""
    key = (len(modules), last, id(sys.modules.get(last)))  # a module loaded again is a new object
    if _LAST_LOOK and _LAST_LOOK[0][:3] == key:
        return _LAST_LOOK[0][3]
    names = frozenset(name.partition(".")[0] for name in modules)
    _LAST_LOOK[:] = [(*key, names)]
    return names


def new_modules(before: AbstractSet[str], machinery: AbstractSet[str] | None = None) -> list[str]:
    """The top-level modules loaded since `before` (names only): not the standard library,
    planner's or Ray's own, nor what Ray Tune loaded for the first report (`machinery`). A function
    trainable's record keeps them (`modules`): the imports inside its function body, which its
    source does not show."""
    skip = before | MACHINERY | (machinery or set())
    return sorted(
        name
        for name in top_level_modules() - skip
        if name not in sys.stdlib_module_names
        and not name.startswith(("__", "_cython_"))
        and name != "cython_runtime"
    )  # Cython's runtime entries: no package


def seed_everything(seed: int) -> None:
    """Seed the global RNGs a trainable may draw from: random, numpy.random, torch when loaded."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")  # seeded only when the trainable loaded it: torch is heavy
    if torch is not None:
        torch.manual_seed(seed)


def load_trainable(path: str, fresh: bool = True) -> Callable:
    """`module.path:function` -> the function; `fresh` executes the module anew (its globals start
    over)."""
    module_name, _, function = path.partition(":")
    if fresh and (module_name in sys.modules or module_name in _LET_GO):
        spec = importlib.util.find_spec(module_name)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            _with_submodules(
                module
            )  # before it runs: `import pkg.sub` at its top then `pkg.sub.x` works
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module_name, None)
                raise
            _bind_in_package(
                module_name, module
            )  # as an import does: `package.module` is the new one
            return getattr(module, function)
    module = importlib.import_module(module_name)
    return getattr(module, function)


def _bind_in_package(module_name: str, module: Any, *, was: Any = None) -> None:
    """`package.module` is `module` (None: no attribute), as an import makes it; with `was`, only
    while the attribute is `was` (what the package's own code put there is left)."""
    package, _, name = module_name.rpartition(".")
    holder = sys.modules.get(package)
    if holder is None or (was is not None and getattr(holder, name, None) is not was):
        return
    if module is not None:
        setattr(holder, name, module)
    elif hasattr(holder, name):
        delattr(holder, name)


def _with_submodules(module: Any) -> None:
    """A package about to be executed anew gets the submodules that are still loaded as its
    attributes, as their first import made them: `import pkg.sub` finds them loaded and sets
    nothing, so `pkg.sub.x` raised AttributeError from the second trial on. What the package's own
    code then assigns wins."""
    if getattr(module, "__path__", None) is not None:
        prefix = module.__name__ + "."
        for name, loaded in list(sys.modules.items()):
            child = name[len(prefix) :]
            if name.startswith(prefix) and "." not in child and loaded is not None:
                setattr(module, child, loaded)


_LET_GO: set[str] = (
    set()
)  # trainable modules let go before the freeze: the next trial executes them anew


def let_go(module_name: str) -> bool:
    """Forget the module `module_name` (sys.modules and its package's attribute): the next trial
    executes it anew (`load_trainable`). True when it was there."""
    _LET_GO.add(module_name)
    module = sys.modules.pop(module_name, None)
    if module is not None:
        _bind_in_package(module_name, None, was=module)
    return module is not None


def trainable_for(spec: TrialSpec) -> Callable:
    """The function a trial calls: the contract's `module:function`, or its `command:` as a
    subprocess."""
    if "command" in spec.extra:
        return CommandTrainable.from_dict(spec.extra["command"])
    return load_trainable(spec.trainable)
