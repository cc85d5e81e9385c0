"""What the driver sends a worker to run one trial: a `TrialSpec` (small, picklable). The worker
runs it (planner._trial.protocol) and sends back its reports and its record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrialSpec:
    """Everything a worker needs to run one trial (small, picklable)."""

    trial_id: str
    phase: str
    arm: str
    seed: int
    index: int
    params: dict[str, Any]
    config: dict[str, Any]
    budget: int
    dir: str
    trainable: str  # module:function
    metric: str
    heldout: str | None = None
    retries: int = 0
    contract_sha256: str = ""
    max_trial_time_s: float | None = None
    unit: str | None = (
        None  # budget.unit: what one step of `budget` counts (None: not said, as in a test's spec)
    )
    path: tuple[
        str, ...
    ] = ()  # folders put on sys.path before importing the trainable (those that exist here)
    cwd: str | None = (
        None  # the folder the trainable runs in (where `plan run` started), when it exists here
    )
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def decision_metric(self) -> str:
        """The metric every trial must report: the tuning metric while tuning, else the held-out
        one if set."""
        return self.heldout if self.heldout and self.phase != "tune" else self.metric

    @property
    def first_report_metrics(self) -> tuple[str, ...]:
        """A trial's first report holds one of these (the selection metric; outside tuning, or the
        held-out one)."""
        if self.heldout and self.phase != "tune":
            return (self.metric, self.heldout)
        return (self.metric,)

    @property
    def divergence_metrics(self) -> tuple[str, ...]:
        """Metrics whose NaN/inf makes the trial diverged: the selection metric, and the heldout
        one outside tuning."""
        if self.heldout and self.phase != "tune":
            return (self.metric, self.heldout)
        return (self.metric,)
