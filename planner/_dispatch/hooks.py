"""What a phase's trials tell the driver as they go, and what a phase returns.

`Hooks` are the driver's callbacks (write the record, update progress), called
by the tuning pieces (`_dispatch/tune`) and the fixed-config trials
(`_dispatch/fixed`) alike; `Outcome` is what a phase returns: how many trials
ended and why it stopped early (a `StopReason`, or None).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from planner._core.status import StopReason
from planner._trial.spec import TrialSpec

# why a trial still running when its phase stopped has no record (`Hooks.trial_cancelled`)
CANCELLED = "stopped before it ended (budget or interruption)"


@dataclass
class Hooks:
    """What the driver does as trials start and end (write the record, update progress)."""

    trial_started: Callable[[TrialSpec], None]
    trial_ended: Callable[[dict], None]
    trial_cancelled: Callable[[TrialSpec, str], None]
    # why the phase must stop now (None: it need not; planner._dispatch.failfast), and a tuning
    # report seen as it arrives: (trial id, metrics, step, seconds since the trial started)
    should_stop: Callable[[], str | None] = lambda: None
    trial_reported: Callable[[str, dict, int, float], None] = lambda *report: None
    # a trial's worker died after the trial had ended, and the record it kept is the trial's (Ray's
    # word for it)
    trial_kept: Callable[[TrialSpec, dict, str], None] = lambda spec, record, why: None
    # a node that cannot import the trainable, kept out of the run (node id, what failed there)
    node_refused: Callable[[str, str], None] = lambda node_id, problem: None

    def __getstate__(
        self,
    ):  # Tune pickles its searcher and callbacks; the driver's hooks stay behind
        return {}

    def __setstate__(self, state):
        self.trial_started = self.trial_ended = self.trial_cancelled = self.should_stop = (
            self.trial_reported
        ) = _ignore
        self.trial_kept = self.node_refused = _ignore


def _ignore(*args, **kwargs) -> None:
    return None


@dataclass
class Outcome:
    """A phase's end: why it stopped before every trial ended (None: it did not), and how many
    ended."""

    stopped: StopReason | None = None
    ended: int = 0
    # planner trial id -> what Ray said, for a trial Ray ended without a record (the driver runs it
    # again)
    unrecorded: dict[str, str] = field(default_factory=dict)
