"""The `trial` a trainable receives: `train(config, trial)`.

It holds `trial.seed`, `trial.budget` (the exposure) and `trial.unit` (budget.unit), `trial.arm`,
`trial.phase` (tune | confirm | reeval), `trial.id`, `trial.dir`, `trial.heldout` (metric.heldout's
name, or None), `trial.resumed`; `trial.report(step, **metrics)` is checked as it is called (the
step, the metrics, the time limit, the first report's metric, divergence) and forwarded to the
driver, and `trial.log_split(name, ids, groups)` logs a split (docs/data.md). A trainable that
continued from a checkpoint sets `trial.resumed_from` (path, sha256, what it held) for the record.
A broken report ends the attempt with a `StopAttempt` the trainable cannot catch.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable
from typing import Any

from planner._core.records import stored_metric
from planner._core.status import TrialStatus
from planner._data.checks import overlap_violations
from planner._data.splits import SplitError, SplitLog
from planner._trial.function_reads import TrialReads
from planner._trial.loading import top_level_modules
from planner._trial.reports import nearest_name
from planner._trial.spec import TrialSpec
from planner._trial.storage import TrialStorage


class StopAttempt(BaseException):
    """Ends an attempt from inside `trial.report` (a BaseException, so `except Exception` in a
    trainable cannot swallow it)."""

    def __init__(self, status: TrialStatus, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class SessionExit(SystemExit):
    """Ray Tune's own sys.exit from `tune.report` (the scheduler stopped the trial): never a
    trainable's raise."""


class Trial:
    """What the trainable sees. Only `report` talks back."""

    def __init__(
        self,
        spec: TrialSpec,
        forward: Callable[..., None] | None,
        already_forwarded: int | None = None,
    ):
        self.seed = spec.seed
        self.budget = spec.budget
        self.unit = spec.unit  # budget.unit, or None
        self.metric = spec.metric  # metric.name: what each trial is tuned and selected on
        self.arm = spec.arm
        self.phase = spec.phase
        self.id = spec.trial_id
        self.dir = spec.dir
        self.params = dict(spec.params)
        self._spec = spec
        self._forward = forward
        self._forwarded = already_forwarded
        self._t0 = time.monotonic()
        self.reports: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.log_reached: int | None = (
            None  # a command's own metrics log: the furthest step a row of it held
        )
        self.notes: list[
            str
        ] = []  # protocol notes of the attempt that ended (a declared metric no row held,
        # an output.log refused)
        self.splits: dict[
            str, dict[str, Any]
        ] = {}  # name -> counts and fingerprints (planner._data.splits)
        self._split_log: Any = None
        self.attempt = 1  # this attempt's number (1 + retries used so far)
        # the previous attempt was cut short (its worker died, the driver was killed, it raised):
        self.resumed = False
        # a trainable that saves checkpoints in trial.dir looks for one there and continues from it
        self.resumed_from: dict[str, Any] | None = (
            None  # the checkpoint a command continued from (checkpoints.describe)
        )
        self.inputs: dict[str, Any] | None = None  # a command's: {argv, files} (TrialInputs)
        self._reads: TrialReads | None = None  # a function trainable's: what its trial reads
        self._sent_files: dict[str, Any] | None = None  # the files its last forward carried
        self.heldout = (
            spec.heldout
        )  # metric.heldout's name (None when unset): reported outside tuning only
        self.machinery: set[str] | None = (
            None  # top-level modules the first forward loaded (Ray Tune's own)
        )
        self.storage: TrialStorage | None = (
            None  # plan run --storage: trial.dir's files copied there
        )

    @property
    def last_step(self) -> int | None:
        return self.reports[-1]["step"] if self.reports else None

    def report(self, step: int, **metrics: Any) -> None:
        """Report the exposure consumed so far (`step`) and metrics at that point."""
        spec = self._spec
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise StopAttempt(
                TrialStatus.PROTOCOL_ERROR, f"trial.report: step must be an integer, got {step!r}"
            )
        step = int(step)
        if step > spec.budget:
            raise StopAttempt(
                TrialStatus.PROTOCOL_ERROR,
                f"trial.report: step {step} is past the budget of {spec.budget}",
            )
        if step < 0:
            raise StopAttempt(TrialStatus.PROTOCOL_ERROR, f"trial.report: step {step} is negative")
        if self.last_step is not None and step <= self.last_step:
            raise StopAttempt(
                TrialStatus.PROTOCOL_ERROR,
                f"trial.report: step {step} does not follow step {self.last_step} "
                "(steps strictly increase; a second training loop in one trial, such as "
                "trainer.fit called "
                "twice, starts its steps over)",
            )
        if not metrics:
            raise StopAttempt(
                TrialStatus.PROTOCOL_ERROR, f"trial.report: step {step} has no metrics"
            )
        values: dict[str, float] = {}
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise StopAttempt(
                    TrialStatus.PROTOCOL_ERROR,
                    f"trial.report: metric {name!r} at step {step} is not a number: {value!r}",
                )
            values[name] = float(value)
        elapsed = time.monotonic() - self._t0
        if spec.max_trial_time_s is not None and elapsed > spec.max_trial_time_s:
            raise StopAttempt(
                TrialStatus.TIMEOUT,
                f"step {step} came after {elapsed:.1f} s, past budget.max_trial_time of "
                f"{spec.max_trial_time_s:g} s",
            )
        self.reports.append(
            {
                "step": step,
                "metrics": {k: stored_metric(v) for k, v in values.items()},
                "time_s": round(elapsed, 6),
            }
        )
        if (
            spec.phase == "tune"
            and spec.heldout
            and spec.heldout in values
            and not any(v["kind"] == "heldout_in_tuning" for v in self.violations)
        ):  # one per trial, at its first step
            self.violations.append(
                {"kind": "heldout_in_tuning", "step": step, "metric": spec.heldout}
            )
        if len(self.reports) == 1 and not any(name in values for name in spec.first_report_metrics):
            # a misnamed metric ends the trial at once, with what it spent on the record
            near = nearest_name(spec.metric, values)
            raise StopAttempt(
                TrialStatus.PROTOCOL_ERROR,
                f"metric {spec.metric} never reported; got "
                f"{', '.join(sorted(values))} in the trial's first report (step {step}){near} (the "
                "contract's metric.name must be one of the names the trainable reports)",
            )
        diverged = [
            m for m in spec.divergence_metrics if m in values and not math.isfinite(values[m])
        ]
        if diverged:
            raise StopAttempt(
                TrialStatus.DIVERGED, f"{diverged[0]} is {values[diverged[0]]} at step {step}"
            )
        if self.storage is not None:  # a checkpoint saved before this report outlives this node
            self.storage.push()
        if self._forward is not None and (self._forwarded is None or step > self._forwarded):
            forwarded = {
                k: v for k, v in values.items() if not (spec.phase == "tune" and k == spec.heldout)
            }
            self._forwarded = step
            before = top_level_modules() if self.machinery is None else None
            extra: dict[str, Any] = {"splits": dict(self.splits)} if self.splits else {}
            files = self._reads.files() if self._reads is not None else None
            if files is not None and files is not self._sent_files:  # sent when they change
                extra["inputs"] = {"files": files}
                self._sent_files = files
            try:
                self._forward(step, forwarded, elapsed, self.violations, **extra)
            except (
                SystemExit
            ) as stop:  # Ray Tune ends a stopped trial's thread with sys.exit from tune.report
                raise SessionExit(*stop.args) from None
            finally:
                if (
                    before is not None
                ):  # the first report imports ray.tune in the worker: not the trainable's
                    self.machinery = top_level_modules() - before

    def log_split(self, name: str, ids: Any, groups: Any = None) -> dict[str, Any]:
        """Log the unit ids of split `name` in row order, and optional aligned `groups`
        ({"patient": [...]}).

        Only counts and fingerprints are kept (docs/data.md); overlaps with the
        splits logged before, and the contract's `data.independent` pairs, are
        checked here. Returns the stored summary.
        """
        if self._split_log is None:
            self._split_log = SplitLog()
        try:
            summary = self._split_log.add(name, ids, groups)
        except SplitError as error:
            raise StopAttempt(TrialStatus.PROTOCOL_ERROR, f"trial.log_split: {error}") from None
        self.add_split_summary(name, summary)
        return summary

    def add_split_summary(self, name: str, summary: dict[str, Any]) -> None:
        """Take a split summary (from log_split, or a `command:` script's report line) and check
        it."""
        self.splits[name] = summary
        found, problems = overlap_violations(self.splits, self._spec.extra.get("data"), only=name)
        if problems:
            raise StopAttempt(TrialStatus.PROTOCOL_ERROR, f"log_split: {problems[0]}")
        self.violations += [v for v in found if v not in self.violations]
