"""A pilot run, read for planning: seed-to-seed values and the time a step and a trial cost.

`read_pilot(run_dir, metric)` reads a run folder (any contract's run: a pilot
is usually a small version of the real experiment) and returns plain values:

- `values`: arm -> seed -> the last reported value of `metric` of each
  completed confirmation trial (what `plan power` takes the spread from);
- `timing`: the time per step of exposure and the overhead per trial, from
  the trial records' reports (`time_s`) and the driver's events (see
  `PilotTiming`).

Pure reading, no Ray, no pandas. A folder that is not a run, or a pilot
without what is asked, is a `UsageError` that says so in a sentence.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from planner._core.errors import UsageError
from planner._core.records import TrialRecord, finite_final_value
from planner._core.status import TrialStatus
from planner._store import facts
from planner._store import read as rf


@dataclass(frozen=True)
class PilotTiming:
    """What the pilot's phases and trials cost, measured from its records and events.

    time_per_step_s: median over trials of the slope of report times
        (`time_s`) against steps, so set-up inside the trainable is not a step.
    overhead_s: per trial, beyond its steps, once workers are warm: from each
        phase's throughput after its first trial ended (slot-seconds used,
        with `slots` the most trials the pilot ran at once, less the steps'
        time, per trial ended); median over phases. Without phase events: the
        median trial's `duration_s` beyond its steps.
    cold_start_s: once per phase, what the first wave costs beyond a warm
        trial (worker processes start, imports): phase_started to the first
        trial_ended, less one warm trial; median over phases.
    startup_s: run_started to the first phase_started (starting Ray).
    """

    time_per_step_s: float
    overhead_s: float
    cold_start_s: float
    startup_s: float | None
    slots: int  # the most trials the pilot ran at once
    trials: int  # trials measured

    def as_dict(self) -> dict[str, Any]:
        return {
            "time_per_step_s": self.time_per_step_s,
            "overhead_s": self.overhead_s,
            "cold_start_s": self.cold_start_s,
            "startup_s": self.startup_s,
            "slots": self.slots,
            "trials": self.trials,
        }


@dataclass(frozen=True)
class Pilot:
    run_dir: str
    metric: str
    baseline: str | None  # the pilot contract's baseline arm
    arms: list[str]  # the pilot contract's arms, baseline first
    values: dict[str, dict[int, float]] = field(default_factory=dict)
    timing: PilotTiming | None = None

    def require_values(self) -> dict[str, dict[int, float]]:
        """The confirmation values, or a UsageError saying why a spread cannot be had from this
        pilot."""
        if not any(len(v) >= 2 for v in self.values.values()):
            found = sum(len(v) for v in self.values.values())
            raise UsageError(
                f"the pilot {self.run_dir} has {found} completed confirmation trial(s) reporting "
                f"{self.metric!r}; "
                "a seed-to-seed spread needs at least 2 seeds of one arm: let the pilot's "
                "confirmation finish "
                f"(plan run --resume {self.run_dir}), or give the spread with --sd"
            )
        return self.values

    def require_timing(self) -> PilotTiming:
        if self.timing is None:
            raise UsageError(
                f"the pilot {self.run_dir} has no ended trial with timed reports: "
                "nothing to forecast the wall time from"
            )
        return self.timing


def read_pilot(run_dir: str | os.PathLike, metric: str) -> Pilot:
    """The pilot's confirmation values of `metric` and its timing (UsageError when it is not a run
    folder)."""
    folder = rf.open_run(run_dir)
    contract = folder.contract()
    records = _last_per_trial(folder.trials().records)
    arms = facts.arm_names(contract)
    values: dict[str, dict[int, float]] = {}
    for r in records:
        if r.get("phase") != "confirm" or r.get("status") != TrialStatus.COMPLETED:
            continue
        value = finite_final_value(r, metric)  # a spread needs usable numbers
        seed = r.get("seed")
        if value is not None and isinstance(seed, int):
            values.setdefault(str(r.get("arm")), {})[seed] = value
    timing = _timing(records, folder.events().records)
    return Pilot(
        str(folder.path),
        metric,
        facts.contract_get(contract, "baseline.name"),
        arms,
        values,
        timing,
    )


def _last_per_trial(records: list[TrialRecord]) -> list[TrialRecord]:
    """A trial logged twice (a resumed run) counts once: the last record."""
    return list({r.get("trial_id"): r for r in records}.values())


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _step_time(record: TrialRecord) -> float | None:
    """Seconds per step of one trial: the slope of time_s over steps."""
    points = []
    for report in facts.reports_of(record):
        if (
            isinstance(report, dict)
            and isinstance(report.get("step"), int | float)
            and isinstance(report.get("time_s"), int | float)
        ):
            points.append((float(report["step"]), float(report["time_s"])))
    if not points:
        return None
    (s0, t0), (s1, t1) = points[0], points[-1]
    if s1 > s0:
        return max(0.0, (t1 - t0) / (s1 - s0))
    return t1 / s1 if s1 > 0 else None


def _timing(records: list[TrialRecord], events: list[dict[str, Any]]) -> PilotTiming | None:
    every = {r.get("trial_id"): _step_time(r) for r in records}
    slopes = {tid: v for tid, v in every.items() if v is not None}
    if not slopes:
        return None
    tps = statistics.median(slopes.values())
    steps = {r.get("trial_id"): float(r.get("exposure") or 0) for r in records}
    timeline = [(when, e) for e in events if (when := _parse_time(e.get("time"))) is not None]
    run_started = next((w for w, e in timeline if e.get("event") == "run_started"), None)
    first_phase = next((w for w, e in timeline if e.get("event") == "phase_started"), None)
    startup = (
        None if run_started is None or first_phase is None else max(0.0, first_phase - run_started)
    )
    running, slots = set(), 1
    phases: list[dict[str, Any]] = []
    for when, e in timeline:
        kind, tid = e.get("event"), e.get("trial_id")
        if kind == "phase_started":
            phases.append(
                {"start": when, "end": None, "first_end": None, "started": {}, "ended": {}}
            )
        elif kind == "phase_ended" and phases:
            phases[-1]["end"] = when
        elif kind == "trial_started":
            running.add(tid)
            slots = max(slots, len(running))
            if phases:
                phases[-1]["started"][tid] = when
        elif kind in ("trial_ended", "trial_cancelled"):
            running.discard(tid)
            if phases and kind == "trial_ended":
                phases[-1]["ended"][tid] = when
                phases[-1]["first_end"] = phases[-1]["first_end"] or when
    overheads, colds = [], []
    for ph in phases:
        if ph["first_end"] is None:
            continue
        first = min(ph["ended"], key=ph["ended"].get)
        warm = [
            t for t, w in ph["ended"].items() if ph["started"].get(t, -math.inf) >= ph["first_end"]
        ]
        end = ph["end"] or max(ph["ended"].values())
        if warm and end > ph["first_end"]:
            busy = (end - ph["first_end"]) * slots - sum(steps.get(t, 0.0) * tps for t in warm)
            overheads.append(max(0.0, busy / len(warm)))
        ph["first"] = first
    overhead = (
        statistics.median(overheads)
        if overheads
        else statistics.median(
            max(
                0.0,
                float(r["duration_s"] or 0) - slopes[r.get("trial_id")] * steps[r.get("trial_id")],
            )
            for r in records
            if r.get("trial_id") in slopes and isinstance(r.get("duration_s"), int | float)
        )
        if any(isinstance(r.get("duration_s"), int | float) for r in records)
        else 0.0
    )
    for ph in phases:
        if ph["first_end"] is not None:
            colds.append(
                max(
                    0.0,
                    ph["first_end"] - ph["start"] - steps.get(ph["first"], 0.0) * tps - overhead,
                )
            )
    return PilotTiming(
        tps, overhead, statistics.median(colds) if colds else 0.0, startup, slots, len(slopes)
    )
