"""Metrics read from the app's own log: a CSV, JSON lines, or Hugging Face's trainer_state.json.

A contract's `command: {run, metrics: {file, format, step, names, step_base}}`
says where an unchanged training script already writes its metrics. The
planner tails that file while the script runs and turns each new row holding
the contract's metric into a report, so a tuning scheduler can stop the trial
early (docs/command-trainables.md lists the exact rules).

Two layers:

- pure, on bytes (unit-tested): `csv_table`, `jsonl_table`, `trainer_state_table`
  parse the whole file content as it is now into rows; `MetricsReader.feed(data)`
  turns the rows it has not seen yet into `(step, metrics)` reports, checks that
  steps increase, and survives partial last lines and whole-file rewrites
  (Lightning's CSVLogger rewrites the file when a new column appears; the
  Trainer rewrites trainer_state.json at each save);
- `MetricsFileTail`: finds the file (a glob, relative to the trial's Hydra
  output folder; the newest match wins), re-reads it when its size or time
  changes, and feeds the reader.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._core.errors import TrialProtocolError

FORMATS = ("csv", "jsonl", "hf_trainer_state")
MAX_FILE_BYTES = 256 * 1024 * 1024  # a metrics log larger than this is not a metrics log
SETTLE_S = 0.2  # a parse error mid-run must survive a re-read this much later (a file caught mid-rewrite heals)

Row = tuple[str, dict[str, Any]]  # (where: "line 3" / "log_history[2]", the row's non-empty cells)


@dataclass(frozen=True)
class MetricsSpec:
    """Where and how to read one trial's metrics; plain data, so it crosses to a Ray worker.

    `names` maps the planner's metric names to the file's columns (or keys);
    `require` is the planner name a row must hold to be a report (the
    contract's `metric.name`). `step_base` 0 means the step column counts from 0
    (Lightning's epochs): the exposure reached is its value + 1.
    """

    file: str
    format: str
    step: str
    names: Mapping[str, str]
    require: str
    step_base: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format, "step": self.step, "names": dict(self.names),
                "require": self.require, "step_base": self.step_base}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricsSpec:
        return cls(**{**data, "names": dict(data["names"])})

    def without(self, name: str | None) -> MetricsSpec:
        """The same spec without the planner metric `name` (the held-out one during tuning)."""
        if name is None or name not in self.names or name == self.require:
            return self
        return MetricsSpec(self.file, self.format, self.step, {k: v for k, v in self.names.items() if k != name},
                           self.require, self.step_base)


# ------------------------------------------------------------------ parsing: bytes -> rows


@dataclass
class Table:
    """Rows parsed from the file as it is now. `whole` is False when the content is torn (wait for more)."""

    rows: list[Row] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    whole: bool = True


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
    """A CSV with a header line, one row per line, empty cells for absent values (Lightning's CSVLogger).

    An unterminated last line is left for later, or, when `final`, read if it has
    as many cells as the header (else skipped as torn). A row with more cells
    than the header is an error.
    """
    complete = _complete(data, final=False)
    tail = data[len(complete):] if final else b""
    lines = list(csv.reader(io.StringIO(_text(complete, where), newline="")))
    if not lines:
        if tail.strip():  # only a header, unterminated, and the writer has exited
            header = next(csv.reader(io.StringIO(tail.decode("utf-8", errors="replace"), newline="")), [])
            return Table([], [c.strip() for c in header])
        return Table()
    header = [c.strip() for c in lines[0]]
    if len(set(header)) != len(header) or "" in header:
        raise TrialProtocolError(f"{where}: the header {','.join(header)!r} has an empty or repeated column name")
    rows: list[Row] = []
    for number, cells in enumerate(lines[1:], start=2):
        row = _csv_row(header, cells, f"{where} line {number}", torn_ok=False)
        if row is not None:
            rows.append((f"line {number}", row))
    if tail.strip():
        cells = next(csv.reader(io.StringIO(tail.decode("utf-8", errors="replace"), newline="")), [])
        row = _csv_row(header, cells, f"{where} last line", torn_ok=True)
        if row is not None:
            rows.append((f"line {len(lines) + 1}", row))
    return Table(rows, header)


def _csv_row(header: list[str], cells: list[str], where: str, torn_ok: bool) -> dict[str, str] | None:
    if not cells or all(not c.strip() for c in cells):
        return None  # a blank line
    if len(cells) != len(header):
        if torn_ok:
            return None
        raise TrialProtocolError(f"{where} has {len(cells)} cells, the header has {len(header)} "
                                 f"({','.join(header)})")
    return {name: cell.strip() for name, cell in zip(header, cells, strict=True) if cell.strip() != ""}


def jsonl_table(data: bytes, *, final: bool = False, where: str = "metrics file") -> Table:
    """One JSON object per line. An unterminated last line is read when `final` and whole, else skipped."""
    complete = _complete(data, final=False)
    rows: list[Row] = []
    columns: dict[str, None] = {}
    lines = complete.split(b"\n")[:-1] if complete else []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            rows.append((f"line {number}", _json_object(line, f"{where} line {number}")))
    tail = data[len(complete):]
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
        raise TrialProtocolError(f"{where} is a JSON {type(value).__name__}, not an object of metric names and values")
    return {key: item for key, item in value.items() if item is not None}


def trainer_state_table(data: bytes, *, final: bool = False, where: str = "trainer_state.json") -> Table:
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
        raise TrialProtocolError(f"{where} has no `log_history` list: it is not a Trainer's trainer_state.json")
    rows: list[Row] = []
    columns: dict[str, None] = {}
    for i, entry in enumerate(state["log_history"]):
        if not isinstance(entry, dict):
            raise TrialProtocolError(f"{where}: log_history[{i}] is not an object")
        row = {key: value for key, value in entry.items() if value is not None}
        columns.update(dict.fromkeys(row))
        rows.append((f"log_history[{i}]", row))
    return Table(rows, list(columns))


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
    if not math.isfinite(number) or number != int(number):
        raise TrialProtocolError(f"{what} is {value!r}; a step is a whole number")
    return int(number)


class MetricsReader:
    """Turns the file's content, fed again each time it changes, into the reports not yet seen.

    Rows are counted in file order; a rewrite (the same rows again, maybe with
    new columns) yields only the rows past those already seen. A row without
    the required metric is skipped; a row with it must hold the step, and steps
    of the reports strictly increase.
    """

    def __init__(self, spec: MetricsSpec, where: str = "metrics file"):
        self.spec = spec
        self.where = where
        self.parse = PARSERS[spec.format]
        self.seen = 0  # rows consumed, skipped ones included
        self.last_step: int | None = None
        self.last_where: str | None = None
        self.columns: list[str] = []
        self.reported = 0

    def feed(self, data: bytes, *, final: bool = False) -> list[tuple[int, dict[str, float]]]:
        table = self.parse(data, final=final, where=self.where)
        if not table.whole:
            return []
        if table.columns:
            self.columns = table.columns
        if len(table.rows) < self.seen:  # caught mid-rewrite: the rest comes back
            if final:
                raise TrialProtocolError(f"{self.where} now holds {len(table.rows)} rows, fewer than the {self.seen} "
                                         "already read: the script rewrote its metrics with rows removed")
            return []
        # all or nothing: a row that fails leaves the reader as it was, so a re-read fails the same way
        out, last_step, last_where = [], self.last_step, self.last_where
        for where, row in table.rows[self.seen:]:
            report = self._report(where, row, last_step, last_where)
            if report is not None:
                out.append(report)
                last_step, last_where = report[0], where
        self.seen, self.last_step, self.last_where = len(table.rows), last_step, last_where
        self.reported += len(out)
        return out

    def _report(self, where: str, row: dict[str, Any], last_step: int | None,
                last_where: str | None) -> tuple[int, dict[str, float]] | None:
        spec = self.spec
        column = spec.names[spec.require]
        if column not in row:
            return None
        at = f"{self.where} {where}"
        if spec.step not in row:
            raise TrialProtocolError(f"{at} has {column!r} but no step {spec.step!r} (its columns: {', '.join(row)})")
        step = _step(row[spec.step], f"{at}: the step {spec.step!r}") + (1 - spec.step_base)
        if last_step is not None and step <= last_step:
            raise TrialProtocolError(f"{at}: step {step} does not follow step {last_step} of "
                                     f"{last_where} (steps strictly increase)")
        return step, {name: _number(row[key], f"{at}: {key!r}") for name, key in spec.names.items() if key in row}


# ------------------------------------------------------------------ tailing the file


class MetricsFileTail:
    """Tails the metrics file of one run of the script: `read_new()` while it runs, `finish()` after.

    `root` is the trial's Hydra output folder; `spec.file` a path or glob in it.
    With several matches the most recently modified one is read (a Trainer's
    newest `checkpoint-*/trainer_state.json`); on a tie, the larger.
    """

    def __init__(self, root: Path, spec: MetricsSpec):
        self.root = Path(root)
        self.spec = spec
        self.path: Path | None = None
        self.reader: MetricsReader | None = None
        self._stat: tuple[int, int] | None = None
        self._pending: tuple[tuple[int, int], float, TrialProtocolError] | None = None

    def _find(self) -> Path | None:
        pattern = self.spec.file
        if any(ch in pattern for ch in "*?["):
            matches = [p for p in self.root.glob(pattern) if p.is_file()]
        else:
            matches = [self.root / pattern] if (self.root / pattern).is_file() else []
        if not matches:
            return None
        return max(matches, key=_recency)

    def _read(self, final: bool) -> list[tuple[int, dict[str, float]]]:
        path = self._find()
        if path is None:
            return []
        if path != self.path:
            self.path = path
            where = str(path)
            self.reader = self.reader or MetricsReader(self.spec, where)
            self.reader.where = where
            self._stat = None
        try:
            stat = path.stat()
        except FileNotFoundError:
            return []
        key = (stat.st_size, stat.st_mtime_ns)
        if key == self._stat and not final and self._pending is None:
            return []
        if stat.st_size > MAX_FILE_BYTES:
            raise TrialProtocolError(f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB; it is not read as a metrics log")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        assert self.reader is not None
        try:
            out = self.reader.feed(data, final=final)
        except TrialProtocolError as error:
            if final:
                raise
            now = time.monotonic()  # mid-run, a file caught between truncate and write heals: re-read later
            if self._pending is None or str(self._pending[2]) != str(error):
                self._pending = (key, now, error)
                return []
            if now - self._pending[1] < SETTLE_S:
                return []
            raise
        self._pending = None
        self._stat = key
        return out

    def read_new(self) -> list[tuple[int, dict[str, float]]]:
        return self._read(final=False)

    def finish(self) -> tuple[list[tuple[int, dict[str, float]]], str | None]:
        return self._read(final=True), None

    def nothing_read(self) -> str:
        """Why no report came from the file: it never appeared, or it never held the metric."""
        spec = self.spec
        column = spec.names[spec.require]
        if self.path is None:
            present = sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                             if p.is_file() and ".hydra" not in p.parts)[:10]
            there = f"; files there: {', '.join(present)}" if present else "; nothing else was written there"
            return (f"the metrics file {spec.file!r} never appeared in the trial's Hydra output folder "
                    f"{self.root}{there}. Write the log inside Hydra's output folder "
                    "(HydraConfig.get().runtime.output_dir), or fix `metrics.file`")
        columns = self.reader.columns if self.reader else []
        return (f"the metrics file {self.path} never held {column!r} (for the metric {spec.require!r}); "
                f"its columns: {', '.join(columns) if columns else 'none'}. Fix `metrics.names` or `metrics.step`")

    def close(self) -> None:
        pass


def _recency(path: Path) -> tuple[int, int, str]:
    """Newest first; on a tie of times (coarse clocks), the larger file: a later save holds more rows."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (0, 0, str(path))
    return (stat.st_mtime_ns, stat.st_size, str(path))
