"""Live progress of a run: trials per arm and phase, best so far, failures, time and budget.

`Progress` keeps the counts (a value any display can read); `LiveDisplay`
draws them with rich on a terminal, `LineDisplay` prints one plain line per
ended trial (no terminal, or piped output), `QuietDisplay` prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from planner._core.lazy import lazy_import
from planner._core.records import error_key, error_of, finite_final_value
from planner._core.status import FAILED, TrialStatus
from planner._core.text import clock, number, terminal_safe

# rich draws the live table on a terminal only: a piped or --quiet run never loads it
rich_console = lazy_import("rich.console")
rich_live = lazy_import("rich.live")
rich_table = lazy_import("rich.table")
rich_text = lazy_import("rich.text")


@dataclass
class Cell:
    planned: int = 0
    running: int = 0
    ended: int = 0
    failed: int = 0
    diverged: int = 0
    early_stopped: int = 0
    best: float | None = None
    values: list[float] = field(default_factory=list)


class Progress:
    """Counts of one run, per (phase, arm)."""

    def __init__(
        self,
        arms: list[str],
        planned: dict[tuple[str, str], int],
        *,
        metric: str,
        mode: str,
        decision_metric: str,
        max_wall_time_s: float | None,
    ):
        self.arms = list(arms)
        self.cells = {key: Cell(planned=n) for key, n in planned.items()}
        self.metric, self.mode, self.decision_metric = metric, mode, decision_metric
        self.max_wall_time_s = max_wall_time_s
        self.t0 = time.monotonic()
        self.phase = "starting"
        self.notes: list[str] = []
        self.errors: dict[
            str, int
        ] = {}  # error_key("Type: message") of failed trials -> how many so far
        # the ETA: the steps the estimate model expects (planner._plan.estimate) against those done
        self.steps_expected: float | None = None
        self.steps_before = 0  # steps of trials that ended before this process (a resumed run)
        self.steps_ended = 0  # steps of the trials that ended in this process
        self.steps_running: dict[str, int] = {}  # trial id -> its latest reported step
        self.first_started: float | None = None  # monotonic: the first trial's start, after Ray's

    def cell(self, phase: str, arm: str) -> Cell:
        return self.cells.setdefault((phase, arm), Cell())

    def started(self, phase: str, arm: str) -> None:
        self.cell(phase, arm).running += 1
        if self.first_started is None:
            self.first_started = time.monotonic()

    def reported(self, trial_id: str, step: int) -> None:
        self.steps_running[trial_id] = step

    @property
    def steps_done(self) -> int:
        return self.steps_before + self.steps_ended + sum(self.steps_running.values())

    def eta_s(self) -> float | None:
        """Seconds left: the steps the estimate model still expects at the seconds per step
        measured so far in this process (from its first trial's start, so Ray's start is not
        counted); None before the first step, or without an estimate."""
        done_here = self.steps_ended + sum(self.steps_running.values())
        if self.steps_expected is None or self.first_started is None or done_here <= 0:
            return None
        per_step = (time.monotonic() - self.first_started) / done_here
        return max(0.0, self.steps_expected - self.steps_done) * per_step

    def cancelled(self, phase: str, arm: str) -> None:
        cell = self.cell(phase, arm)
        cell.running = max(0, cell.running - 1)

    def ended(self, record: dict, *, was_running: bool = True) -> None:
        cell = self.cell(record["phase"], record["arm"])
        if was_running:
            cell.running = max(0, cell.running - 1)
        cell.ended += 1
        self.steps_running.pop(str(record.get("trial_id")), None)
        steps = record.get("exposure")
        steps = steps if isinstance(steps, int) and not isinstance(steps, bool) else 0
        if was_running:
            self.steps_ended += steps
        else:
            self.steps_before += steps
        status = record["status"]
        cell.failed += status in FAILED
        cell.diverged += status == TrialStatus.DIVERGED
        cell.early_stopped += status == TrialStatus.EARLY_STOPPED
        error = error_of(record)
        if (
            error is not None
        ):  # counted by its normalized key: a path or a number that differs is one failure
            key = error_key(error)
            self.errors[key] = self.errors.get(key, 0) + 1
        if status != TrialStatus.COMPLETED:
            return
        metric = self.metric if record["phase"] == "tune" else self.decision_metric
        value = last_value(record, metric)
        if value is None:
            return
        cell.values.append(value)
        better = cell.best is None or (
            value > cell.best if self.mode == "max" else value < cell.best
        )
        if better:
            cell.best = value

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def totals(self) -> tuple[int, int]:
        return (
            sum(c.ended for c in self.cells.values()),
            sum(c.planned for c in self.cells.values()),
        )

    def header(self) -> str:
        ended, planned = self.totals()
        budget = f" of {clock(self.max_wall_time_s)}" if self.max_wall_time_s else ""
        eta = self.eta_s()
        return (
            f"{self.phase}: {ended}/{planned} trials ended, {clock(self.elapsed)}{budget} elapsed"
            + ("" if eta is None else f", about {clock(eta)} left")
        )

    def metric_line(self) -> str:
        """What the value column shows, with the metrics' names (the table's cells have no room for
        them)."""
        mode = "highest" if self.mode == "max" else "lowest"
        return terminal_safe(
            f"value: best ({mode}) {self.metric} while tuning; "
            f"mean {self.decision_metric} in confirmation"
        )


last_value = finite_final_value  # the one final value (planner's record policy), finite for display


def failure_text(progress: Progress, record: dict) -> str:
    """ ": KeyError: 'lr'" for a failed trial, with how many trials have failed with it so far;
    else ""."""
    error = error_of(record)
    if error is None:
        return ""
    count = progress.errors.get(error_key(error), 1)
    return f": {error}" + (f" [{count} trials so far]" if count > 1 else " [first occurrence]")


HEADERS = ("arm", "phase", "ended", "running", "failed", "diverged", "early", "value")
ARM_WIDTH = 16  # longer arm names are cut with an ellipsis, never the headers
MIN_WIDTH = {
    **{h: len(h) for h in HEADERS},
    "phase": len("confirm"),
    "ended": len("999/999"),
    "value": len("mean 0.1234"),
}


def summary_value(phase: str, cell: Cell) -> str:
    """The value column: the best so far while tuning (what selection picks), the mean so far in
    confirmation (what the decision compares); '-' before the first completed trial."""
    if not cell.values:
        return "-"
    if phase == "tune":
        return f"best {number(cell.best)}"
    return f"mean {number(sum(cell.values) / len(cell.values))}"


def table_rows(progress: Progress) -> list[tuple[str, ...]]:
    """One row per (phase, arm), tuning first, arms in contract order: the cells under HEADERS."""
    p = progress
    order = sorted(
        p.cells.items(),
        key=lambda kv: (kv[0][0] != "tune", p.arms.index(kv[0][1]) if kv[0][1] in p.arms else 99),
    )
    return [
        (
            arm,
            phase,
            f"{cell.ended}/{cell.planned}",
            str(cell.running),
            str(cell.failed),
            str(cell.diverged),
            str(cell.early_stopped),
            summary_value(phase, cell),
        )
        for (phase, arm), cell in order
    ]


class QuietDisplay:
    def __init__(self, progress: Progress):
        self.progress = progress

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, record: dict | None = None) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class LineDisplay(QuietDisplay):
    """One plain line per ended trial and per phase: for logs and pipes."""

    def __init__(self, progress: Progress, stream: TextIO | None = None):
        super().__init__(progress)
        self.stream = stream or sys.stdout

    def update(self, record: dict | None = None) -> None:
        if record is None:
            return
        p = self.progress
        metric = p.metric if record["phase"] == "tune" else p.decision_metric
        value = last_value(record, metric)
        ended, planned = p.totals()
        shown = f" {metric}={number(value)}" if value is not None else ""
        eta = p.eta_s()
        left = "" if eta is None else f", about {clock(eta)} left"
        line = (
            f"[{clock(p.elapsed)}] {record['trial_id']} "
            f"{record['status']}{shown}{failure_text(p, record)} "
            f"(exposure {record['exposure']}; {ended}/{planned} ended{left})"
        )
        print(terminal_safe(line), file=self.stream, flush=True)

    def note(self, text: str) -> None:
        print(
            terminal_safe(f"[{clock(self.progress.elapsed)}] {text}"), file=self.stream, flush=True
        )


class LiveDisplay(QuietDisplay):
    """A rich table redrawn in place: per arm and phase, ended/planned, running, failed, and the
    best value while tuning, the mean in confirmation."""

    def __init__(self, progress: Progress):
        super().__init__(progress)
        # rich's own codes draw the table; what it draws is made safe cell by cell (`_cell`)
        drawing = getattr(sys.stdout, "for_drawing", None)
        self.console = rich_console.Console(file=drawing() if drawing else sys.stdout)
        self.live = rich_live.Live(
            self._render(),
            console=self.console,
            refresh_per_second=4,
            transient=False,
            get_renderable=self._render,
        )

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        self.live.__exit__(*exc)
        return False

    def update(self, record: dict | None = None) -> None:
        error = error_of(record) if record is not None else None
        if record is not None and error is not None and self.progress.errors.get(error) == 1:
            self.note(
                f"{record['trial_id']} {record['status']}{failure_text(self.progress, record)}"
            )
        self.live.refresh()

    def note(self, text: str) -> None:
        self.progress.notes = (self.progress.notes + [text])[-4:]
        self.live.refresh()

    def _render(self) -> Any:
        p = self.progress
        # fits 80 columns: no vertical rules, short headers that never wrap, arm names cut instead
        # the header above the table, not its title: a title wraps at the table's width
        table = rich_table.Table(
            expand=False,
            box=None,
            pad_edge=False,
            padding=(0, 1),
            collapse_padding=True,
            header_style="bold underline",
        )
        for column in HEADERS:
            left = column in ("arm", "phase")
            table.add_column(
                column,
                justify="left" if left else "right",
                no_wrap=True,
                min_width=MIN_WIDTH[column],
                max_width=ARM_WIDTH if column == "arm" else None,
                overflow="ellipsis" if column == "arm" else "fold",
            )
        for row in table_rows(p):
            table.add_row(*(_cell(value) for value in row))
        notes = [
            rich_text.Text(terminal_safe(note), style="dim", overflow="ellipsis", no_wrap=True)
            for note in [p.metric_line(), *p.notes]
        ]
        header = rich_text.Text(
            terminal_safe(p.header()), style="italic", overflow="ellipsis", no_wrap=True
        )
        return rich_console.Group(header, table, *notes)


def _cell(text: str) -> Any:
    """A name or value as rich draws it: its control characters shown (`\\x1b`), its brackets as
    they are (a plain Text: `[bold]` in a name is no markup)."""
    return rich_text.Text(terminal_safe(text))


def make_display(progress: Progress, *, quiet: bool, stream: TextIO | None = None):
    stream = stream or sys.stdout
    if quiet:
        return QuietDisplay(progress)
    if stream.isatty():
        return LiveDisplay(progress)
    return LineDisplay(progress, stream)


def follow(snapshot: Callable[[], tuple[str, bool]], interval_s: float) -> None:
    """Redraw `snapshot()`'s text in place (rich's Live) every `interval_s` seconds while it says
    the run goes on (`plan status --watch`); its text is shown as it is, never read as rich
    markup. Written to a file or a pipe (`| tee`), where nothing can be redrawn and rich's Live
    would print only at the end, each snapshot that differs from the last is appended at once."""
    text, going = snapshot()
    if not sys.stdout.isatty():
        last = None
        while True:
            if text != last:
                print(("\n" if last is not None else "") + text.rstrip("\n"), flush=True)
                last = text
            if not going:
                return
            threading.Event().wait(interval_s)
            text, going = snapshot()
    with rich_live.Live(auto_refresh=False) as live:
        while True:
            live.update(rich_text.Text(text), refresh=True)
            if not going:
                return
            threading.Event().wait(interval_s)
            text, going = snapshot()
