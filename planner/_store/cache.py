"""What reading a large trials.jsonl gathered, kept in the user's cache so that the next read of the
same journal does not decode it again (docs/speed.md, "A large run read again").

The journal stays the only truth: an entry is found by the SHA-256 of the journal's bytes (with
the reader's format and what the reading depended on), so a journal that changed by one byte
misses, and an entry is only ever written by this user's planner from a journal it read and
checked whole. It lives in the user's cache folder (`platformdirs.user_cache_dir`), never in the
run folder: a run folder may come from anyone, and an entry planted beside a journal could say
something the journal does not. `PLANNER_CACHE_DIR` names another folder; `off` (or empty) turns
the cache off.

Best effort: a folder that cannot be made, a disk that is full, an entry that does not decode or
does not hold together are a miss (the journal is read as without a cache), never an error.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from planner._core.errors import RunError
from planner._core.records import ReportSummary, TrialRecord
from planner._store.files import write_atomic

# Below this size a journal is read in well under a second: not worth an entry.
MIN_BYTES = 16 << 20
KEEP = 8  # entries kept; the least recently used go first
# The reader's format: raised whenever what a read gathers, or how, changes.
FORMAT = 1


@dataclass
class Gathered:
    """What reading trials.jsonl gathers, before the frames are built: the slim records (reports
    dropped), each record's report count and final values, and the reports as runs (one per
    record and metric) over three columns."""

    records: list[TrialRecord]
    n_reports: list[int]
    finals: dict[str, list[tuple[int, float]]]
    metric_names: list[str]  # by code
    run_trial: np.ndarray  # int64, one per run
    run_metric: np.ndarray  # int64 codes into metric_names
    run_length: np.ndarray  # int64
    steps: np.ndarray  # int64, one per report row
    times: np.ndarray  # float64
    values: np.ndarray  # float64
    notes: list[str]  # what the read said of the journal (a torn last line)

    def holds_together(self) -> bool:
        rows = len(self.steps)
        runs = len(self.run_trial)
        return (
            len(self.n_reports) == len(self.records)
            and len(self.run_metric) == runs == len(self.run_length)
            and len(self.times) == rows == len(self.values)
            and int(self.run_length.sum()) == rows
            and (runs == 0 or int(self.run_trial.max()) < len(self.records))
            and (runs == 0 or int(self.run_metric.max()) < len(self.metric_names))
            and all(i < len(self.records) for pairs in self.finals.values() for i, _ in pairs)
        )


class _Entry(msgspec.Struct, array_like=True):
    format: int
    records: list[dict[str, Any]]
    n_reports: list[int]
    finals: dict[str, list[tuple[int, float]]]
    metric_names: list[str]
    notes: list[str]
    arrays: list[bytearray]  # run_trial, run_metric, run_length, steps, times, values


_ARRAYS = (
    ("run_trial", np.int64),
    ("run_metric", np.int64),
    ("run_length", np.int64),
    ("steps", np.int64),
    ("times", np.float64),
    ("values", np.float64),
)
_DECODER = msgspec.msgpack.Decoder(_Entry)


def folder() -> Path | None:
    """The cache folder, or None when the cache is off."""
    named = os.environ.get("PLANNER_CACHE_DIR")
    if named is not None:
        return None if named.strip().lower() in ("", "off") else Path(named)
    import platformdirs  # only here: a read that does not cache never loads it

    return Path(platformdirs.user_cache_dir("planner")) / "runs"


def key(journal_digest: str, depends: Sequence[Any]) -> str:
    """An entry's name: the journal's SHA-256, the reader's format and what the reading depended
    on (the contract's limits that decide which reports a slim record keeps)."""
    text = repr((FORMAT, journal_digest, tuple(depends)))
    return hashlib.sha256(text.encode()).hexdigest()


def load(name: str) -> Gathered | None:
    """The entry called `name`, or None (absent, unreadable, or not holding together)."""
    where = _own_folder(create=False)
    if where is None:
        return None
    path = where / name
    try:
        with open(path, "rb", opener=_no_follow) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return None
            entry = _DECODER.decode(handle.read())
        os.utime(path)  # recently used: the last to go
    except (OSError, msgspec.DecodeError):
        return None
    if entry.format != FORMAT or len(entry.arrays) != len(_ARRAYS):
        return None
    arrays = {
        field: np.frombuffer(data, dtype=kind)
        for (field, kind), data in zip(_ARRAYS, entry.arrays, strict=True)
    }
    try:
        records: list[TrialRecord] = [_record(r) for r in entry.records]
        gathered = Gathered(
            records=records,
            n_reports=entry.n_reports,
            finals=entry.finals,
            metric_names=entry.metric_names,
            notes=entry.notes,
            **arrays,
        )
        return gathered if gathered.holds_together() else None
    except (TypeError, ValueError):
        return None


def store(name: str, gathered: Gathered) -> None:
    """Keep `gathered` as the entry `name` (atomically), and drop the least recently used past
    KEEP; silently nothing when the cache cannot be written."""
    where = _own_folder(create=True)
    if where is None:
        return
    entry = _Entry(
        format=FORMAT,
        records=[_plain(r) for r in gathered.records],
        n_reports=gathered.n_reports,
        finals=gathered.finals,
        metric_names=gathered.metric_names,
        notes=gathered.notes,
        arrays=[
            bytearray(np.ascontiguousarray(getattr(gathered, field), dtype=kind).data)
            for field, kind in _ARRAYS
        ],
    )
    try:
        # the store's one atomic writer (a temporary file named ".*", as _evict leaves alone); no
        # fsync: an entry lost in a crash is only a miss
        write_atomic(where / name, msgspec.msgpack.encode(entry), mode=0o600, durable=False)
        _evict(where)
    except (OSError, RunError, TypeError, ValueError, OverflowError):
        return


def _record(plain: dict[str, Any]) -> TrialRecord:
    """A slim record as kept: its summary back into the named tuple the facts read."""
    summary = plain.get("summary")
    if summary is not None:
        names, *rest = summary
        plain["summary"] = ReportSummary(frozenset(names), *rest)
    return plain  # type: ignore[return-value]  # a record the reader checked when it was kept


def _plain(record: TrialRecord) -> dict[str, Any]:
    plain: dict[str, Any] = dict(record)
    summary = plain.get("summary")
    if isinstance(summary, ReportSummary):
        plain["summary"] = [sorted(summary.metric_names), *summary[1:]]
    return plain


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _own_folder(*, create: bool) -> Path | None:
    """The cache folder when it is this user's alone (a folder, not a link, owned by this user,
    writable by no one else); made with mode 0700 when `create`. None otherwise."""
    where = folder()
    if where is None:
        return None
    try:
        if create:
            where.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(where)
    except OSError:
        return None
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return None
    return where


def _evict(where: Path) -> None:
    entries = []
    for path in where.iterdir():
        try:
            if not path.name.startswith("."):
                entries.append((path.stat(follow_symlinks=False).st_mtime_ns, path))
        except OSError:
            continue
    for _, path in sorted(entries, reverse=True)[KEEP:]:
        path.unlink(missing_ok=True)
