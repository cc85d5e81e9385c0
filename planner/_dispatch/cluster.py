"""Running on a Ray cluster: what ships to the workers and what a trial asks for.

On a cluster the driver (`plan run`) and the trials are on different machines.
Two things must reach the workers or be true there, and this module builds
them as plain values that dispatch passes to Ray:

- **the code**: `runtime_env_for()` ships the contract's folder as the
  `working_dir` (without runs, VCS folders, virtualenvs, caches and files
  above a size, which belong on shared storage), the trainable's top-level
  package through `py_modules` when it lives outside that folder, and the
  driver's own `planner` package, so workers run the code the run identity
  records;
- **the resources**: `resources_for()` (Tune's `with_resources`, placement
  groups) and `task_options()` (`ray.remote(...).options(...)`) turn the
  contract's `budget.resources` {cpu, gpu, custom} into Ray's two spellings,
  and `unfit_reason()` says, before anything is launched, when no node of the
  cluster could ever hold one trial (Ray would otherwise wait forever).

Everything here is pure: Ray is not imported.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from planner._contract.model import Budget, Resources
from planner._core.errors import UsageError

# Never shipped from the contract's folder: run folders, VCS data, environments, caches.
# Ray reads these like .gitignore lines, relative to the folder shipped.
DEFAULT_EXCLUDES = (
    "/runs/",
    ".git/",
    ".hg/",
    ".svn/",
    ".venv/",
    "venv/",
    "__pycache__/",
    "*.pyc",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".ipynb_checkpoints/",
    "node_modules/",
    "*.egg-info/",
)
# Files from this size on stay behind (Ray warns from 10 MiB; every trial's
# worker node downloads the package once). Data that large belongs on storage
# every node reads: an absolute path on NFS, or an object store URI.
LARGE_FILE_BYTES = 10 * 1024**2
# Ray's own names, which a custom resource must not take.
_BUILTIN_RESOURCES = {"CPU", "GPU", "memory", "object_store_memory", "cpu", "gpu"}
_SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", "runs"}


# ---------------------------------------------------------------- resources


def _resources(value: Resources | Budget | Mapping[str, Any]) -> Resources:
    if isinstance(value, Budget):
        return value.resources
    if isinstance(value, Resources):
        return value
    return Resources(**value)


def _custom(resources: Resources) -> dict[str, float]:
    clash = sorted(set(resources.custom) & _BUILTIN_RESOURCES) + sorted(
        name for name in resources.custom if name.startswith("node:")
    )
    if clash:
        raise UsageError(
            f"budget.resources.custom names Ray's own resource {clash[0]!r}: "
            "write cpu and gpu as `cpu:` and `gpu:`, and give custom resources other names"
        )
    return {name: float(amount) for name, amount in resources.custom.items() if amount > 0}


def resources_for(value: Resources | Budget | Mapping[str, Any]) -> dict[str, float]:
    """One trial's request in Ray's resource names: {"CPU": 1.0, "GPU": 0.0, "<custom>": n}.

    This is what `tune.with_resources(trainable, resources_for(budget))` and a
    placement-group bundle take; `ray.nodes()` reports a node's resources in
    the same names, so `unfit_reason()` compares them directly. It is the one
    spelling: the tuning trials, the confirmation and reeval tasks (through
    `task_options`), the warm-up tasks and the slot count all take it from
    here. A custom resource of amount 0 is left out (it asks for nothing).
    """
    resources = _resources(value)
    return {"CPU": float(resources.cpu), "GPU": float(resources.gpu), **_custom(resources)}


def task_options(value: Resources | Budget | Mapping[str, Any]) -> dict[str, Any]:
    """The same request as `ray.remote(f).options(**task_options(budget))` keywords."""
    resources = _resources(value)
    options: dict[str, Any] = {"num_cpus": float(resources.cpu), "num_gpus": float(resources.gpu)}
    custom = _custom(resources)
    if custom:
        options["resources"] = custom
    return options


def unfit_reason(request: Mapping[str, float], nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """Why no alive node could ever run one trial of `request`, or None when one could.

    `nodes` are `ray.nodes()` entries ({"Alive", "Resources", "NodeManagerAddress"}).
    This checks a node's total resources, not what is free now: a trial that
    fits waits for a slot, one that fits nowhere would wait forever.
    """
    needed = {name: amount for name, amount in request.items() if amount > 0}
    alive = [n for n in nodes if n.get("Alive", n.get("alive", False))]
    if not alive:
        return "the Ray cluster has no alive node"
    for node in alive:
        have = node.get("Resources", node.get("resources", {}))
        if all(have.get(name, 0.0) >= amount for name, amount in needed.items()):
            return None
    wanted = ", ".join(f"{name}={amount:g}" for name, amount in sorted(needed.items()))
    offered = "; ".join(
        ", ".join(
            f"{k}={v:g}"
            for k, v in sorted(n.get("Resources", n.get("resources", {})).items())
            if not k.startswith("node:") and k not in ("memory", "object_store_memory")
        )
        for n in alive
    )
    return (
        f"no node of the Ray cluster can hold one trial of budget.resources ({wanted}); "
        f"the nodes offer: {offered}. Lower budget.resources or add a node that has them"
    )


# ---------------------------------------------------------------- code


def resolve_address(address: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The cluster `plan run` joins: --address, else RAY_ADDRESS, else None (an embedded local Ray).

    "host:port" is the head's GCS address (what `ray start --head` prints);
    "ray://host:10001" is Ray Client, which needs `pip install "ray[client]"`.
    "auto" joins a cluster started on this machine with `ray start`.
    """
    environ = os.environ if environ is None else environ
    address = (address or environ.get("RAY_ADDRESS") or "").strip() or None
    if address is None or address == "local":
        return None
    if address.startswith("ray://"):
        if importlib.util.find_spec("grpc") is None:
            raise UsageError(
                f"{address} is a Ray Client address, and Ray Client needs grpcio: "
                'install it with `pip install "ray[client]"`, or give the head\'s GCS address '
                "(host:port, port 6379 unless the head chose another)"
            )
        return address
    if address != "auto" and ":" not in address:
        raise UsageError(
            f"--address {address!r} has no port: give the head's GCS address as host:port "
            "(for example 10.0.0.5:6379), or ray://host:10001 for Ray Client"
        )
    return address


def large_files(folder: str | os.PathLike, limit: int = LARGE_FILE_BYTES) -> list[str]:
    """Files under `folder` of `limit` bytes or more, as /-anchored paths relative to it."""
    root = Path(folder)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            try:
                if not path.is_symlink() and path.stat().st_size >= limit:
                    found.append("/" + path.relative_to(root).as_posix())
            except OSError:
                continue
    return sorted(found)


def _module_location(top: str, search: list[Path]) -> Path | None:
    """Where the top-level module `top` would be imported from: a package dir or a .py file."""
    for folder in search:
        if (folder / top / "__init__.py").is_file() or (folder / top).is_dir():
            return folder / top
        if (folder / f"{top}.py").is_file():
            return folder / f"{top}.py"
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin


def _installed(path: Path) -> bool:
    """True for site-packages and the standard library: what a node's environment provides."""
    text = str(path)
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return (
        "site-packages" in text
        or "dist-packages" in text
        or any(text.startswith(os.path.join(p, "lib")) for p in prefixes)
    )


def runtime_env_for(
    contract_dir: str | os.PathLike,
    trainable: str | None = None,
    *,
    cwd: str | os.PathLike | None = None,
    runs_dir: str | os.PathLike | None = None,
    ship_planner: bool = True,
    large_file_bytes: int | None = LARGE_FILE_BYTES,
    env_vars: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The runtime_env that ships a contract's code to every node.

    - `working_dir`: the contract's folder. Workers start in a copy of it, with
      it on sys.path, so `module:function` names resolve as on the driver and
      relative paths inside the folder work.
    - `py_modules`: the trainable's top-level package (or .py file) when it is
      neither in the contract's folder nor installed, found as the contract
      says (the contract's folder, then the current folder, then sys.path);
      and the driver's `planner` package (`ship_planner`), so every worker
      runs the planner code the run identity records.
    - `excludes`: DEFAULT_EXCLUDES, the runs folder when it is inside the
      contract's folder, and each file of `large_file_bytes` or more (None:
      ship every file).
    """
    root = Path(contract_dir).resolve()
    cwd = Path(cwd).resolve() if cwd is not None else Path.cwd()
    excludes = list(DEFAULT_EXCLUDES)
    if runs_dir is not None:
        runs = Path(runs_dir)
        runs = (cwd / runs if not runs.is_absolute() else runs).resolve()
        if runs.is_relative_to(root) and runs != root:
            excludes.append("/" + runs.relative_to(root).as_posix() + "/")
    if large_file_bytes is not None:
        excludes.extend(large_files(root, large_file_bytes))
    py_modules: list[str] = []
    if trainable is not None:
        top = trainable.split(":", 1)[0].split(".", 1)[0]
        location = _module_location(top, [root, cwd])
        if location is not None and not location.is_relative_to(root) and not _installed(location):
            py_modules.append(str(location))
    if ship_planner:
        planner_dir = str(Path(__file__).resolve().parents[1])  # the planner package
        if planner_dir not in py_modules:
            py_modules.append(planner_dir)
    runtime_env: dict[str, Any] = {"working_dir": str(root), "excludes": excludes}
    if py_modules:
        runtime_env["py_modules"] = py_modules
    if env_vars:
        runtime_env["env_vars"] = dict(env_vars)
    return runtime_env
