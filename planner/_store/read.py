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
import json
import os
import secrets
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from planner._core.errors import RunError, UsageError
from planner._core.records import ReportSummary, TrialRecord
from planner._store.bounds import check_value, long_digits, quick_ok, too_deep
from planner._store.facts import (  # noqa: F401 (*)
    heldout_ledger,
    heldout_tuning_trials,
    reports_kept,
    slim_record,
)
from planner._store.files import LINE_CAP, open_stream, read_inside
from planner._store.schema import ReportColumns, check_lock, check_trial, checker, typed_columns

# (*) heldout_ledger and heldout_tuning_trials are no reader's: _dispatch/driver.py and _reeval/rerun.py import
# them from here until their owners import them from planner._store.facts; then this line keeps slim_record only.

try:  # optional: about twice as fast on trials.jsonl; the standard library is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None
try:  # the reports read from the text (setup.py builds it; optional): the whole-line reader where it was not built
    from planner._store._columns import scan as _scan
except ImportError:  # pragma: no cover - depends on the build
    _scan = None

RUN_MARKERS = ("run.json", "contract.yaml")


def _loads(line: bytes, where: str = "a JSON value") -> Any:
    """One JSON value; NaN and Infinity (as Python's json writes them) are accepted.

    Within the limits of planner._store.bounds (depth, 64-bit integers), else RunError naming `where`."""
    data = line if isinstance(line, bytes) else str(line).encode()
    value: Any = _NOTHING
    digits = long_digits(data)
    if _orjson is not None and not digits:  # orjson reads a huge integer as a float: not here
        try:
            value = _orjson.loads(line)
        except _orjson.JSONDecodeError:
            pass  # NaN / Infinity, which orjson refuses: the standard library reads them
    if value is _NOTHING:
        try:
            value = json.loads(line)
        except RecursionError:
            raise too_deep(where) from None
    if not quick_ok(data, value, digits=digits):
        check_value(value, where)
    return value


_NOTHING = object()


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


@dataclass
class JsonLines:
    """The records of a JSON lines file and what was skipped while reading it."""

    records: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    torn: bool = False


def _recover(line: bytes, where: str = "a JSON value") -> dict[str, Any] | None:
    """The whole JSON object that ends a damaged line, if there is one.

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
            value = _loads(line[pos:], where)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def iter_jsonl(
    path: Path,
    notes: list[str],
    *,
    root: Path | None = None,
    check: Any = None,
    pairs: bool = False,
    scan: Any = None,
) -> Iterator[Any]:
    """Stream the records of an append-only JSON lines file (none when it is missing).

    A last line that does not parse is a torn write: it is skipped, and a note
    says so. A line inside the file that does not parse is a torn write that a
    resumed run appended after: the whole record at its end is kept and the torn
    part skipped (noted); a line with no whole record is skipped (noted). A line
    that holds JSON but not an object is a RunError: that is not a trials log.
    The file is read line by line: memory stays flat. It must be a regular file inside `root` (default: its
    folder), reached without following a link; a line longer than 256 MiB is refused (RunError).
    `check(record, where)` (a schema check from planner._store.schema) is run on every record kept; with
    `pairs`, each record comes as (record, what the check returned). `scan(line, where)`, when given, may
    read a line itself (a checked pair, as `check` would give it) or leave it to the rest of this policy (None).
    """
    f = open_stream(path.parent if root is None else root, path)
    if f is None:
        return
    bad: tuple[int, bytes] | None = None  # a line that did not parse: torn if nothing follows it
    with f:
        for number, line in enumerate(iter(lambda: f.readline(LINE_CAP + 1), b""), start=1):
            if len(line) > LINE_CAP:
                raise RunError(
                    f"line {number} of {path} is longer than {LINE_CAP >> 20} MiB: it is not a record a "
                    "run wrote"
                )
            if line.isspace():  # no copy of the line, as strip() makes
                continue
            if bad is not None:
                recovered = _recover(bad[1], f"line {bad[0]} of {path}")
                if recovered is None:
                    notes.append(
                        f"line {bad[0]} of {path.name} is damaged (not valid JSON) and was skipped"
                    )
                else:
                    notes.append(
                        f"line {bad[0]} of {path.name} starts with a write cut short (a crash before a "
                        "resume): that part was skipped, the whole record after it kept"
                    )
                    checked = (
                        None if check is None else check(recovered, f"line {bad[0]} of {path}")
                    )
                    yield (recovered, checked) if pairs else recovered
                bad = None
            if scan is not None:
                scanned = scan(line, f"line {number} of {path}")
                if scanned is not None:
                    yield scanned
                    continue
            try:
                value = _loads(line, f"line {number} of {path}")
            except ValueError:
                bad = (number, line)
                continue
            if not isinstance(value, dict):
                raise RunError(
                    f"line {number} of {path} is not a JSON object: this is not a run's log"
                )
            checked = None if check is None else check(value, f"line {number} of {path}")
            yield (value, checked) if pairs else value
    if bad is not None:
        notes.append(
            f"the last line of {path.name} (line {bad[0]}) is incomplete, as a write cut short "
            "leaves it, and was skipped"
        )


_REPORTS_KEY = b'"reports": ['
# What stands in for the reports while the rest of a line is parsed: a text no file can hold (it is drawn
# anew by each process), so a parsed record whose `reports` is this one had its reports where they were read.
_STAND_IN = "planner-reports-" + "".join(
    secrets.choice(string.ascii_letters) for _ in range(32)
)  # no digits:
# a run of 19 would send every line to the slower exact parser (bounds.long_digits)
_STAND_IN_JSON = json.dumps(_STAND_IN).encode()


def scanned_trial(
    line: bytes, where: str, metrics: frozenset[str] | None = None
) -> tuple[TrialRecord, ReportColumns] | None:
    """A trial record whose reports are read from the line's text into typed columns, as a run writes them
    (planner/_store/_columns.c, `scan`), never built as a dict each; the rest of the line is parsed and
    checked as every line is. None when the line is anything else (the whole-line reader then takes it).

    The record comes with its `summary` (what the facts need of its reports) and empty `reports`; the
    columns keep the line, for a reader that needs the reports themselves (`whole_record`)."""
    start = (
        -1 if _scan is None else line.rfind(_REPORTS_KEY)
    )  # without the C reader: always the whole line
    if start < 0:
        return None
    start += len(_REPORTS_KEY) - 1  # at the "["
    taken = _scan(line, start, metrics)
    if taken is None:
        return None
    end, names, steps, times, last, values, numeric, first_time, last_time = taken
    try:
        record = _loads(line[:start] + _STAND_IN_JSON + line[end:], where)
    except ValueError:
        return None  # torn or damaged: the whole-line reader's policy says what that is
    if type(record) is not dict or record.get("reports") != _STAND_IN:
        return None  # the text read was not the record's own reports (a key of the same name elsewhere)
    record["reports"] = []
    check_trial(record, where, frozenset())
    columns = typed_columns(names, steps, times, last, values, numeric, line=line)
    record["summary"] = ReportSummary(
        frozenset(names), columns.steps[0], first_time, columns.steps[-1], last_time
    )
    return record, columns


def whole_record(line: bytes, where: str) -> TrialRecord:
    """A trial record's line read whole (its reports as dicts) and checked: for a record `scanned_trial` read."""
    record = _loads(line, where)
    check_trial(record, where, frozenset())
    return record


def kept_whole(
    record: TrialRecord, columns: ReportColumns | None, limits: tuple[Any, Any]
) -> TrialRecord:
    """`record`, read whole again when `scanned_trial` read it and a slimmed record keeps its reports (they
    show a violation, which the facts read them for; `limits`: `facts.report_limits(contract)`)."""
    if (
        columns is None
        or columns.line is None
        or not reports_kept(record, record["summary"], limits)
    ):
        return record
    return whole_record(
        columns.line, f"the record of trial {record.get('trial_id')!r} in trials.jsonl"
    )


def read_jsonl(
    path: Path, *, slim: dict[str, Any] | None = None, root: Path | None = None
) -> JsonLines:
    """Every record of a JSON lines file, each checked against the schema of its file (by its name).

    With `slim` (a contract), trial records are slimmed (planner._store.facts.slim_record).
    """
    notes: list[str] = []
    with paused_gc():
        if slim is None:
            records = list(iter_jsonl(path, notes, root=root, check=checker(path.name)))
        else:  # the check's columns name the metrics: the summary need not gather them again
            # (the text reader, `scanned_trial`, was measured here too: no faster, since the names alone are kept)
            records = [
                slim_record(r, slim, None if columns is None else set(columns.names))
                for r, columns in iter_jsonl(
                    path, notes, root=root, check=_trial_check(path.name), pairs=True
                )
            ]
    return JsonLines(records, notes, torn=bool(notes))


def _trial_check(name: str) -> Any:
    """The check of a trials log (returning its columns); of another file, its check returning None."""
    if name != "trials.jsonl":
        return checker(name)
    return lambda record, where: check_trial(
        record, where, frozenset()
    )  # names only: no values are kept


def read_json(
    path: Path, *, required: bool = False, root: Path | None = None
) -> dict[str, Any] | None:
    """A JSON object file (written atomically); None when absent and not required.

    The file must be a regular file inside `root` (default: its folder), reached without following a link,
    of at most 64 MiB, and its content must match the schema of its name (planner._store.schema).
    """
    text = read_inside(path.parent if root is None else root, path)
    if text is None:
        if required:
            raise RunError(f"{path} is missing: the run folder is incomplete")
        return None
    try:
        value = _loads(text, str(path))
    except ValueError:
        raise RunError(f"{path} is not valid JSON: the file is damaged") from None
    if not isinstance(value, dict):
        raise RunError(f"{path} does not hold a JSON object")
    check = checker(path.name)
    if check is not None:
        check(value, str(path))
    return value


def read_yaml(
    path: Path, *, required: bool = False, root: Path | None = None
) -> dict[str, Any] | None:
    """A YAML mapping file of the run (contract.yaml, configs/<arm>.yaml), opened as `read_json` opens one."""
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
        """The lock's holder, or None. A lock that does not parse is still a lock; a link or a FIFO is refused."""
        data = read_inside(self.path, self.file("lock"), cap=1 << 20)
        if data is None:
            return None
        try:
            value = _loads(data, str(self.file("lock")))
        except ValueError:
            value = None
        if not isinstance(value, dict):
            return {"pid": None, "host": None, "started": None}
        check_lock(value, str(self.file("lock")))
        return value

    def trials(self, *, slim: dict[str, Any] | None = None) -> JsonLines:
        """trials.jsonl; pass the contract as `slim` to drop reports the facts (planner._store.facts) do not need."""
        return read_jsonl(self.file("trials.jsonl"), slim=slim, root=self.path)

    def iter_trials(self, notes: list[str]) -> Iterator[TrialRecord]:
        """trials.jsonl streamed, each record checked (memory stays flat)."""
        return iter_jsonl(
            self.file("trials.jsonl"), notes, root=self.path, check=checker("trials.jsonl")
        )

    def iter_trial_columns(
        self, notes: list[str], metrics: list[str] | None = None
    ) -> Iterator[tuple[TrialRecord, ReportColumns | None]]:
        """trials.jsonl streamed, each record checked, with its reports as checked columns when they are
        regular (planner._store.schema.ReportColumns; None otherwise): a columnar reader takes them as they are.
        `metrics`: the metrics whose values the columns carry (every metric is checked; all by default)."""
        wanted = None if metrics is None else frozenset(metrics)
        check = (
            check_trial
            if wanted is None
            else (lambda record, where: check_trial(record, where, wanted))
        )
        scan = None if _scan is None else (lambda line, where: scanned_trial(line, where, wanted))
        return iter_jsonl(
            self.file("trials.jsonl"), notes, root=self.path, check=check, pairs=True, scan=scan
        )

    def events(self) -> JsonLines:
        return read_jsonl(self.file("events.jsonl"), root=self.path)

    def reevals(self) -> JsonLines:
        return read_jsonl(self.file("reevals.jsonl"), root=self.path)

    def configs(self) -> dict[str, dict[str, Any]]:
        """Each arm's effective config from configs/<arm>.yaml, by arm name."""
        folder = self.file("configs")
        if folder.is_symlink():
            raise RunError(
                f"{folder} is a symbolic link, not a folder inside the run folder: planner follows no "
                "link there; replace it with the folder the run wrote, or remove it"
            )
        if not folder.is_dir():
            return {}
        return {p.stem: read_yaml(p, root=self.path) or {} for p in sorted(folder.glob("*.yaml"))}

    def unresolved_configs(self) -> dict[str, dict[str, Any]]:
        """The arms whose config has interpolations: configs/unresolved/<arm>.yaml, before resolving."""
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
