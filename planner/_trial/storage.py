"""A trial's files in a storage every node reaches (`plan run --storage URI`), for checkpoints
across nodes.

Without a disk shared by the nodes, a checkpoint a trainable saves in `trial.dir` stays on the node
that ran the attempt. With a storage, each file the trial writes in its folder is copied there as
the trial reports (at every `trial.report`, the files new or changed since the last copy) and when
the attempt ends; an attempt that continues a cut-short one (`trial.resumed`), on whichever node,
finds the files back in `trial.dir` before the trainable starts. The storage is any URI pyarrow's
filesystems open: `s3://bucket/prefix` (`?endpoint_override=host:port&scheme=http` for an
S3-compatible server), `gs://bucket/prefix`, or a path every node mounts. Credentials come from the
nodes' environment (AWS_ACCESS_KEY_ID, ..., as pyarrow reads them), never from the run folder.

planner's own files in the folder (the attempt ledger, the kept record, the output log) travel to
the driver through Ray instead (planner._trial.attempts), so they are left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._core.errors import RunError

OWN_FILES = frozenset({".planner-attempts.json", ".planner-record.json", "output.log"})


def _filesystem(uri: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs  # type: ignore[import-untyped]

    try:
        return pafs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as error:
        raise RunError(f"cannot open the storage {uri.split('?')[0]}: {error}") from None


@dataclass
class TrialStorage:
    """The files of one trial's folder (`local`) kept in the storage folder `uri`, the trial's."""

    uri: str
    local: Path
    _sent: dict[str, tuple[int, int]] = field(default_factory=dict)  # relative path -> size, mtime

    def __post_init__(self) -> None:
        self.fs, self.root = _filesystem(self.uri)
        self.local = Path(self.local)

    def _local_files(self) -> dict[str, tuple[int, int]]:
        found = {}
        for dirpath, _, names in os.walk(self.local):
            for name in names:
                path = Path(dirpath) / name
                relative = path.relative_to(self.local).as_posix()
                if relative in OWN_FILES or name.startswith(".") and name.endswith(".tmp"):
                    continue
                try:
                    st = path.lstat()
                except OSError:
                    continue
                if not path.is_symlink() and path.is_file():
                    found[relative] = (st.st_size, st.st_mtime_ns)
        return found

    def push(self) -> int:
        """Copy the files new or changed since the last push to the storage; how many it copied."""
        import pyarrow.fs as pafs

        copied = 0
        for relative, stamp in self._local_files().items():
            if self._sent.get(relative) == stamp:
                continue
            target = f"{self.root}/{relative}"
            self.fs.create_dir(target.rpartition("/")[0], recursive=True)
            pafs.copy_files(str(self.local / relative), target, destination_filesystem=self.fs)
            self._sent[relative] = stamp
            copied += 1
        return copied

    def pull(self) -> int:
        """Copy every file the storage holds for the trial into its folder (an attempt that
        continues one cut short elsewhere); how many were copied."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.root, recursive=True, allow_not_found=True)
        copied = 0
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File:
                continue
            relative = info.path[len(self.root) :].lstrip("/")
            if not relative or ".." in relative.split("/") or relative in OWN_FILES:
                continue
            path = self.local / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            pafs.copy_files(info.path, str(path), source_filesystem=self.fs)
            copied += 1
        self._sent = self._local_files()
        return copied


def check_storage(uri: str, source: str = "--storage") -> None:
    """Refuse a storage whose URI is malformed (the contract's rule, `storage_problem`) or that
    cannot be opened here, before anything runs (a UsageError naming `source`: `--storage` or the
    contract's `storage`)."""
    from planner._contract.model import storage_problem
    from planner._core.errors import UsageError

    problem = storage_problem(uri)
    if problem is not None:
        raise UsageError(f"{source}: {problem}")
    try:
        _filesystem(uri)
    except RunError as error:
        raise UsageError(f"{source}: {error}") from None


def trial_storage(spec: Any) -> TrialStorage | None:
    """The storage of the trial `spec` (its extra names the run's `storage`), or None."""
    base = (spec.extra or {}).get("storage")
    if not base:
        return None
    where, _, query = str(base).partition("?")
    uri = f"{where.rstrip('/')}/{spec.trial_id}" + (f"?{query}" if query else "")
    return TrialStorage(uri, Path(spec.dir))
