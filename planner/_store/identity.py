"""The run identity: which code, packages, host and data a run used.

Environment values are allow-listed, never dumped; a value under a name that
looks like a credential is redacted even when allow-listed.
"""

from __future__ import annotations

import ast
import errno
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import psutil

from planner._core.errors import RunError
from planner._core.redact import REDACTED, Redactor, looks_secret
from planner._core.version import VERSION

PACKAGES = (
    "planner",
    "ray",
    "optuna",
    "hydra-core",
    "omegaconf",
    "pydantic",
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "torch",
)
ENV_ALLOW = (
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "RAY_ADDRESS",
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
)


def env_snapshot(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    out = {}
    for name in ENV_ALLOW:
        if name in env:
            out[name] = REDACTED if looks_secret(name) else env[name]
    if "RAY_ADDRESS" in out:
        out["RAY_ADDRESS"] = _strip_userinfo(out["RAY_ADDRESS"])
    return out


def _strip_userinfo(address: str) -> str:
    return Redactor().text(address)


def packages(extra: Iterable[str] = ()) -> dict[str, str | None]:
    """`name -> version` of planner's own packages (PACKAGES, those installed) and of `extra` (the
    packages a trainable used: `used_packages`), an `extra` one that is not installed as None (a
    reeval names it gone)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    for name in sorted({canonical(n) for n in extra} - set(out)):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    if "planner" not in out:
        out["planner"] = VERSION
    return out


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares it: `PyYAML` -> `pyyaml`, `typing_extensions` ->
    `typing-extensions`."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


MAX_SOURCE_FILES = (
    500  # the local modules followed from a trainable's file (a repository, not a site-packages)
)


def local_sources(entry: Path, root: Path, files: list[Path]) -> dict[str, str]:
    """The local modules the trainable's file `entry` imports (`files`, as `_import_walk` followed
    them; the file itself left out: its sha256 is `trainable_source_sha256`): path under `root`
    (else absolute) -> sha256. A resumed run refuses when one of them changed, and a reeval names
    it (`code.local_sources.<path>`)."""
    out = {}
    start, top = entry.resolve(), root.resolve()
    for path in {
        path.resolve() for path in files
    }:  # one name for a file, whichever link it was reached by
        if path == start:
            continue
        try:
            name = path.relative_to(top).as_posix()
        except ValueError:
            name = str(path)
        out[name] = file_sha256(path)
    return dict(sorted(out.items()))


def _import_walk(entry: Path, root: Path) -> tuple[set[str], list[Path]]:
    """(the top-level names a Python file imports (its `ast`), the local files read, `entry` among
    them), following the local modules it imports: a name that is a module or package under `root`
    is read in turn, not recorded. Relative imports are local."""
    seen: set[Path] = set()
    names: set[str] = set()
    queue = [entry.resolve()]
    while queue and len(seen) < MAX_SOURCE_FILES:
        path = queue.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # from . import x: a module of its own package
                    base = path.parent
                    for _ in range(node.level - 1):
                        base = base.parent
                    parts = (node.module or "").split(".") if node.module else []
                    queue += _local_files(base, parts, [a.name for a in node.names])
                    continue
                found = [node.module or ""]
            else:
                continue
            members = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            for name in found:
                parts = name.split(".")
                local = _local_files(root, parts, members)
                if local:
                    queue += local
                elif parts[0]:
                    names.add(parts[0])
    return names, sorted(seen)


def _local_files(base: Path, parts: list[str], members: list[str]) -> list[Path]:
    """The files of a module `parts` under `base` (a module file or a package's __init__, and its
    `members` that are modules of that package); [] when it is not there."""
    folder = base.joinpath(*parts) if parts else base
    out = []
    if parts and folder.with_suffix(".py").is_file():
        out.append(folder.with_suffix(".py"))
    if (folder / "__init__.py").is_file() or (not parts and folder.is_dir()):
        if (folder / "__init__.py").is_file():
            out.append(folder / "__init__.py")
        out += [folder / f"{m}.py" for m in members if (folder / f"{m}.py").is_file()]
    return out


def _providers() -> Mapping[str, list[str]]:
    """importlib.metadata.packages_distributions(), each folder of sys.path read again only when its
    distributions changed: reading every installed distribution's file list takes about 0.1-0.2 s,
    and a run asks at its start and at its end. A folder's key is the names of its `*.dist-info` /
    `*.egg-info` entries (an install, an upgrade or a removal changes them). Not the folders'
    mtimes: a run writes into folders on sys.path (the trainable's `__pycache__` beside it, the
    runs folder), which made the second read a miss on nearly every first run. A folder that holds
    no distribution is left out: `plan run` puts the contract's folder on sys.path between the two
    reads. Folder by folder, because importing Ray adds one (its `thirdparty_files`, two
    distributions) between them: the whole map was read again for it (0.07 s here, 0.2-0.5 s under
    load) before the result was printed; now that folder alone is."""
    folders = ((path, _distributions_in(path)) for path in sys.path)
    # an empty folder is left out; a zip or an egg file (None: not a folder) stays, importlib reads
    # them too
    return _providers_while(tuple((path, names) for path, names in folders if names != frozenset()))


# packages_distributions() is these two rules over every distribution (Python 3.11-3.13): applied
# to one folder's distributions at a time. A Python without them reads the whole map, as
# packages_distributions does.
_DECLARED = getattr(importlib.metadata, "_top_level_declared", None)
_INFERRED = getattr(importlib.metadata, "_top_level_inferred", None)
_BY_FOLDER = _DECLARED is not None and _INFERRED is not None


@functools.cache
def _folder_providers(path: str, _names: frozenset[str] | None) -> dict[str, list[str]]:
    """packages_distributions() of the distributions in one folder of sys.path (`_names`: its
    entries)."""
    out: dict[str, list[str]] = {}
    assert _DECLARED is not None and _INFERRED is not None  # called only when _BY_FOLDER
    for dist in importlib.metadata.distributions(path=[path]):
        for name in _DECLARED(dist) or _INFERRED(dist):
            out.setdefault(name, []).append(dist.metadata["Name"])
    return out


@functools.lru_cache(maxsize=1)
def _providers_while(folders: tuple) -> Mapping[str, list[str]]:
    """The map for one state of sys.path's folders (`folders`: each folder with its distributions'
    entries), from each folder's own map (read once per state of that folder)."""
    if not _BY_FOLDER:
        return importlib.metadata.packages_distributions()
    merged: dict[str, list[str]] = {}
    for (
        path,
        names,
    ) in folders:  # in sys.path's order, as importlib.metadata.distributions() walks it
        for name, dists in _folder_providers(path, names).items():
            merged.setdefault(name, []).extend(dists)
    return merged


def _distributions_in(path: str) -> frozenset[str] | None:
    """The names of the distribution metadata entries in one folder of sys.path (None: not a
    folder)."""
    try:
        with os.scandir(path or ".") as entries:
            return frozenset(
                e.name
                for e in entries
                if e.name.endswith((".dist-info", ".egg-info", ".egg-link"))
                or e.name.lower() == "egg-info"
            )  # a folder that is an .egg itself
    except OSError:
        return None


def used_packages(names: Iterable[str]) -> list[str]:
    """The installed distributions behind top-level import names
    (importlib.metadata.packages_distributions), with every installed distribution they require,
    and so on: what importing them loads (lightning brings torch and torchmetrics). The standard
    library and names no distribution provides are left out."""
    providers = _providers()
    todo = [
        canonical(d)
        for name in names
        if name not in sys.stdlib_module_names
        for d in providers.get(name, [])
    ]
    out: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in out:
            continue
        try:
            requires = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        out.add(dist)
        todo += [canonical(r) for r in map(_required_name, requires) if r]
    return sorted(out)


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"\bextra\s*==")


def _required_name(requirement: str) -> str | None:
    """The distribution a `Requires-Dist` line names, unless only an extra needs it (`; extra ==
    "test"`) or its marker excludes this platform (`colorama; platform_system == "Windows"`,
    tqdm's): such a distribution may still be importable, from a folder another package puts on
    sys.path (Ray's own `thirdparty_files` holds a colorama), so a run that had imported Ray
    recorded it and a reeval that had not yet said it was gone. Markers are evaluated by
    `packaging` (Ray requires it)."""
    name, _, marker = requirement.partition(";")
    match = _REQUIREMENT.match(name)
    if match is None or _EXTRA_MARKER.search(marker):
        return None
    if marker.strip() and not _marker_holds(marker):
        return None
    return match.group(1)


def _marker_holds(marker: str) -> bool:
    """Whether an environment marker holds here (True when it cannot be read: the distribution is
    kept)."""
    try:
        from packaging.markers import InvalidMarker, Marker
    except ImportError:
        return True
    try:
        return Marker(marker.strip()).evaluate({"extra": ""})
    except (InvalidMarker, ValueError, TypeError):
        return True


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def record_modules(records: Iterable[dict[str, Any]]) -> set[str]:
    """The top-level module names the trials' records say their workers loaded (a function
    trainable's `modules`: what its first attempt imported, its function body's imports among
    them)."""
    out: set[str] = set()
    for record in records:
        names = record.get("modules") if isinstance(record, dict) else None
        if isinstance(names, list):
            out |= {n for n in names if isinstance(n, str) and _MODULE_NAME.fullmatch(n)}
    return out


def add_used_packages(root: Path, records: Iterable[dict[str, Any]]) -> list[str]:
    """Add to the run folder's identity.json the packages behind the modules its trials' workers
    loaded (`record_modules`, mapped by `used_packages`) that it does not list yet, with today's
    versions: a function trainable that imports torch inside its body records torch. Written
    atomically, never through a link (planner._store.writer.write_json). Returns the names added; a
    folder whose identity.json is missing or unreadable is left as it is (a reeval says so)."""

    def change(identity: dict[str, Any]) -> list[str]:
        found = identity.get("packages")
        logged = found if isinstance(found, dict) else {}
        added = [name for name in used_packages(record_modules(records)) if name not in logged]
        if added:
            versions = packages(added)
            identity["packages"] = {**logged, **{name: versions.get(name) for name in added}}
        return added

    return _update_identity(Path(root), change)


def _update_identity(root: Path, change: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    """identity.json changed in place by `change`, which returns what it added, and written back
    atomically (planner._store.writer.write_json, never through a link) when it added something;
    a folder whose identity.json is missing or unreadable is left as it is."""
    from planner._store.read import RunFolder  # the one reader of a run folder
    from planner._store.writer import write_json  # the one atomic writer (imports the reader)

    try:
        identity = RunFolder(root).identity()
    except RunError:
        return []
    if not isinstance(identity, dict):
        return []
    added = change(identity)
    if added:
        write_json(root / "identity.json", identity, root)
    return added


def trainable_imports(
    contract, contract_dir: Path, search_path: list[str]
) -> tuple[list[str], dict[str, str], list[Path]]:
    """(the distributions the trainable uses, `local_sources` of the trainable's file, the local
    files read), from one walk of its imports.

    The distributions are what the driver can tell from the source: the imports of the trainable's
    module (a `command:`, of the script it names), local modules followed, and what those need. (A
    function trainable's worker may import more at run time: its records' `modules`, added to
    identity.json at the run's end by `add_used_packages`.)"""
    entry, root = _trainable_entry(contract, contract_dir, search_path)
    if entry is None or root is None:
        return [], {}, []
    names, files = _import_walk(entry, root)
    return used_packages(names), local_sources(entry, root, files), files


def _trainable_entry(
    contract, contract_dir: Path, search_path: list[str]
) -> tuple[Path | None, Path | None]:
    """(the trainable's file, the folder its imports are local to): a module trainable's file and
    its package root; a `command:`'s script (or its `python -m` module) and the folder the command
    runs in."""
    if contract.trainable:
        entry = _module_file(contract.trainable.partition(":")[0], search_path)
        return entry, None if entry is None else _import_root(
            entry, contract.trainable.partition(":")[0]
        )
    command_dir = contract.command_dir(contract_dir)
    entry, root = command_script(contract.command_line, command_dir), command_dir
    module = _module_of_command(contract.command_line)
    if entry is None and module:
        entry = _module_file(module, [str(command_dir), *search_path])
        root = None if entry is None else _import_root(entry, module)
    return entry, root


def _import_root(module_file: Path, module_name: str) -> Path:
    """The folder a module's top-level package sits in: `a/b/c.py` of `b.c` -> `a`."""
    depth = module_name.count(".") + (1 if module_file.name == "__init__.py" else 0)
    root = module_file.parent
    for _ in range(depth):
        root = root.parent
    return root


def _module_of_command(command_line: str) -> str | None:
    """`python -m pkg.train ...` -> `pkg.train`; else None."""
    try:
        words = shlex.split(command_line)
    except ValueError:
        return None
    for i, word in enumerate(words[:-1]):
        if word == "-m":
            return words[i + 1]
    return None


def trainable_search_path(contract_dir: Path) -> list[str]:
    """Where a trainable module is found: the contract's folder, the working folder, planner's own
    parent."""
    planner_parent = str(Path(__file__).resolve().parents[2])
    out = []
    for folder in (str(contract_dir), os.getcwd(), planner_parent):
        if folder not in out:
            out.append(folder)
    return out


def sha256_path(path: Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, in sorted order)."""
    digest = hashlib.sha256()
    if path.is_file():
        return file_sha256(path)
    for child in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(child.relative_to(path)).encode() + b"\0")
        digest.update(file_sha256(child).encode() + b"\n")
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (the code identity, a checkpoint's
    record)."""
    digest = hashlib.sha256()
    # O_NONBLOCK and a regular file only: a FIFO (or a device) where a file is expected is an
    # OSError, never a read that waits for a writer or never ends
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode(errors="replace")


def code_identity(
    trainable: str, search_path: list[str], local_files: Sequence[Path] = ()
) -> dict[str, Any]:
    """Git facts of the repository holding the trainable's module, and the module source's
    sha256."""
    module_name = trainable.partition(":")[0]
    source = _module_file(module_name, search_path)
    info: dict[str, Any] = {
        "repo": None,
        "commit": None,
        "dirty": None,
        "diff_sha256": None,
        "trainable": trainable,
        "trainable_source_sha256": None,
        "trainable_file": str(source) if source else None,
    }
    if source is None:
        return info
    info["trainable_source_sha256"] = file_sha256(source)
    info.update(_git_facts(source.parent, [source, *local_files]))
    return info


def command_code_identity(
    command_line: str, contract_dir: Path, local_files: Sequence[Path] = ()
) -> dict[str, Any]:
    """The code identity of a `command:` trainable: its command line, and the script it names.

    `contract_dir` is the folder the command runs in (`Contract.command_dir`: the contract's
    folder, or `command.cwd`). The script is the first word of the command line that is a file
    there: `python train.py --x 1` -> train.py. Its sha256 and its repository's git facts are
    recorded under the same keys as a module trainable's, so a reeval compares them the same way.
    A command that names no file there records its command line alone.
    """
    info: dict[str, Any] = {
        "repo": None,
        "commit": None,
        "dirty": None,
        "diff_sha256": None,
        "trainable": f"command: {command_line}",
        "trainable_source_sha256": None,
        "trainable_file": None,
    }
    script = command_script(command_line, contract_dir)
    if script is None:
        return info
    info["trainable_file"] = str(script)
    info["trainable_source_sha256"] = file_sha256(script)
    info.update(_git_facts(script.parent, [script, *local_files]))
    return info


def command_script(command_line: str, contract_dir: Path) -> Path | None:
    """The first word of `command_line` that names a file in `contract_dir` (resolved), or None."""
    try:
        words = shlex.split(command_line)
    except ValueError:
        return None
    for word in words:
        if word.startswith("-"):
            continue
        path = Path(contract_dir) / word
        if path.is_file():
            return path.resolve()
    return None


def _git_facts(folder: Path, sources: Sequence[Path] = ()) -> dict[str, Any]:
    """The repository holding `folder`: its top, HEAD commit, dirty flag and the hash of `git diff
    HEAD`. One of `sources` (the trainable's file, the local modules it imports) not tracked by git
    makes it dirty too: the commit does not hold the code that ran (`git status
    --untracked-files=no` says nothing of them)."""
    top = _git(["rev-parse", "--show-toplevel"], folder)
    if top is None:
        return {}
    repo = Path(top.strip())
    info: dict[str, Any] = {"repo": str(repo)}
    commit = _git(["rev-parse", "HEAD"], repo)
    info["commit"] = commit.strip() if commit else None
    status = _git(["status", "--porcelain", "--untracked-files=no"], repo)
    info["dirty"] = bool(status.strip()) if status is not None else None
    if (
        sources
        and info["dirty"] is False
        and _git(["ls-files", "--error-unmatch", "--", *map(str, sources)], repo) is None
    ):
        info["dirty"] = True  # one not tracked (or git could not say): not what the commit holds
    diff = _git(["diff", "HEAD"], repo)
    if diff is not None:
        info["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
    return info


def _module_file(module_name: str, search_path: list[str]) -> Path | None:
    saved = list(sys.path)
    try:
        sys.path[:0] = [p for p in search_path if p not in sys.path]
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path[:] = saved
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    return Path(spec.origin).resolve()


def host_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_bytes": None,
    }
    try:
        info["memory_bytes"] = psutil.virtual_memory().total
    except ImportError:
        pass
    return info


def data_fingerprints(paths: list[str], base: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for entry in paths:
        path = (base / entry).resolve()
        out[entry] = sha256_path(path) if path.exists() else None
    return out


def run_identity(contract, contract_dir: Path, search_path: list[str]) -> dict[str, Any]:
    used, local, files = trainable_imports(contract, contract_dir, search_path)
    code = (
        code_identity(contract.trainable, search_path, files)
        if contract.trainable
        else command_code_identity(contract.command_line, contract.command_dir(contract_dir), files)
    )
    code["local_sources"] = local
    return {
        "contract_sha256": contract.sha256(),
        "code": code,
        "python": platform.python_version(),
        "packages": packages(used),
        "host": host_info(),
        "data": data_fingerprints(contract.data.fingerprint, contract_dir),
        "env": env_snapshot(),
    }


# ------------------------------------------------------------------ the files a trial read

# A file a trial read is code or config (hashed whole: its sha256) when its name ends with one of
# these and it holds at most HASHED_BYTES; any other file is data, identified by its size and
# modification time (never read whole: a data set may be gigabytes). A YAML, JSON or text file
# larger than that is data too.
CODE_SUFFIXES = frozenset(
    {
        ".py",
        ".pyi",
        ".yaml",
        ".yml",
        ".json",
        ".toml",
        ".txt",
        ".cfg",
        ".ini",
        ".conf",
        ".sh",
        ".md",
    }
)
HASHED_BYTES = 1 << 20


class FileFact(TypedDict, total=False):
    """What identifies one file a trial read: `sha256` for code and config, `size` and `mtime_ns`
    for data; `missing` True for a file gone since."""

    sha256: str
    size: int
    mtime_ns: int
    missing: bool


def file_fact(path: Path) -> FileFact:
    """The identity of one file a trial read, by the rule above (CODE_SUFFIXES, HASHED_BYTES)."""
    try:
        info = path.stat()
    except OSError:
        return {"missing": True}
    if path.suffix.lower() in CODE_SUFFIXES and info.st_size <= HASHED_BYTES:
        try:
            return {"sha256": file_sha256(path)}
        except OSError:
            return {"missing": True}
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


def files_read(log: Path, base: Path) -> dict[str, FileFact]:
    """The files a trial's processes read, from the lines its bootstrap wrote to `log`
    (planner/_trial/bootstrap/sitecustomize.py), as `read_facts` names them."""
    try:
        text = log.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return {}
    read, written = set(), set()
    for line in text.splitlines():
        kind, _, path = line.partition("\t")
        if kind == "w":
            written.add(path)
        elif kind in ("r", "x") and path:
            read.add(path)
    return read_facts(read, written, base)


def read_facts(
    read: Iterable[str],
    written: Iterable[str],
    base: Path,
    known: dict[str, FileFact] | None = None,
) -> dict[str, FileFact]:
    """The files a trial read (absolute paths) as its record keeps them: name (relative to `base`,
    the folder the trial runs in) -> `file_fact`. A file the trial opened for writing is an output,
    not an input, and is left out; a cached module (`__pycache__/x.cpython-312.pyc`) stands for its
    source. `known` (absolute path -> fact) keeps each file's fact as first looked at, so a trial
    asked again looks only at the files it read since."""
    inputs = {_source_of(path) for path in read} - {_source_of(path) for path in written}
    known = {} if known is None else known
    out: dict[str, FileFact] = {}
    for path in sorted(inputs):
        if path not in known and os.path.isfile(path):
            known[path] = file_fact(Path(path))
        name = read_name(path, base)
        # outside the folder the trial ran from (a module Ray shipped beside it, say), a name
        # would differ between the worker and the driver that checks it: code identity covers those
        if path in known and not name.startswith("../"):
            out[name] = known[path]
    return out


def read_name(path: str, base: Path) -> str:
    """A file a trial read as its record names it: from `base`, with forward slashes."""
    return os.path.relpath(path, base).replace(os.sep, "/")


_SOURCES: dict[tuple[str, str], tuple[list[Path], tuple]] = {}  # the last walk of each trainable


def trainable_sources(module_file: Path, module_name: str) -> list[Path]:
    """The trainable's file and the local modules it imports (`_import_walk` from its package
    root): what a function trial read even when they were loaded before it started. The walk is
    kept for the next trial of this process while none of the files it read changed."""
    key = (str(module_file), module_name)
    kept = _SOURCES.get(key)
    if kept is not None and _stamps(kept[0]) == kept[1]:
        return kept[0]
    files = _import_walk(module_file, _import_root(module_file, module_name))[1]
    _SOURCES[key] = (files, _stamps(files))
    return files


def _stamps(files: list[Path]) -> tuple:
    out: list[tuple[int, int] | None] = []
    for path in files:
        try:
            info = path.stat()
        except OSError:
            out.append(None)
            continue
        out.append((info.st_size, info.st_mtime_ns))
    return tuple(out)


def _source_of(path: str) -> str:
    if path.endswith(".pyc") and f"{os.sep}__pycache__{os.sep}" in path:
        try:
            return importlib.util.source_from_cache(path)
        except ValueError:
            return path
    return path


def changed_files(logged: dict[str, Any], base: Path) -> list[tuple[str, Any, FileFact]]:
    """The files of `logged` (name -> FileFact, names relative to `base`) that are not today what
    was recorded: (name, then, now); [] when none changed."""
    out = []
    for name, then in sorted(logged.items()):
        if not isinstance(then, dict):
            continue
        now = file_fact(base / name)
        if "sha256" in then:
            same = now.get("sha256") == then["sha256"]
        else:
            same = (now.get("size"), now.get("mtime_ns")) == (
                then.get("size"),
                then.get("mtime_ns"),
            )
        if not same:
            out.append((name, then, now))
    return out


def describe_fact(fact: Any) -> str:
    """A FileFact in a few words: `sha256 9adf0c1e2b3a`, `1048576 bytes, modified 2026-...`,
    `absent`."""
    if not isinstance(fact, dict) or fact.get("missing"):
        return "absent"
    if "sha256" in fact:
        return f"sha256 {str(fact['sha256'])[:12]}"
    mtime = fact.get("mtime_ns")
    when = (
        datetime.fromtimestamp(mtime / 1e9, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if isinstance(mtime, int)
        else "?"
    )
    return f"{fact.get('size')} bytes, modified {when}"


def records_files_read(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The union of the files the trials' records say they read (`inputs.files`), the first fact of
    each name kept (a run's trials read one code)."""
    out: dict[str, Any] = {}
    for record in records:
        inputs = record.get("inputs") if isinstance(record, dict) else None
        files = inputs.get("files") if isinstance(inputs, dict) else None
        if isinstance(files, dict):
            for name, fact in files.items():
                out.setdefault(name, fact)
    return out


def add_files_read(root: Path, records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Add to identity.json's `files_read` the files the trials read (`records_files_read`) that it
    does not list yet. Returns the names added."""

    def change(identity: dict[str, Any]) -> list[str]:
        found = identity.get("files_read")
        logged: dict[str, Any] = found if isinstance(found, dict) else {}
        added = {k: v for k, v in records_files_read(records).items() if k not in logged}
        if added:
            identity["files_read"] = dict(sorted({**logged, **added}.items()))
        return sorted(added)

    return _update_identity(Path(root), change)


def logged_files_read(run_dir: Path) -> dict[str, Any]:
    """The files a run's trials read, as logged: identity.json's `files_read` (written at the run's
    end) and each record's `inputs.files` (a run stopped before its end has only these)."""
    from planner._store.read import RunFolder  # the one reader of a run folder

    folder = RunFolder(run_dir)
    try:
        identity = folder.identity() or {}
        notes: list[str] = []
        records = list(folder.iter_trials(notes)) if folder.file("trials.jsonl").exists() else []
    except RunError:
        return {}
    found = identity.get("files_read")
    logged: dict[str, Any] = found if isinstance(found, dict) else {}
    return {**records_files_read(records), **logged}


def files_read_refusal(run_dir: Path, base: Path, shown: str) -> str | None:
    """Why `plan run --resume` refuses: a file the run's trials read is not what it was (a config
    file named as an argument, an exec'd configurator, a local module, a data file), naming it; or
    None. `base`: the folder the trials ran in; `shown`: the run folder as the message names it."""
    changed = changed_files(logged_files_read(run_dir), base)
    if not changed:
        return None
    said = "; ".join(
        f"{name}: {describe_fact(then)} then, {describe_fact(now)} now"
        for name, then, now in changed[:3]
    )
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return (
        f"a file the trials read changed since {shown} started ({said}{more}): the trials before "
        "and after would have run on different inputs as one recipe; a changed input is a new run, "
        "start it without --resume (or put the file back as it was)"
    )
