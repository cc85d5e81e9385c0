"""What a running command reports, read as it arrives.

A script reports through `planner.report`, one JSON line per call appended to
`$PLANNER_REPORT_FILE` (`ReportTail` reads it as it grows; `parse_report_line`
is the one reading of a line), or, with `command.metrics`, through its own
metrics log (`planner._trial.metrics_files`), when the report file carries only
its `planner.log_split` lines (`WithSplits`).

Every source yields `(step, metrics)` per report and `(None, (name, summary))`
per logged split, from `read_new()` while the command runs and `finish()` once
it has ended (which also returns a torn last line, skipped).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner._core.errors import TrialProtocolError
from planner._trial.metrics_files import MetricsFileTail, MetricsSpec
from planner._trial.metrics_lines import PrintedMetricsTail, printed_reports

MAX_REPORT_LINE_BYTES = 1024 * 1024
# what frameworks put around a metric's name when they log an evaluation: `eval_accuracy` (the
# Trainer), `val_acc_epoch` (Lightning's on_epoch), `val/acc`
EVALUATION_AFFIXES = ("eval", "val", "valid", "validation", "test", "epoch", "step")
AFFIX_SEPARATORS = "_/-."
# a column this close to the metric's (difflib's ratio: `valacc` and `val_acc` 0.92, `valid_acc`
# 0.88; not `train_acc` 0.63 nor `val_accuracy` 0.74) that the log holds at two steps while it
# never holds the metric's is the metric misspelt: one step could be a sibling logged a row before
# the metric, two are not
TYPO_CUTOFF = 0.8
TYPO_STEPS = 2

Line = tuple[int | None, Any]  # (step, {name: value}) or (None, (split name, summary))


def report_source(
    report_file: Path,
    hydra_dir: Path,
    metrics: MetricsSpec | None,
    *,
    ended: bool = False,
    workdir: Path | None = None,
) -> ReportTail | WithSplits:
    """The reports of one attempt: its report file, or with `metrics` the script's own log under
    `hydra_dir` (for `stdout`, the lines it prints, tapped from the stream as they come:
    `WithSplits.printed`; `ended`: read from the stream's log in the attempt's folder, for an
    attempt that has ended). `workdir`: the folder the script runs in, named when the log appears
    there instead."""
    if metrics is None:
        return ReportTail(report_file)
    if metrics.format == "stdout":
        log = report_file.parent / f"{metrics.stream or 'stdout'}.log"
        tail = printed_reports(log, metrics) if ended else PrintedMetricsTail(metrics, log)
        return WithSplits(tail, ReportTail(report_file))
    return WithSplits(MetricsFileTail(hydra_dir, metrics, workdir), ReportTail(report_file))


def attempt_reports(
    attempt_dir: Path, metrics: MetricsSpec | None
) -> list[tuple[int, dict[str, float]]]:
    """What an attempt that has ended reported, read from its folder as it was read while it ran
    (its report file, or with `metrics` its own log): (step, metrics) in order. A log that no
    longer reads (torn by the kill that cut the attempt short, edited) gives the reports read
    before the fault."""
    report_file = attempt_dir / "reports.jsonl"
    if not report_file.is_file() or report_file.is_symlink():
        return []
    out: list[Line] = []
    source = report_source(report_file, attempt_dir / "hydra", metrics, ended=True)
    try:
        out += source.read_new()
        out += source.finish()[0]
    except (TrialProtocolError, OSError, ValueError):
        pass
    finally:
        source.close()
    return [(step, dict(values)) for step, values in out if step is not None]


class ReportTail:
    """Reads the report file as it grows; yields (step, metrics) per whole line."""

    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._partial = b""
        self._line_no = 0

    def read_new(self) -> list[Line]:
        data = self._file.read()
        if not data:
            return []
        *lines, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > MAX_REPORT_LINE_BYTES:
            raise TrialProtocolError(
                f"{self.path}: a report line is longer than {MAX_REPORT_LINE_BYTES} bytes"
            )
        out = []
        for line in lines:
            self._line_no += 1
            if line.strip():
                out.append(parse_report_line(line, f"{self.path} line {self._line_no}"))
        return out

    def finish(self) -> tuple[list[Line], str | None]:
        """The last lines; an unterminated last line is kept if it parses, else returned as torn."""
        out = self.read_new()
        partial, self._partial = self._partial, b""
        if not partial.strip():
            return out, None
        try:
            out.append(parse_report_line(partial, f"{self.path} last line"))
            return out, None
        except TrialProtocolError:
            return out, partial.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._file.close()


class WithSplits:
    """A script's own metrics log, plus the report file for its planner.log_split lines
    (docs/data.md)."""

    def __init__(self, metrics: MetricsFileTail | PrintedMetricsTail, report_file: ReportTail):
        self.metrics, self.report_file = metrics, report_file
        self.reported = (
            False  # the script also called planner.report: refused, the metrics come from its log
        )
        self._looked_at = -1  # the rows read when the log was last looked at for a misspelt metric

    def _splits(self, lines: list[Line]) -> list[Line]:
        self.reported = self.reported or any(line[0] is not None for line in lines)
        return [line for line in lines if line[0] is None]

    def read_new(self) -> list[Line]:
        return self._splits(self.report_file.read_new()) + self.metrics.read_new()

    def finish(self) -> tuple[list[Line], str | None]:
        splits = self._splits(self.report_file.finish()[0])
        final, torn = self.metrics.finish()
        return splits + final, torn

    def close(self) -> None:
        self.metrics.close()
        self.report_file.close()

    @property
    def printed(self) -> PrintedMetricsTail | None:
        """The sink a stream's lines go to as well (`format: stdout`), or None for a file."""
        return self.metrics if isinstance(self.metrics, PrintedMetricsTail) else None

    def misnamed(self) -> Misnamed | None:
        """Before the first report: the file has no column for the metric but holds it under an
        evaluation prefix or suffix (`eval_accuracy` for `accuracy`), at once, or under a near
        spelling (`val_acc` for `valacc`) at `TYPO_STEPS` steps: the row that shows it, and what to
        say."""
        tail, spec = self.metrics, self.metrics.spec
        reader, column = tail.reader, spec.names[spec.require]
        if reader is None or reader.reported or tail.path is None or column in reader.columns:
            return None
        near, steps = evaluation_spellings(column, reader.columns), 1
        if not near:
            near, steps = (
                difflib.get_close_matches(column, reader.columns, n=3, cutoff=TYPO_CUTOFF),
                TYPO_STEPS,
            )
            if not near or self._looked_at == reader.seen:
                return None
            self._looked_at = reader.seen  # rows are looked at again only when the log has grown
        shift, at = 1 - spec.step_base, {}  # step -> the first row there that holds a near name
        for _, row in tail.rows():
            step = _whole(row.get(spec.step), shift)
            if step is not None and step not in at and any(name in row for name in near):
                at[step] = row
                if len(at) == steps:
                    break
        if len(at) < steps:
            return None if steps > 1 else Misnamed(None, {}, self._misnamed_message(near, 0))
        step, row = max(at.items())  # the furthest step shown: what the trial spent
        return Misnamed(step, _numbers(row, spec.step), self._misnamed_message(near, steps))

    def _misnamed_message(self, near: list[str], steps: int) -> str:
        tail, spec = self.metrics, self.metrics.spec
        column, columns = spec.names[spec.require], tail.reader.columns if tail.reader else []
        held = f"it held `{near[0]}` at {steps} steps and never {column!r}; " if steps > 1 else ""
        return (
            f"{tail.described()} has no column {column!r} for the metric {spec.require!r}"
            f"{nearest_name(column, near)} ({held}its columns: {', '.join(columns)}). Fix "
            f"`metrics.names`"
        )


@dataclass(frozen=True)
class Misnamed:
    """A metric the script's log holds under another name: the row's step and values (what the
    trial spent)."""

    step: int | None
    metrics: dict[str, float]
    message: str


def evaluation_spellings(column: str, columns: Iterable[str]) -> list[str]:
    """The columns that are `column` with an evaluation prefix or suffix: `eval_accuracy`,
    `val_acc_epoch`."""
    spellings = {
        f"{affix}{sep}{column}" for affix in EVALUATION_AFFIXES for sep in AFFIX_SEPARATORS
    }
    spellings |= {
        f"{column}{sep}{affix}" for affix in EVALUATION_AFFIXES for sep in AFFIX_SEPARATORS
    }
    return [name for name in columns if name in spellings]


def _numbers(row: dict[str, Any], step: str) -> dict[str, float]:
    out = {}
    for name, value in row.items():
        if name in (step, "step") or isinstance(
            value, bool
        ):  # `step` is trial.report's own argument
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[name] = number
    return out


def _whole(value: Any, shift: int) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or number != int(number) or int(number) + shift < 0:
        return None
    return int(number) + shift


def parse_report_line(line: bytes | str, where: str = "report") -> Line:
    """`{"step": 3, "metrics": {"val_acc": 0.9}}` -> (3, {"val_acc": 0.9}); a planner.log_split line
    `{"split": "train", "data": {...}}` -> (None, ("train", {...})); TrialProtocolError
    otherwise."""
    expected = 'expected {"step": <int>, "metrics": {"<name>": <number>, ...}}'
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        raise TrialProtocolError(f"{where} is not JSON ({error}); {expected}") from None
    if isinstance(record, dict) and set(record) == {"split", "data"}:
        return _split_line(record, where)
    if not isinstance(record, dict) or set(record) != {"step", "metrics"}:
        raise TrialProtocolError(f"{where}: {_short(line)}; {expected}")
    step, metrics = record["step"], record["metrics"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise TrialProtocolError(f"{where}: step must be an int, got {step!r}")
    if not isinstance(metrics, dict) or not metrics:
        raise TrialProtocolError(
            f"{where}: metrics must be a non-empty mapping of names to numbers, got {metrics!r}"
        )
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TrialProtocolError(f"{where}: metric {name!r} must be a number, got {value!r}")
    return step, {name: float(value) for name, value in metrics.items()}


def _split_line(record: dict, where: str) -> tuple[None, Any]:
    """A `planner.log_split` line -> (None, (name, summary)); TrialProtocolError when it is
    malformed."""
    name, data = record["split"], record["data"]
    if (
        not isinstance(name, str)
        or not name
        or not isinstance(data, dict)
        or not isinstance(data.get("fingerprint"), str)
        or not isinstance(data.get("distinct"), int)
    ):
        raise TrialProtocolError(
            f"{where}: a split line must be what planner.log_split writes: "
            '{"split": "<name>", "data": {"presentations": ..., "distinct": ..., "fingerprint": '
            "...}}"
        )
    return None, (name, data)


def _short(line: bytes | str, limit: int = 200) -> str:
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    return text if len(text) <= limit else text[:limit] + "..."


def nearest_name(name: str, names: Iterable[str]) -> str:
    """`; did you mean `eval_accuracy`?` when one of `names` is close to `name` (difflib), else
    ''."""
    close = difflib.get_close_matches(name, [n for n in names if n != name], n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""
