"""Metrics read from the lines a script prints (`metrics: {format: stdout, pattern: ...}`).

A script that only prints its metrics (nanoGPT's `step 250: train loss 1.97, val loss 2.07`, a Keras
progress line, `print(f"epoch {e} val_acc {a}")`) is read from its output as it is printed: the
worker already pumps the script's stdout and stderr into their bounded logs
(planner._trial.processes), and `PrintedMetricsTail` is a second sink on the stream the contract
names, so no line is missed once the log's head is full, and nothing is read twice. Each line the
`pattern` matches (`re.search`) is a row: its named groups that matched are the columns (`step`
among them; a line without it has the step of the last line that held the step alone, a heading like
Keras's `Epoch 3/10`), and the rows go to the same `MetricsReader` as a CSV's
(planner._trial.metrics_files), so they merge into reports by the rules every format follows.
"""

from __future__ import annotations

import codecs
import re
from collections import deque
from pathlib import Path

from planner._trial.metrics_files import MetricsReader, MetricsSpec, Row, Table

MAX_LINE_CHARS = (
    64 * 1024
)  # a longer line is cut there before it is matched (a progress bar's \r run)
LAST_LINES = 10  # shown when the pattern never matched


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The contract's pattern, compiled (re.error for one that does not compile)."""
    return re.compile(pattern)


def line_row(regex: re.Pattern[str], line: str) -> dict[str, str] | None:
    """The row a printed line is: the named groups that matched; None when the line does not
    match."""
    found = regex.search(line)
    if found is None:
        return None
    return {name: value for name, value in found.groupdict().items() if value is not None}


class PrintedMetricsTail:
    """The reports in what the script prints to one stream: `write` is the stream's sink (bytes as
    they are read from the pipe), `read_new()` the reports of the lines read since, `finish()` those
    after its end."""

    def __init__(self, spec: MetricsSpec, log: Path | None = None):
        self.spec = spec
        self.stream = spec.stream or "stdout"
        self.regex = compile_pattern(spec.pattern or "")
        self.path = log  # the stream's log (stdout.log), named in messages
        self.reader: MetricsReader | None = MetricsReader(spec, f"the script's {self.stream}")
        self.reader.columns = list(self.regex.groupindex)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._rows: list[Row] = []  # matched since the last read_new
        self._lines = 0
        self._matched = 0
        self._step: str | None = None  # the step of the last matched line that held it alone
        self._step_reached: int | None = None  # the furthest step a line held alone
        self._last: deque[str] = deque(maxlen=LAST_LINES)

    def write(self, data: bytes) -> None:
        text = self._partial + self._decoder.decode(data)
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._line(line)
        if len(self._partial) > MAX_LINE_CHARS:  # no newline for too long: matched as it is, cut
            self._line(self._partial[:MAX_LINE_CHARS])
            self._partial = ""

    def _line(self, line: str) -> None:
        self._lines += 1
        # a progress bar rewrites its line with \r: the last state of it is what was shown
        shown = line.rstrip("\r").rsplit("\r", 1)[-1][:MAX_LINE_CHARS]
        if shown.strip():
            self._last.append(shown)
        row = line_row(self.regex, shown)
        if row is not None:
            # a line without the step has the step of the last line that held the step alone
            # (Keras's `Epoch 3/10`, printed above the line of that epoch's values); a line of
            # values without a step after a line of values with one (a train loss before the next
            # evaluation) stays apart
            if set(row) == {self.spec.step}:
                self._step = row[self.spec.step]
                self._printed_step(self._step)
            elif self.spec.step in row:
                self._step = None
            elif self._step is not None:
                row[self.spec.step] = self._step
            self._matched += 1
            self._rows.append((f"line {self._lines}", row))

    def _feed(self, final: bool) -> list[tuple[int, dict[str, float]]]:
        assert self.reader is not None
        rows, self._rows = self._rows, []
        table = Table(rows, list(self.regex.groupindex), first=self.reader.seen)
        return self.reader.feed_table(table, final=final)

    def read_new(self) -> list[tuple[int, dict[str, float]]]:
        return self._feed(final=False)

    def finish(self) -> tuple[list[tuple[int, dict[str, float]]], str | None]:
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        if rest:
            self._line(rest)
        return self._feed(final=True), None

    def _printed_step(self, text: str) -> None:
        """A line that holds the step alone (`iter 490:`, `Epoch 3/10`) says the script got that
        far, evaluated there or not."""
        try:
            step = float(text)
        except ValueError:  # the reader names a step that is not a number, where a row holds it
            return
        if step.is_integer():
            reached = int(step) + 1 - self.spec.step_base
            if self._step_reached is None or reached > self._step_reached:
                self._step_reached = reached

    @property
    def reached(self) -> int | None:
        """The furthest step the script's lines showed it trained to: a row of named values
        (`MetricsReader.furthest`) or a line of the step alone."""
        furthest = self.reader.furthest if self.reader is not None else None
        found = [r for r in (furthest, self._step_reached) if r is not None]
        return max(found, default=None)

    def rows(self) -> list[Row]:
        return []  # the rows are handed on once, as they come: nothing to look at again

    def notes(self) -> list[str]:
        """The reader's notes (a named group no matched line held); none when no line matched at
        all: the trial's error then says so, with the last lines printed."""
        return self.reader.notes() if self.reader is not None and self._matched else []

    def described(self) -> str:
        return f"the lines the script printed to {self.stream}"

    def nothing_read(self) -> str:
        """Why no report came from the printed lines: no line matched, or none held the metric."""
        spec = self.spec
        column = spec.names[spec.require]
        last = " | ".join(self._last) if self._last else "nothing"
        if not self._matched:
            return (
                f"no line of the {self._lines} it printed to {self.stream} matched metrics.pattern "
                f"{spec.pattern!r}; its last lines: {last}. Fix the pattern (try it on these lines "
                "with re.search)"
            )
        return (
            f"{self._matched} lines it printed to {self.stream} matched metrics.pattern "
            f"{spec.pattern!r}, and none held the group {column!r} (for the metric "
            f"{spec.require!r}); its last lines: {last}"
        )

    def close(self) -> None:
        pass


def printed_reports(log: Path, spec: MetricsSpec) -> PrintedMetricsTail:
    """A tail fed the whole of an ended attempt's log (`stdout.log`): `read_new`, then `finish`."""
    tail = PrintedMetricsTail(spec, log)
    if log.is_file() and not log.is_symlink():
        with open(log, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                tail.write(block)
    return tail
