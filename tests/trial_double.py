"""A stand-in for planner's Trial (planner/_trial/trial.py) with the same interface.

It records every report and enforces the reporting rules the real Trial does:
steps strictly increasing and at most the budget. `stop_after` makes `report`
raise StopTrial after that many reports, the way a scheduler stops a trial early.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner import TrialProtocolError


class StopTrial(Exception):
    """Raised by `report` when the (pretend) scheduler stops the trial."""


@dataclass
class TrialDouble:
    dir: str
    seed: int = 0
    budget: int = 10
    arm: str = "baseline"
    phase: str = "tune"
    id: str = "tune-baseline-s0-t000"
    stop_after: int | None = None
    reports: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    splits: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(
        default_factory=list
    )  # protocol notes of the attempt (a declared metric no row held)
    log_reached: int | None = None  # the furthest step the script's own metrics log held a row at

    def report(self, step: int, **metrics: float) -> None:
        last = self.reports[-1][0] if self.reports else None
        if last is not None and step <= last:
            raise TrialProtocolError(f"step {step} after step {last}: steps must strictly increase")
        if step > self.budget:
            raise TrialProtocolError(f"step {step} is past the budget of {self.budget}")
        self.reports.append((step, dict(metrics)))
        if self.stop_after is not None and len(self.reports) >= self.stop_after:
            raise StopTrial(f"stopped after {len(self.reports)} reports")

    def add_split_summary(self, name: str, summary: dict) -> None:
        """A `planner.log_split` line, as the real Trial takes it (docs/data.md)."""
        self.splits[name] = summary

    @property
    def steps(self) -> list[int]:
        return [step for step, _ in self.reports]

    def last(self, metric: str) -> float:
        return self.reports[-1][1][metric]
