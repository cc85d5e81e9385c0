"""A `command:` trial's checkpoints: found for a continuation, described for the record, pruned
after.

`command.checkpoint: {file: GLOB, resume_key: KEY, keep: all|last|none}`
(docs/command-trainables.md). GLOB is relative to an attempt's Hydra output
folder (where `metrics.file` is read), and is looked for in every attempt of
the trial (`trial.dir/attempt-*/hydra/GLOB`); it may match files (Lightning's
`.ckpt`) or folders (the Trainer's `checkpoint-*`).

- `newest`: the checkpoint a cut-short trial continues from (the newest match
  of any attempt).
- `describe`: what the record says of it: its path inside the run folder, its
  sha256 (of the file, or of a folder's files and their names), and the step
  it held where the checkpoint says (a Trainer's `trainer_state.json`, or
  `epoch=3`/`step=120`/`checkpoint-120` in its name).
- `prune`: after the trial ended, what `keep` says need not stay is removed.
- `disk_bytes`: what the trial's folder holds on disk.

No walk here follows a link: a match reached through a symlinked folder, or
outside the trial's folder, is never read, described or removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

from planner._store.identity import file_sha256

KEEP = ("all", "last", "none")
_HELD = (
    ("epoch", re.compile(r"(?:^|[^a-z])epoch[=_-]?(\d+)")),
    ("global_step", re.compile(r"(?:^|[^a-z])step[=_-]?(\d+)")),
    ("global_step", re.compile(r"^checkpoint-(\d+)$")),
)


def matches(trial_dir: str | os.PathLike, pattern: str) -> list[Path]:
    """Every match of `pattern` in the Hydra output folders of the trial's attempts, inside the
    trial's folder."""
    root = Path(trial_dir)
    if not root.is_dir() or root.is_symlink():
        return []
    out = []
    for attempt in sorted(root.glob("attempt-*")):
        hydra = attempt / "hydra"
        if _real_dir(attempt) and _real_dir(hydra):
            out += [path for path in hydra.glob(pattern) if _inside(root, path)]
    return out


def newest(trial_dir: str | os.PathLike, pattern: str) -> Path | None:
    """The most recently written match (a folder counts its newest file), or None."""
    found = [path for path in matches(trial_dir, pattern) if _candidate(path)]
    return max(found, key=_written, default=None)


def output_folder_of(path: Path) -> Path:
    """The output folder of the attempt that saved the checkpoint `path` (`attempt-N/hydra`, what
    `${hydra:runtime.output_dir}` was for it): the folder a script resuming by a flag reads it from.
    """
    for parent in path.parents:
        if parent.name == "hydra" and parent.parent.name.startswith("attempt-"):
            return parent
    return path.parent


def _candidate(path: Path) -> bool:
    """A regular file or a real folder: a link, a FIFO (opening it to hash it would wait forever),
    a device or a socket planted where a checkpoint is looked for is never a checkpoint."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def describe(path: Path, trial_dir: str | os.PathLike) -> dict[str, Any]:
    """{"path": inside the run folder, "sha256", "held": {"epoch" / "global_step": N} as far as
    known}."""
    trial_dir = Path(trial_dir).resolve()
    root = trial_dir.parents[1] if trial_dir.parent.name == "trials" else trial_dir
    return {
        "path": str(path.resolve().relative_to(root)),
        "sha256": _sha256(path),
        "held": _held(path),
    }


def prune(trial_dir: str | os.PathLike, pattern: str, keep: str) -> list[Path]:
    """Remove the matches `keep` does not keep (`last`: all but the newest; `none`: all); the
    removed paths.

    A match that is a link is removed as a link; what it points to is never touched."""
    if keep not in KEEP:
        raise ValueError(f"keep must be one of {', '.join(KEEP)}, not {keep!r}")
    if keep == "all":
        return []
    found = matches(trial_dir, pattern)
    last = newest(trial_dir, pattern) if keep == "last" else None
    removed = []
    for path in found:
        if path == last:
            continue
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path)  # the fd-based walk: it removes links inside, never follows them
        removed.append(path)
    return removed


def tidy(trial_dir: str | os.PathLike, checkpoint: dict[str, Any] | None) -> list[Path]:
    """`command.checkpoint` (None: none) applied to a trial that has ended: `prune` by its `keep`
    (`all` by default: nothing removed). The removed paths."""
    if not checkpoint:
        return []
    return prune(trial_dir, checkpoint["file"], checkpoint.get("keep", "all"))


# the trial's own record, kept after it is measured (planner._trial.attempts)
KEPT_RECORD = ".planner-record.json"


def disk_bytes(folder: str | os.PathLike) -> int | None:
    """Bytes the folder's files take on disk (allocated blocks; a link counts as itself); None if
    it is not there. The copy of the trial's record kept at its top (`KEPT_RECORD`) is not counted:
    it is written once the record, which holds this number, is made."""
    folder = Path(folder)
    if not folder.is_dir() or folder.is_symlink():
        return None
    total = 0
    for parent, dirs, files in _walk(folder):
        for name in dirs + files:
            if name == KEPT_RECORD and parent == str(folder):
                continue
            try:
                info = os.lstat(os.path.join(parent, name))
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                total += info.st_blocks * 512
    return total


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _inside(root: Path, path: Path) -> bool:
    """`path` is reached without a link from `root` down to its parent, and lies inside `root`."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    here = root
    for part in relative.parts[:-1]:
        here = here / part
        if here.is_symlink():
            return False
    return path.parent.resolve().is_relative_to(root.resolve())


def _walk(top: Path):
    """`os.walk(top, followlinks=False)`, top-down, without recursion (Python 3.11's os.walk
    recurses once a level): a tree thousands of folders deep planted in a trial's folder is walked,
    not a RecursionError that ends the run. A folder that cannot be listed (gone, unreadable, a
    path past PATH_MAX) is skipped."""
    stack = [str(top)]
    while stack:
        parent = stack.pop()
        try:
            with os.scandir(parent) as entries:
                listed = [(entry.name, _is_dir(entry)) for entry in entries]
        except OSError:
            continue
        dirs = [name for name, is_dir in listed if is_dir]
        files = [name for name, is_dir in listed if not is_dir]
        yield parent, dirs, files  # the caller may sort or prune `dirs`, as with os.walk
        stack.extend(os.path.join(parent, name) for name in reversed(dirs))


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _files(path: Path) -> list[Path]:
    """The regular files of a folder (sorted; no link, FIFO or device), or the file itself."""
    if not _real_dir(path):
        return [path] if _regular(path) else []
    out = []
    for parent, dirs, files in _walk(path):
        dirs.sort()
        out += [Path(parent) / name for name in sorted(files) if _regular(Path(parent) / name)]
    return out


def _written(path: Path) -> tuple[int, str]:
    times = [path.lstat().st_mtime_ns] + [f.lstat().st_mtime_ns for f in _files(path)]
    return max(times), str(path)


def _sha256(path: Path) -> str:
    """Of a file's bytes; of a folder: of each file's name inside it and its bytes' sha256, in
    order."""
    if not _real_dir(path):
        return file_sha256(path)
    digest = hashlib.sha256()
    for file in _files(path):
        digest.update(f"{file.relative_to(path).as_posix()}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def _held(path: Path) -> dict[str, int | float]:
    """The step the checkpoint held, as it says: a Trainer folder's trainer_state.json, else its
    name."""
    state = path / "trainer_state.json"
    if path.is_dir() and state.is_file() and not state.is_symlink():
        try:
            data = json.loads(state.read_text(encoding="utf-8"))
            return {
                key: data[key]
                for key in ("epoch", "global_step")
                if isinstance(data.get(key), int | float) and not isinstance(data.get(key), bool)
            }
        except (OSError, ValueError):
            return {}
    held: dict[str, int | float] = {}
    name = path.name.lower()
    for key, pattern in _HELD:
        found = pattern.search(name)
        if found and key not in held:
            held[key] = int(found.group(1))
    return held
