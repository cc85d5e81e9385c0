"""The one reader of a run folder (format: docs/run-folder.md).

`plan status`, `plan report`, `load_run`, export, MLflow, reeval, resume and
the pilot all read a run folder through here. Everything here only reads: a
run may be running while it is read. Every file is opened through
planner._store.files (a regular file inside the folder, no link followed,
size-capped) and checked against its schema (planner._store.schema) before
anything uses it. JSON lines follow one policy (`iter_jsonl`, documented in
docs/run-folder.md); a missing optional file reads as None. What cannot be
read raises `UsageError` (no such folder, not a run folder) or `RunError`
(exit 3: a file that is not valid JSON, of the wrong shape, a link, a FIFO,
...), each with one sentence naming the file and, for a wrong shape, the field.
No pandas here: `plan status` uses these readers alone. What the records show
(failures, violations, the held-out ledger, the budget) is computed beside it, in
planner._store.facts, from what it returns.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import yaml

from planner._core.errors import RunError, UsageError
from planner._core.records import TrialRecord
from planner._store import cache
from planner._store.bounds import too_deep
from planner._store.facts import slim_record
from planner._store.files import LINE_CAP, open_stream, read_inside
from planner._store.schema import Malformed, decode

RUN_MARKERS = ("run.json", "contract.yaml")


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic collector off while a large log is read (its state restored after).

    Parsed records hold no cycles and only accumulate, so every collection the allocations trigger
    walks them in vain: about a tenth of reading 10,000 trials x 100 reports.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


Record = TypeVar("Record")


@dataclass
class JsonLines(Generic[Record]):
    """The records of a JSON lines file and what was skipped while reading it."""

    records: list[Record]
    notes: list[str] = field(default_factory=list)
    torn: bool = False


def _recover(line: bytes, name: str, where: str) -> dict[str, Any] | None:
    """The whole JSON object that ends a damaged line, if there is one (checked as the file's
    records are).

    A run that crashed mid-append and then resumed glues its next record onto
    the torn one: `{"trial_id": "a", "pha{"trial_id": "b", ...}`. Only the start
    of a top-level object parses through to the end of the line (a nested one
    leaves its enclosing brackets over), so the last whole record is found by
    trying each `{` from the right.
    """
    line = line.rstrip()
    pos = len(line)
    for _ in range(100_000):
        pos = line.rfind(b"{", 0, pos)
        if pos <= 0:
            return None
        try:
            value = decode(name, line[pos:], where)
        except Malformed:
            continue
        if isinstance(value, dict):
            return value
    return None


def iter_jsonl(path: Path, notes: list[str], *, root: Path | None = None) -> Iterator[Any]:
    """Stream the records of an append-only JSON lines file (none when it is missing).

    A last line that does not parse is a torn write: it is skipped, and a note says so. A line
    inside the file that does not parse is a torn write that a resumed run appended after: the whole
    record at its end is kept and the torn part skipped (noted); a line with no whole record is
    skipped (noted). A line that holds JSON but not an object is a RunError: that is not a trials
    log. The file is read line by line: memory stays flat. It must be a regular file inside `root`
    (default: its folder), reached without following a link; a line longer than 256 MiB is refused
    (RunError). Every record is decoded and checked against the schema of the file's name
    (planner._store.schema).
    """
    f = open_stream(path.parent if root is None else root, path)
    if f is None:
        return
    name = path.name
    bad: tuple[int, bytes] | None = None  # a line that did not parse: torn if nothing follows it
    with f:
        for number, line in enumerate(iter(lambda: f.readline(LINE_CAP + 1), b""), start=1):
            if len(line) > LINE_CAP:
                raise RunError(
                    f"line {number} of {path} is longer than {LINE_CAP >> 20} MiB: it is not a "
                    "record a run wrote"
                )
            if line.isspace():  # no copy of the line, as strip() makes
                continue
            if bad is not None:
                recovered = _recover(bad[1], name, f"line {bad[0]} of {path}")
                if recovered is None:
                    notes.append(
                        f"line {bad[0]} of {path.name} is damaged (not valid JSON) and was skipped"
                    )
                else:
                    notes.append(
                        f"line {bad[0]} of {path.name} starts with a write cut short (a crash "
                        "before a resume): that part was skipped, the whole record after it kept"
                    )
                    yield recovered
                bad = None
            try:
                value = decode(name, line, f"line {number} of {path}")
            except Malformed:
                bad = (number, line)
                continue
            if not isinstance(value, dict):
                raise RunError(
                    f"line {number} of {path} is not a JSON object: this is not a run's log"
                )
            yield value
    if bad is not None:
        notes.append(
            f"the last line of {path.name} (line {bad[0]}) is incomplete, as a write cut short "
            "leaves it, and was skipped"
        )


def read_jsonl(
    path: Path, *, slim: dict[str, Any] | None = None, root: Path | None = None
) -> JsonLines[dict[str, Any]]:
    """Every record of a JSON lines file, each checked against the schema of its file (by its name).

    With `slim` (a contract), trial records are slimmed (planner._store.facts.slim_record).
    """
    notes: list[str] = []
    with paused_gc():
        records = iter_jsonl(path, notes, root=root)
        if slim is not None:
            records = (slim_record(r, slim) for r in records)
        kept = list(records)
    return JsonLines(kept, notes, torn=bool(notes))


def read_json(
    path: Path, *, required: bool = False, root: Path | None = None
) -> dict[str, Any] | None:
    """A JSON object file (written atomically); None when absent and not required.

    The file must be a regular file inside `root` (default: its folder), reached without following a
    link, of at most 64 MiB, and its content must match the schema of its name
    (planner._store.schema).
    """
    text = read_inside(path.parent if root is None else root, path)
    if text is None:
        if required:
            raise RunError(f"{path} is missing: the run folder is incomplete")
        return None
    try:
        value = decode(path.name, text, str(path))
    except Malformed:
        raise RunError(f"{path} is not valid JSON: the file is damaged") from None
    if not isinstance(value, dict):
        raise RunError(f"{path} does not hold a JSON object")
    return value


def read_yaml(
    path: Path, *, required: bool = False, root: Path | None = None
) -> dict[str, Any] | None:
    """A YAML mapping file of the run (contract.yaml, configs/<arm>.yaml), opened as `read_json`
    opens one."""
    data = read_inside(path.parent if root is None else root, path)
    if data is None:
        if required:
            raise RunError(f"{path} is missing: the run folder is incomplete")
        return None
    try:
        value = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RunError(f"{path} is not UTF-8 text: the file is damaged") from None
    except yaml.YAMLError:
        raise RunError(f"{path} is not valid YAML: the file is damaged") from None
    except RecursionError:
        raise too_deep(str(path)) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RunError(f"{path} does not hold a mapping")
    return value


class RunFolder:
    """A run folder on disk: paths and small, tolerant reads of its files."""

    def __init__(self, path: Path):
        self.path = path

    def file(self, name: str) -> Path:
        return self.path / name

    def json(self, name: str) -> dict[str, Any] | None:
        """A JSON file of the run, checked (None when absent)."""
        return read_json(self.file(name), root=self.path)

    def run_info(self) -> dict[str, Any]:
        info = self.json("run.json") or {}
        info.setdefault("run_id", self.path.name)
        return info

    def contract(self) -> dict[str, Any]:
        """The frozen contract as plain data ({} when a run wrote none yet)."""
        return read_yaml(self.file("contract.yaml"), root=self.path) or {}

    def state(self) -> dict[str, Any] | None:
        return self.json("state.json")

    def identity(self) -> dict[str, Any] | None:
        return self.json("identity.json")

    def plan(self) -> dict[str, Any] | None:
        return self.json("plan.json")

    def selection(self) -> dict[str, Any] | None:
        return self.json("selection.json")

    def decisions(self) -> dict[str, Any] | None:
        return self.json("decisions.json")

    def lock(self) -> dict[str, Any] | None:
        """The lock's holder, or None. A lock that does not parse is still a lock; a link or a
        FIFO is refused."""
        data = read_inside(self.path, self.file("lock"), cap=1 << 20)
        if data is None:
            return None
        try:
            value = decode("lock", data, str(self.file("lock")))
        except Malformed:
            value = None
        if not isinstance(value, dict):
            return {"pid": None, "host": None, "started": None}
        return value

    def trials(self, *, slim: dict[str, Any] | None = None) -> JsonLines[TrialRecord]:
        """trials.jsonl; pass the contract as `slim` to drop reports the facts
        (planner._store.facts) do not need."""
        lines = read_jsonl(self.file("trials.jsonl"), slim=slim, root=self.path)
        return cast("JsonLines[TrialRecord]", lines)  # each checked against the trial schema

    def iter_trials(self, notes: list[str]) -> Iterator[TrialRecord]:
        """trials.jsonl streamed, each record decoded and checked (memory stays flat)."""
        return iter_jsonl(self.file("trials.jsonl"), notes, root=self.path)

    def trials_digest(self) -> str | None:
        """The SHA-256 of trials.jsonl's bytes when the read cache is on and the file is large
        enough for it (planner._store.cache.MIN_BYTES), else None; opened as every read of it
        is."""
        if cache.folder() is None:  # the cache is off: nothing to look up
            return None
        handle = open_stream(self.path, self.file("trials.jsonl"))
        if handle is None:
            return None
        with handle:
            if os.fstat(handle.fileno()).st_size < cache.MIN_BYTES:
                return None
            return hashlib.file_digest(handle, "sha256").hexdigest()

    def events(self) -> JsonLines[dict[str, Any]]:
        return read_jsonl(self.file("events.jsonl"), root=self.path)

    def reevals(self) -> JsonLines[dict[str, Any]]:
        return read_jsonl(self.file("reevals.jsonl"), root=self.path)

    def configs(self) -> dict[str, dict[str, Any]]:
        """Each arm's effective config from configs/<arm>.yaml, by arm name."""
        folder = self.file("configs")
        if folder.is_symlink():
            raise RunError(
                f"{folder} is a symbolic link, not a folder inside the run folder: planner follows "
                "no link there; replace it with the folder the run wrote, or remove it"
            )
        if not folder.is_dir():
            return {}
        return {p.stem: read_yaml(p, root=self.path) or {} for p in sorted(folder.glob("*.yaml"))}

    def unresolved_configs(self) -> dict[str, dict[str, Any]]:
        """The arms whose config has interpolations: configs/unresolved/<arm>.yaml, before
        resolving."""
        folder = self.file("configs") / "unresolved"
        return (
            {p.stem: read_yaml(p) or {} for p in sorted(folder.glob("*.yaml"))}
            if folder.is_dir()
            else {}
        )


def open_run(run_dir: str | os.PathLike) -> RunFolder:
    """Check that `run_dir` is a run folder and return it; a clear UsageError otherwise."""
    path = Path(run_dir)
    if not path.exists():
        raise UsageError(
            f"{path} does not exist: give the path of a run folder, like runs/<name>/<run id>"
        )
    if not path.is_dir():
        raise UsageError(f"{path} is a file, not a run folder: give the folder that holds run.json")
    if not any((path / marker).is_file() for marker in RUN_MARKERS):
        subruns = sorted(
            p.name for p in path.iterdir() if p.is_dir() and (p / "run.json").is_file()
        )
        hint = f"; it holds runs: {', '.join(subruns[-3:])}" if subruns else ""
        raise UsageError(f"{path} is not a run folder: it has no run.json or contract.yaml{hint}")
    return RunFolder(path)
