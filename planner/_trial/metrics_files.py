"""Metrics read from the app's own log: a CSV, JSON lines, Hugging Face's trainer_state.json,
TensorBoard events.

A contract's `command: {run, metrics: {file, format, step, names, step_base}}`
says where an unchanged training script already writes its metrics. The
planner tails that file while the script runs and turns what it logged into
reports, so a tuning scheduler can stop the trial early
(docs/command-trainables.md lists the exact rules).

Two layers:

- pure (unit-tested): `csv_table`, `jsonl_table`, `trainer_state_table` parse
  the whole file content as it is now into rows (`tensorboard_table` reads an
  event file with the tensorboard package's own loader); `MetricsReader.feed(data)`
  merges the rows it has not seen yet by step into `(step, metrics)` reports,
  checks that steps increase, and survives partial last lines and whole-file
  rewrites (Lightning's CSVLogger rewrites the file when a new column appears;
  the Trainer rewrites trainer_state.json at each save);
- `MetricsFileTail`: finds the file (a glob, relative to the trial's Hydra
  output folder; the newest match wins), re-reads it when its size or time
  changes, and feeds the reader. For `tensorboard` the log is a folder, as
  TensorBoard reads one: every event file matching the glob in the newest
  match's folder, in name order (TensorBoard's DirectoryWatcher), read as one
  stream of rows (`trainer.test()` after fit opens a second file there).

How rows become reports (Lightning writes train, validation and test rows
apart, with empty cells): a row holding the decision metric (`require`) opens
the report of its step; rows before it since the previous report, and rows of
the same step after it, add their named values to it (the latest value of a
name wins). A row holding the held-out metric and not the decision metric
(`trainer.test()`'s row after fit, a Trainer's `test_*` entry) adds its values
to the report before it, whatever its step. A row holding no named value and
no later step (TensorBoardLogger's `hp_metric` at step 0, atop each event
file) changes nothing. A report is handed on once it
holds every name it can expect (each name already seen, and each name not
seen yet), or when a row of a later step comes, or when the script has ended.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from planner._core.errors import TrialProtocolError

FORMATS = ("csv", "jsonl", "hf_trainer_state", "tensorboard", "stdout")
MAX_FILE_BYTES = 256 * 1024 * 1024  # a metrics log larger than this is not a metrics log
# a parse error mid-run must survive a re-read this much later (a file caught mid-rewrite heals)
SETTLE_S = 0.2

Row = tuple[str, dict[str, Any]]  # (where: "line 3" / "log_history[2]", the row's non-empty cells)


@dataclass(frozen=True)
class MetricsSpec:
    """Where and how to read one trial's metrics; plain data, so it crosses to a Ray worker.

    `names` maps the planner's metric names to the file's columns (or keys);
    `require` is the planner name a row must hold to open a report (the
    contract's `metric.name`). `step_base` 0 means the step column counts from 0
    (Lightning's epochs): the exposure reached is its value + 1. `heldout` is the
    planner name of the held-out metric: a row holding it without `require`
    (a test row after fit) adds to the report before it. `heldout_file` is a
    flat JSON object (a Trainer's `save_metrics` `<split>_results.json`, a path or
    glob in the same folder) read once the script has ended, for the named
    columns the last report lacks.
    """

    file: str | None  # None for `stdout`: the lines the script prints are the log
    format: str
    step: str
    names: Mapping[str, str]
    require: str
    step_base: int = 1
    heldout: str | None = None
    heldout_file: str | None = None
    pattern: str | None = None  # `stdout`: the regular expression a printed line is searched with
    stream: str | None = None  # `stdout`: "stderr" to read that stream instead (None: stdout)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "file": self.file,
            "format": self.format,
            "step": self.step,
            "names": dict(self.names),
            "require": self.require,
            "step_base": self.step_base,
        }
        optional = (
            ("heldout", self.heldout),
            ("heldout_file", self.heldout_file),
            ("pattern", self.pattern),
            ("stream", self.stream),
        )
        # only when set: a spec without them reads as before
        return out | {key: value for key, value in optional if value is not None}

    @property
    def described(self) -> str:
        """The log in words: `'metrics.csv'`, or the stream the script prints to."""
        if self.format == "stdout":
            return f"the script's {self.stream or 'stdout'}"
        return repr(self.file)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricsSpec:
        return cls(**{**data, "names": dict(data["names"])})

    def without(self, name: str | None) -> MetricsSpec:
        """The same spec without the planner metric `name` (the held-out one during tuning)."""
        if name is None or name not in self.names or name == self.require:
            return self
        gone = name == self.heldout
        return replace(
            self,
            names={k: v for k, v in self.names.items() if k != name},
            heldout=None if gone else self.heldout,
            heldout_file=None if gone else self.heldout_file,
        )


# ------------------------------------------------------------------ parsing: bytes -> rows


@dataclass
class Table:
    """Rows parsed from the file as it is now. `whole` is False when the content is torn (wait for
    more)."""

    rows: list[Row] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    whole: bool = True
    first: int = (
        0  # the number of rows before `rows` (a stream's rows are handed over once, as they come)
    )


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise TrialProtocolError(f"{where} is not UTF-8 text ({error})") from None


def _complete(data: bytes, final: bool) -> bytes:
    """The bytes up to the last newline; all of them when `final` (the writer has exited)."""
    if final:
        return data
    cut = data.rfind(b"\n")
    return data[: cut + 1] if cut >= 0 else b""


def csv_table(data: bytes, *, final: bool = False, where: str = "metrics file") -> Table:
    """A CSV with a header line, one row per line, empty cells for absent values (Lightning's
    CSVLogger).

    An unterminated last line is left for later, or, when `final`, read if it has
    as many cells as the header (else skipped as torn). A row with more cells
    than the header is an error. A first column without a name is the row index
    pandas writes (`DataFrame.to_csv(path)`, `index=True` by default): not read.
    """
    complete = _complete(data, final=False)
    tail = data[len(complete) :] if final else b""
    lines = list(csv.reader(io.StringIO(_text(complete, where), newline="")))
    if not lines:
        if tail.strip():  # only a header, unterminated, and the writer has exited
            header = next(
                csv.reader(io.StringIO(tail.decode("utf-8", errors="replace"), newline="")), []
            )
            return Table([], [c.strip() for c in header])
        return Table()
    header = [c.strip() for c in lines[0]]
    named = (
        header[1:] if header and header[0] == "" else header
    )  # pandas' unnamed index column, left out
    if len(set(named)) != len(named) or "" in named:
        raise TrialProtocolError(
            f"{where}: the header {','.join(header)!r} has an empty or repeated column name"
        )
    rows: list[Row] = []
    for number, cells in enumerate(lines[1:], start=2):
        row = _csv_row(header, cells, f"{where} line {number}", torn_ok=False)
        if row is not None:
            rows.append((f"line {number}", row))
    if tail.strip():
        cells = next(
            csv.reader(io.StringIO(tail.decode("utf-8", errors="replace"), newline="")), []
        )
        row = _csv_row(header, cells, f"{where} last line", torn_ok=True)
        if row is not None:
            rows.append((f"line {len(lines) + 1}", row))
    return Table(rows, header)


def _csv_row(
    header: list[str], cells: list[str], where: str, torn_ok: bool
) -> dict[str, str] | None:
    if not cells or all(not c.strip() for c in cells):
        return None  # a blank line
    if len(cells) != len(header):
        if torn_ok:
            return None
        raise TrialProtocolError(
            f"{where} has {len(cells)} cells, the header has {len(header)} ({','.join(header)})"
        )
    return {
        name: cell.strip()
        for name, cell in zip(header, cells, strict=True)
        if name and cell.strip() != ""
    }


def jsonl_table(data: bytes, *, final: bool = False, where: str = "metrics file") -> Table:
    """One JSON object per line. An unterminated last line is read when `final` and whole, else
    skipped."""
    complete = _complete(data, final=False)
    rows: list[Row] = []
    columns: dict[str, None] = {}
    lines = complete.split(b"\n")[:-1] if complete else []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            rows.append((f"line {number}", _json_object(line, f"{where} line {number}")))
    tail = data[len(complete) :]
    if final and tail.strip():
        try:
            rows.append((f"line {len(lines) + 1}", _json_object(tail, f"{where} last line")))
        except TrialProtocolError:
            pass  # torn: the writer was stopped mid-line
    for _, row in rows:
        columns.update(dict.fromkeys(row))
    return Table(rows, list(columns))


def _json_object(line: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        raise TrialProtocolError(f"{where} is not JSON ({error})") from None
    if not isinstance(value, dict):
        raise TrialProtocolError(
            f"{where} is a JSON {type(value).__name__}, not an object of metric names and values"
        )
    return {key: item for key, item in value.items() if item is not None}


def trainer_state_table(
    data: bytes, *, final: bool = False, where: str = "trainer_state.json"
) -> Table:
    """Hugging Face's TrainerState JSON: one row per entry of `log_history`.

    The Trainer rewrites the file whole at each save; content that is not whole
    JSON yet (caught mid-write) is torn: `whole` False, unless `final`.
    """
    if not data.strip():
        return Table(whole=False)
    try:
        state = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        if final:
            raise TrialProtocolError(f"{where} is not JSON ({error})") from None
        return Table(whole=False)
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise TrialProtocolError(
            f"{where} has no `log_history` list: it is not a Trainer's trainer_state.json"
        )
    rows: list[Row] = []
    columns: dict[str, None] = {}
    for i, entry in enumerate(state["log_history"]):
        if not isinstance(entry, dict):
            raise TrialProtocolError(f"{where}: log_history[{i}] is not an object")
        row = {key: value for key, value in entry.items() if value is not None}
        columns.update(dict.fromkeys(row))
        rows.append((f"log_history[{i}]", row))
    return Table(rows, list(columns))


def results_values(data: bytes, *, where: str = "results file") -> dict[str, Any]:
    """A flat JSON object of names and values: what a Trainer's `save_metrics(split, metrics)`
    writes."""
    return {
        key: item
        for key, item in _json_object(data, where).items()
        if not isinstance(item, dict | list)
    }


def tensorboard_table(path: str | Path, *, final: bool = False, where: str | None = None) -> Table:
    """A TensorBoard event file, read with the tensorboard package's own `EventFileLoader`.

    Scalars are taken in file order; consecutive scalars of one step form a row
    (a tag seen again at the same step starts the next row: another log call),
    with the event's step in the column `step`. A record still being written
    is left for the next read (the loader stops before it), and so is the last
    row unless `final` (the writer is done with the file): its log call may
    still be adding scalars to it, and a row once read is never read again.
    """
    loader_class, make_ndarray = _tensorboard()
    where = where or str(path)
    rows: list[Row] = []
    current: dict[str, Any] | None = None
    columns: dict[str, None] = {"step": None}
    try:
        events = list(loader_class(str(path)).Load())
    except Exception as error:  # the loader's own errors (a file that is not an event file)
        raise TrialProtocolError(
            f"{where} is not a TensorBoard event file ({type(error).__name__}: {error})"
        ) from None
    for event in events:
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            number = _scalar(value, make_ndarray)
            if number is None:
                continue
            if current is None or current["step"] != event.step or value.tag in current:
                current = {"step": event.step}
                rows.append((f"step {event.step} (row {len(rows) + 1})", current))
            current[value.tag] = number
            columns[value.tag] = None
    return Table(rows if final else rows[:-1], list(columns))


def _tensorboard():
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util.tensor_util import make_ndarray
    except ImportError:
        raise TrialProtocolError(
            "`format: tensorboard` reads event files with the tensorboard package, which is "
            "not installed where the trial runs: pip install tensorboard"
        ) from None
    return EventFileLoader, make_ndarray


def _scalar(value: Any, make_ndarray: Any) -> float | None:
    """A summary value's number when it is a scalar (EventFileLoader migrates simple_value to a
    tensor)."""
    if value.HasField("tensor"):
        array = make_ndarray(value.tensor)
        if array.shape == () and array.dtype.kind in "fiu":
            return float(array)
        return None
    if value.WhichOneof("value") == "simple_value":
        return float(value.simple_value)
    return None


PARSERS = {"csv": csv_table, "jsonl": jsonl_table, "hf_trainer_state": trainer_state_table}


# ------------------------------------------------------------------ rows -> reports


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise TrialProtocolError(f"{what} is {value!r}, not a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # also "nan", "inf", "1e-3"
        except ValueError:
            pass
    raise TrialProtocolError(f"{what} is {value!r}, not a number")


def _step(value: Any, what: str) -> int:
    number = _number(value, what)
    if not math.isfinite(number):
        raise TrialProtocolError(f"{what} is {value!r}; a step is a whole number")
    if number != int(
        number
    ):  # an evaluation every N optimizer steps, read by a fractional epoch column
        raise TrialProtocolError(
            f"{what} is {value!r}; a step is a whole number: the metric was logged between "
            "two whole values of that column (an evaluation every N steps: the Trainer's "
            "eval_strategy 'steps'). Evaluate once per epoch, or read the step from a column "
            "of whole numbers (metrics.step: step) with budget.unit in those steps"
        )
    return int(number)


@dataclass
class _Group:
    """The report being formed: the row with the decision metric, and the rows merged into it."""

    raw: float  # the step column's value
    step: int  # the exposure: raw + 1 - step_base
    where: str  # the row that opened it
    cells: dict[str, tuple[Any, str]]  # column -> (value, where it was read)
    emitted: bool = False


@dataclass
class _State:
    """What the reader knows; copied before a feed, so a feed that fails leaves it as it was."""

    seen: int = 0  # rows consumed
    last_step: int | None = None
    last_where: str | None = None
    carried: dict[str, tuple[Any, str]] = field(
        default_factory=dict
    )  # named cells since the last report
    group: _Group | None = None
    present: set[str] = field(default_factory=set)  # named columns that held a value in some row
    late: set[str] = field(
        default_factory=set
    )  # named columns that came in a row after their report's row
    notes: list[str] = field(default_factory=list)
    furthest: int | None = None  # the furthest step a row of named values held (as a report's step)


class MetricsReader:
    """Turns the file's content, fed again each time it changes, into the reports not yet seen.

    Rows are counted in file order; a rewrite (the same rows again, maybe with
    new columns) yields only the rows past those already seen. Rows are merged
    by step into reports (the module's docstring); a row with the decision
    metric must hold the step, and the steps of the reports strictly increase.
    """

    def __init__(self, spec: MetricsSpec, where: str = "metrics file"):
        self.spec = spec
        self.where = where
        self.parse = PARSERS.get(spec.format)
        self.state = _State()
        self.columns: list[str] = []
        self.reported = 0
        self.wanted = set(spec.names.values())
        self.switched_from: str | None = (
            None  # the log the rows so far came from, when the newest match changed
        )

    @property
    def seen(self) -> int:
        return self.state.seen

    @property
    def last_step(self) -> int | None:
        return self.state.last_step

    @property
    def furthest(self) -> int | None:
        """The furthest step a row of named values held, the metric or not (training rows past the
        last evaluation); the held-out metric's row is not counted."""
        return self.state.furthest

    def feed(
        self, data: bytes, *, final: bool = False, late: tuple[str, Mapping[str, Any]] | None = None
    ) -> list[tuple[int, dict[str, float]]]:
        """The new reports in `data` (the whole file as it is now); `final`: the script has ended.

        `late` is `(where, values)` read after the script ended (a `<split>_results.json`):
        its named values go to the last report, where that report lacks them.
        """
        if self.parse is None:
            raise TrialProtocolError(
                f"format {self.spec.format!r} is read from a path (tensorboard_table), not bytes"
            )
        return self.feed_table(
            self.parse(data, final=final, where=self.where), final=final, late=late
        )

    def feed_table(
        self,
        table: Table,
        *,
        final: bool = False,
        late: tuple[str, Mapping[str, Any]] | None = None,
    ) -> list[tuple[int, dict[str, float]]]:
        if not table.whole:
            return []
        if table.columns:
            self.columns = table.columns
        total = table.first + len(table.rows)
        if total < self.state.seen:  # caught mid-rewrite: the rest comes back
            if final:
                raise TrialProtocolError(self._fewer(total))
            return []
        self.switched_from = None  # the newest match carries on the rows read so far
        # all or nothing: a row that fails leaves the reader as it was, so a re-read fails the same
        # way
        state, out = copy.deepcopy(self.state), list[tuple[int, dict[str, float]]]()
        for where, row in table.rows[state.seen - table.first :]:
            self._row(state, where, row, out)
        state.seen = total
        if final:
            if late is not None:
                self._late(state, *late)
            self._flush(state, out)
        self.state = state
        self.reported += len(out)
        return out

    def _fewer(self, rows: int) -> str:
        """Why the log holds fewer rows than were read: rows removed from it, or another, shorter
        log now newest."""
        if self.switched_from is None or self.switched_from == self.where:
            return (
                f"{self.where} now holds {rows} rows, fewer than the {self.state.seen} already "
                f"read: the "
                "script rewrote its metrics with rows removed"
            )
        return (
            f"the newest match of metrics.file {self.spec.file!r} is now {self.where}, which "
            f"holds {rows} rows, "
            f"and no longer {self.switched_from}, which the {self.state.seen} rows read so far "
            f"came from: the "
            "script began a second log beside the first (a new logger or Trainer opens its own "
            "version_* "
            "folder) and only the newest match is read. Log to one place, or point metrics.file "
            "at one log"
        )

    def _row(self, state: _State, where: str, row: dict[str, Any], out: list) -> None:
        spec = self.spec
        column = spec.names[spec.require]
        cells = {key: (value, where) for key, value in row.items() if key in self.wanted}
        state.present.update(cells)
        group = state.group
        raw = (
            _number(row[spec.step], f"{self.where} {where}: the step {spec.step!r}")
            if spec.step in row
            else None
        )
        if (
            cells
            and raw is not None
            and raw.is_integer()
            and not (spec.heldout and spec.names.get(spec.heldout) in row)
        ):
            # a row of named values (not the held-out one): what the script trained to. Lightning's
            # test row after fit, named nothing while tuning, carries the epoch after the last one
            # trained
            reached = int(raw) + 1 - spec.step_base
            state.furthest = reached if state.furthest is None else max(state.furthest, reached)
        if column in row:
            self._open(state, where, row, raw, cells, out)
        elif group is not None and raw is not None and raw == group.raw:
            self._merge(state, group, cells)
        elif spec.heldout and spec.names.get(spec.heldout) in row:
            self._held_out(state, where, cells, spec.names[spec.heldout])
        elif not cells and group is not None and (raw is None or raw < group.raw):
            # nothing named, no later step: TensorBoardLogger's hp_metric at step 0 atop each event
            # file
            return
        else:
            self._flush(state, out)
            state.carried.update(cells)
        self._hand_on_if_whole(state, out)

    def _open(
        self,
        state: _State,
        where: str,
        row: dict[str, Any],
        raw: float | None,
        cells: dict,
        out: list,
    ) -> None:
        spec, at = self.spec, f"{self.where} {where}"
        if raw is None:
            raise TrialProtocolError(
                f"{at} has {spec.names[spec.require]!r} but no step {spec.step!r} "
                f"(its columns: {', '.join(row)})"
            )
        step = _step(row[spec.step], f"{at}: the step {spec.step!r}") + (1 - spec.step_base)
        last = state.group.step if state.group is not None else state.last_step
        last_where = state.group.where if state.group is not None else state.last_where
        if last is not None and step <= last:
            raise TrialProtocolError(
                f"{at}: step {step} does not follow step {last} of "
                f"{last_where} (steps strictly increase)"
            )
        self._flush(state, out)
        state.group = _Group(raw, step, where, {**state.carried, **cells})
        state.carried = {}

    def _merge(self, state: _State, group: _Group, cells: dict) -> None:
        """A row of the report's own step, after the row that opened it (Lightning's epoch-end
        train row)."""
        if not cells:
            return
        state.late.update(key for key in cells if key not in group.cells)
        if not group.emitted:
            group.cells.update(cells)

    def _held_out(self, state: _State, where: str, cells: dict, held: str) -> None:
        """A row with the held-out metric (its column `held`), not the decision metric: it belongs
        to the report before it."""
        group = state.group
        if group is None or group.emitted:
            before = (
                "no report came before it"
                if group is None
                else f"the report of step {group.step} was made"
            )
            state.notes.append(
                f"{self.where} {where} holds {held!r} but {before}: its values were not read"
            )
            return
        state.late.update(key for key in cells if key not in group.cells)
        group.cells.update(cells)

    def _late(self, state: _State, where: str, values: Mapping[str, Any]) -> None:
        """Values read after the script ended (a results file) go to the last report, where it
        lacks them."""
        cells = {key: (value, where) for key, value in values.items() if key in self.wanted}
        state.present.update(cells)
        group = state.group
        if group is None or group.emitted:
            if cells:
                state.notes.append(
                    f"{where} holds {', '.join(sorted(cells))} but the last report was already "
                    "made: its values were not read"
                )
            return
        group.cells.update({key: cell for key, cell in cells.items() if key not in group.cells})

    def _expects(self, state: _State, column: str) -> bool:
        return column not in state.present or column in state.late

    def _hand_on_if_whole(self, state: _State, out: list) -> None:
        group = state.group
        if (
            group is not None
            and not group.emitted
            and all(
                column in group.cells or not self._expects(state, column) for column in self.wanted
            )
        ):
            self._emit(state, group, out)

    def _flush(self, state: _State, out: list) -> None:
        if state.group is not None and not state.group.emitted:
            self._emit(state, state.group, out)
        state.group = None

    def _emit(self, state: _State, group: _Group, out: list) -> None:
        metrics = {
            name: _number(group.cells[key][0], f"{self.where} {group.cells[key][1]}: {key!r}")
            for name, key in self.spec.names.items()
            if key in group.cells
        }
        out.append((group.step, metrics))
        group.emitted = True
        state.last_step, state.last_where = group.step, group.where

    def notes(self) -> list[str]:
        """Protocol notes for the end of the trial: named columns no row held, values that were not
        read."""
        out = list(self.state.notes)
        columns = ", ".join(self.columns) if self.columns else "none"
        for name, key in self.spec.names.items():
            if key not in self.state.present and name != self.spec.require:
                out.append(
                    f"metrics.names maps {name!r} to {key!r}, which no row of {self.where} holds "
                    f"(its columns: {columns}); {name!r} was not reported"
                )
        return out


# ------------------------------------------------------------------ tailing the file


class MetricsFileTail:
    """Tails the metrics log of one run of the script: `read_new()` while it runs, `finish()` after.

    `root` is the trial's Hydra output folder; `spec.file` a path or glob in it.
    With several matches the most recently modified one is read (a Trainer's
    newest `checkpoint-*/trainer_state.json`); on a tie, the larger. For
    `tensorboard` the log is the newest match's folder: its event files that
    match, in name order, as one stream (`_event_files`).
    """

    def __init__(self, root: Path, spec: MetricsSpec, workdir: Path | None = None):
        self.root = Path(root)
        self.spec = spec
        self.workdir = workdir  # the folder the script runs in, where a relative log would land
        self.started_ns = time.time_ns()
        self.path: Path | None = (
            None  # the newest match (tensorboard: the last event file of its folder)
        )
        self.files: list[
            Path
        ] = []  # what is read as the log: [path], or the folder's event files in name order
        self.reader: MetricsReader | None = None
        self._stat: tuple | None = None
        self._counts: list[
            tuple[Path, int]
        ] = []  # tensorboard: the rows read from each file, in stream order
        self._pending: tuple[tuple, float, TrialProtocolError] | None = None
        self._notes: list[str] = []

    @property
    def _file(self) -> str:
        """The log's path or glob: a tail is made only for a spec that names a file."""
        if self.spec.file is None:
            raise TypeError("a metrics file tail needs metrics.file (stdout is read as printed)")
        return self.spec.file

    def _find(self, pattern: str | None = None) -> Path | None:
        return _newest(self.root, pattern or self._file)

    def _log(self) -> list[Path]:
        if self.spec.format == "tensorboard":
            return _event_files(self.root, self._file)
        path = self._find()
        return [] if path is None else [path]

    def _source(self, files: list[Path]) -> Path:
        """What identifies the log: its file, or for tensorboard its folder (a new event file there
        continues it)."""
        return files[-1].parent if self.spec.format == "tensorboard" else files[-1]

    def _read(self, final: bool) -> list[tuple[int, dict[str, float]]]:
        files = self._log()
        late = self._results() if final else None
        if not files:
            return []
        if not self.files or self._source(files) != self._source(
            self.files
        ):  # the first match, or a newer log
            where = str(self._source(files))
            self.reader = self.reader or MetricsReader(self.spec, where)
            if self.reader.seen:
                self.reader.switched_from = self.reader.switched_from or self.reader.where
            self.reader.where = where
            self._stat, self._counts = None, []
        self.files, self.path = files, files[-1]
        try:
            stats = [path.stat() for path in files]
        except FileNotFoundError:
            return []
        key = tuple(
            (path.name, stat.st_size, stat.st_mtime_ns)
            for path, stat in zip(files, stats, strict=True)
        )
        if key == self._stat and not final and self._pending is None:
            return []
        for path, stat in zip(files, stats, strict=True):
            if stat.st_size > MAX_FILE_BYTES:
                raise TrialProtocolError(
                    f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB; it is not read as a "
                    "metrics log"
                )
        assert self.reader is not None
        try:
            out = self._feed(final, late)
        except FileNotFoundError:
            return []
        except TrialProtocolError as error:
            if final:
                raise
            now = (
                time.monotonic()
            )  # mid-run, a file caught between truncate and write heals: re-read later
            if self._pending is None or str(self._pending[2]) != str(error):
                self._pending = (key, now, error)
                return []
            if now - self._pending[1] < SETTLE_S:
                return []
            raise
        self._pending = None
        self._stat = key
        return out

    def _table(self, final: bool) -> tuple[Table, list[tuple[Path, int]]]:
        """The log's rows as they are now, and for tensorboard how many came from each file."""
        if self.spec.format != "tensorboard":
            path = self.files[0]
            return PARSERS[self.spec.format](path.read_bytes(), final=final, where=str(path)), []
        last = self.files[
            -1
        ]  # an earlier file is done: its writer was closed before the next file opened
        tables = [
            (path, tensorboard_table(path, final=final or path != last)) for path in self.files
        ]
        rows = [
            (f"{path.name} {where}", row) for path, table in tables for where, row in table.rows
        ]
        columns = dict.fromkeys(column for _, table in tables for column in table.columns)
        return Table(rows, list(columns)), [(path, len(table.rows)) for path, table in tables]

    def _feed(self, final: bool, late: tuple[str, dict[str, Any]] | None) -> list:
        assert self.reader is not None
        table, counts = self._table(final)
        self._check_appended(counts)
        out = self.reader.feed_table(table, final=final, late=late)
        self._counts = counts
        return out

    def _check_appended(self, counts: list[tuple[Path, int]]) -> None:
        """The rows read so far from a folder's event files must begin its stream now: files only
        grow, and only the last one read from (TensorBoard reads a folder's files one after another
        and never goes back)."""
        before = [(path, n) for path, n in self._counts if n]
        now = dict(counts)
        for path, n in before:
            if now.get(path, 0) < n:
                raise TrialProtocolError(
                    f"{path} now holds {now.get(path, 0)} rows, fewer than the {n} already read "
                    "from it: the script rewrote or removed an event file (TensorBoard's "
                    "writers only append)"
                )
        head = [path for path, n in counts if n][
            : len(before)
        ]  # every file read from still holds rows
        moved = next(
            (p for p, (q, _) in zip(head, before, strict=True) if p != q), None
        )  # rows before them
        late = moved or next((path for path, n in before[:-1] if now[path] != n), None)
        if late is not None:
            raise TrialProtocolError(
                f"{late} gained rows after {before[-1][0].name}, which comes after it in name "
                f"order, was read: two "
                f"writers wrote event files into {late.parent} at once. A folder's event files "
                f"are read one after "
                "another in name order, as TensorBoard reads them: close one SummaryWriter before "
                "the next opens "
                "there, or give each its own folder"
            )

    def rows(self) -> list[Row]:
        """The log's rows as they are now, read afresh (a look before the first report); [] when
        unreadable."""
        if not self.files:
            return []
        try:
            return self._table(final=False)[0].rows
        except (OSError, TrialProtocolError):
            return []

    def described(self) -> str:
        """The log in words, for a message: its file, or a folder's event files."""
        if self.spec.format == "tensorboard" and self.files:
            return (
                f"the event files in {self.files[-1].parent} "
                f"({', '.join(path.name for path in self.files)})"
            )
        return f"the metrics file {self.path}"

    def _results(self) -> tuple[str, dict[str, Any]] | None:
        """The `heldout_file` (a flat JSON object), read once the script has ended; None when
        absent."""
        if not self.spec.heldout_file:
            return None
        path = self._find(self.spec.heldout_file)
        if path is None:
            self._notes.append(
                f"metrics.heldout_file {self.spec.heldout_file!r} never appeared in {self.root}: "
                "the held-out metric was not read from it"
            )
            return None
        if path.stat().st_size > MAX_FILE_BYTES:
            raise TrialProtocolError(
                f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB; it is not read"
            )
        return str(path), results_values(path.read_bytes(), where=str(path))

    def read_new(self) -> list[tuple[int, dict[str, float]]]:
        return self._read(final=False)

    def finish(self) -> tuple[list[tuple[int, dict[str, float]]], str | None]:
        return self._read(final=True), None

    def notes(self) -> list[str]:
        """Protocol notes for the end of the trial (after `finish`): names no row held, values not
        read."""
        return self._notes + (self.reader.notes() if self.reader is not None else [])

    @property
    def reached(self) -> int | None:
        """The furthest step the log showed the script trained to (`MetricsReader.furthest`)."""
        return self.reader.furthest if self.reader is not None else None

    def nothing_read(self) -> str:
        """Why no report came from the file: it never appeared, or it never held the metric."""
        spec = self.spec
        column = spec.names[spec.require]
        if self.path is None:
            present = sorted(
                str(p.relative_to(self.root))
                for p in self.root.rglob("*")
                if p.is_file() and ".hydra" not in p.parts
            )[:10]
            there = (
                f"; files there: {', '.join(present)}"
                if present
                else "; nothing else was written there"
            )
            stray = self._in_workdir()
            if stray is not None:
                return (
                    f"the metrics file {spec.file!r} never appeared in the trial's output folder "
                    f"{self.root}, and {stray} appeared in the folder the script runs in while it "
                    "ran: the script writes its outputs relative to its working folder, which "
                    "every trial shares. Give it the trial's output folder through the key it "
                    "reads its output folder from, in the contract's config: "
                    "`output_dir: ${hydra:runtime.output_dir}`"
                )
            return (
                f"the metrics file {spec.file!r} never appeared in the trial's Hydra output folder "
                f"{self.root}{there}. Write the log inside Hydra's output folder "
                "(HydraConfig.get().runtime.output_dir), or fix `metrics.file`"
            )
        columns = self.reader.columns if self.reader else []
        return (
            f"{self.described()} never held {column!r} (for the metric {spec.require!r}); "
            f"its columns: {', '.join(columns) if columns else 'none'}. Fix `metrics.names` or "
            f"`metrics.step`"
        )

    def _in_workdir(self) -> Path | None:
        """A file matching `metrics.file` that the script wrote in its working folder while it
        ran."""
        if self.workdir is None or self.spec.file is None:
            return None
        try:
            found = _newest(self.workdir, self.spec.file)
            fresh = found is not None and found.stat().st_mtime_ns >= self.started_ns
        except OSError:
            return None
        return found if fresh else None

    def close(self) -> None:
        pass


def _matches(root: Path, pattern: str) -> list[Path]:
    """The files matching `pattern` (a path or a glob) under `root`."""
    if any(ch in pattern for ch in "*?["):
        return [p for p in root.glob(pattern) if p.is_file()]
    return [root / pattern] if (root / pattern).is_file() else []


def _newest(root: Path, pattern: str) -> Path | None:
    """The newest file matching `pattern` (a path or a glob) under `root`; None when none does."""
    matches = _matches(root, pattern)
    return max(matches, key=_recency) if matches else None


def _event_files(root: Path, pattern: str) -> list[Path]:
    """The event files read as one log: those matching `pattern` in the newest match's folder, in
    name order.

    As TensorBoard reads a run's folder (its DirectoryWatcher): the files whose
    name holds `tfevents`, less the profiler's `.profile-empty` placeholders,
    sorted by name (the writer's time comes first in it) and read one after
    another. A newer folder (Lightning's next version_*) is a newer log.
    """
    matches = [
        p
        for p in _matches(root, pattern)
        if "tfevents" in p.name and not p.name.endswith(".profile-empty")
    ]
    if not matches:
        return []
    folder = max(matches, key=_recency).parent
    return sorted((p for p in matches if p.parent == folder), key=lambda p: p.name)


def _recency(path: Path) -> tuple[int, int, str]:
    """Newest first; on a tie of times (coarse clocks), the larger file: a later save holds more
    rows."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (0, 0, str(path))
    return (stat.st_mtime_ns, stat.st_size, str(path))
