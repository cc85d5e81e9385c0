"""What a trial's status and a phase's stop can be: values, not strings spelled in many places.

A trial record's `status` (trials.jsonl) is one `TrialStatus`. The enum is a
`str`, so records keep writing and comparing the plain words of docs/run-folder.md
(`record["status"] == TrialStatus.COMPLETED` holds for a record read back from disk).

The named sets below are the only definitions of "failed" and "unusable":

    FAILED     the trial ran and ended in an error of its own or of a limit
               (failed, protocol_error, timeout, oom): it counts in "failures"
    UNUSABLE   FAILED and diverged: no usable value of the metric (the reader's,
               the report's and the audit's "did not give a number")

`StopReason` is why a phase (or a run) stopped before every planned trial ended.

A leaf: imports nothing of planner's.
"""

from __future__ import annotations

from enum import StrEnum


class TrialStatus(StrEnum):
    COMPLETED = "completed"
    EARLY_STOPPED = "early_stopped"  # stopped by the tuning's early-stopping rule (ASHA, median)
    DIVERGED = "diverged"  # a non-finite value of the decision metric (or a divergence metric)
    FAILED = "failed"  # raised on every attempt, or its worker died on every attempt
    # broke the trainable protocol (a metric never reported, steps out of order)
    PROTOCOL_ERROR = "protocol_error"
    TIMEOUT = "timeout"  # budget.max_trial_time
    OOM = "oom"  # budget.max_trial_memory
    NOT_RUN = "not_run"  # reeval only: a logged seed that was not run again


FAILED: frozenset[TrialStatus] = frozenset(
    {TrialStatus.FAILED, TrialStatus.PROTOCOL_ERROR, TrialStatus.TIMEOUT, TrialStatus.OOM}
)
UNUSABLE: frozenset[TrialStatus] = FAILED | {TrialStatus.DIVERGED}


class StopReason(StrEnum):
    """Why a phase stopped before its planned trials ended (None: it did not stop early)."""

    BUDGET = "budget"  # budget.max_wall_time reached
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM


class RunState(StrEnum):
    """state.json's `state`."""

    RUNNING = "running"
    COMPLETED = "completed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
