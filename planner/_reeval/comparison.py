"""A reeval's trials compared with the log, as pure functions of values: each seed's logged and new
result side by side (`compare_seed`), the verdict and its exit code, the new seeds' effect against
the logged baseline, and the record reevals.jsonl keeps (`result_of`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from planner._core.errors import EXIT_INCOMPLETE, EXIT_INVALID, EXIT_OK
from planner._core.records import finite_final_value
from planner._core.status import FAILED, TrialStatus
from planner._data.checks import fingerprint_differences
from planner._reeval.prepare import ReevalPlan
from planner._stats.decide import compare

# a reeval trial that did not give a result: it failed, or it never ran (NOT_RUN: a logged seed not
# run again)
DID_NOT_RUN = FAILED | {TrialStatus.NOT_RUN}


@dataclass(frozen=True)
class SeedRow:
    """One seed: the logged trial (when there is one) beside the reeval trial."""

    seed: int
    trial_id: str
    logged_status: str | None  # None: a new seed, not logged
    logged: float | None
    new_status: str
    new: float | None
    diff: float | None  # new - logged
    reproduced: bool | None  # None: a new seed, or a trial that failed to run
    data: tuple[
        str, ...
    ] = ()  # splits whose fingerprints differ from the logged trial's (docs/data.md)
    # the logged trial continued from its checkpoint (`resumed`): no exact repeat expected
    continued: bool = False

    @property
    def is_new(self) -> bool:
        return self.logged_status is None


def compare_seed(
    seed: int,
    trial_id: str,
    logged: Mapping[str, Any] | None,
    new: dict | None,
    metric: str,
    tolerance: float,
) -> SeedRow:
    """Logged vs new at one seed: reproduced when both have the same status and |new - logged| <=
    tolerance."""
    new_status = new.get("status", TrialStatus.FAILED) if new else TrialStatus.NOT_RUN
    new_value = finite_final_value(new, metric) if new else None
    if logged is None:
        return SeedRow(seed, trial_id, None, None, new_status, new_value, None, None)
    logged_status = str(logged.get("status"))
    logged_value = finite_final_value(logged, metric)
    diff = None if logged_value is None or new_value is None else new_value - logged_value
    if new_status in DID_NOT_RUN and logged_status not in DID_NOT_RUN:
        reproduced = None  # it did not run: no evidence either way
    elif new_status != logged_status:
        reproduced = False
    elif logged_value is None and new_value is None:
        reproduced = True  # the same non-result (both diverged, or neither reported the metric)
    else:
        reproduced = diff is not None and abs(diff) <= tolerance
    data: tuple[str, ...] = ()
    if new is not None and (logged.get("splits") or new.get("splits")):
        data = tuple(fingerprint_differences(logged, new))
        if data and new_status not in DID_NOT_RUN:
            reproduced = False  # a re-evaluation on different data is not a reproduction
    continued = bool(logged.get("resumed") or logged.get("resumed_from"))
    return SeedRow(
        seed,
        trial_id,
        logged_status,
        logged_value,
        new_status,
        new_value,
        diff,
        reproduced,
        data,
        continued,
    )


def verdict(rows: list[SeedRow]) -> tuple[str, int]:
    """(verdict, exit code): a logged seed that differs -> not_reproduced (1); else a trial that
    failed to run -> failed (3); else reproduced (0), or new_seeds (0) when no logged seed was
    compared."""
    if any(r.reproduced is False for r in rows):
        return "not_reproduced", EXIT_INVALID
    if any(r.new_status in DID_NOT_RUN for r in rows):
        return "failed", EXIT_INCOMPLETE
    if any(not r.is_new for r in rows):
        return "reproduced", EXIT_OK
    return "new_seeds", EXIT_OK


def estimate(values: list[float]) -> dict[str, Any]:
    """n, mean and sample sd (None where undefined)."""
    n = len(values)
    return {
        "n": n,
        "mean": statistics.fmean(values) if n else None,
        "sd": statistics.stdev(values) if n >= 2 else None,
    }


def compare_new(
    contract, arm: str, new: dict[int, float], baseline_logged: dict[int, float]
) -> dict | None:
    """The new seeds' effect against the logged baseline, by the contract's test; None when not
    meaningful.

    Not meaningful for the baseline itself, or with fewer than 2 values a side.
    The paired test pairs by seed; new seeds the baseline never ran cannot pair,
    so then Welch's test is used and the result says so.
    """
    if arm == contract.baseline.name or len(new) < 2 or len(baseline_logged) < 2:
        return None
    test, note = contract.acceptance.test, ""
    if test == "paired" and len(set(new) & set(baseline_logged)) < 2:
        test, note = (
            "welch",
            "the paired test needs seeds the baseline ran; Welch's test used instead",
        )
    try:
        c = compare(
            list(baseline_logged.values()),
            list(new.values()),
            mode=contract.metric.decision_mode,
            test=test,
            alpha=contract.acceptance.alpha,
            baseline_seeds=list(baseline_logged),
            arm_seeds=list(new),
        )
    except ValueError as error:
        return {"test": test, "note": str(error)}
    return {
        "test": c.test,
        "alpha": c.alpha,
        "effect": c.effect,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "p_value": c.p_value,
        "n_baseline": c.n_baseline,
        "n_arm": c.n_arm,
        "note": note,
    }


@dataclass
class ReevalResult:
    plan: ReevalPlan
    rows: list[SeedRow]
    verdict: str
    exit_code: int
    logged_estimate: dict[str, Any]
    new_estimate: dict[str, Any] | None
    comparison: dict[str, Any] | None
    record: dict[str, Any]


def result_of(plan: ReevalPlan, records: dict[str, dict]) -> ReevalResult:
    """Compare the reeval records with the log (pure)."""
    rows = [
        compare_seed(
            seed,
            plan.trial_id(seed),
            plan.logged.get(seed),
            records.get(plan.trial_id(seed)),
            plan.metric,
            plan.tolerance,
        )
        for seed in plan.seeds
    ]
    name, code = verdict(rows)
    new_values = {r.seed: r.new for r in rows if r.is_new and r.new is not None}
    new_estimate = estimate(list(new_values.values())) if plan.new_seeds else None
    comparison = (
        compare_new(plan.contract, plan.arm, new_values, plan.baseline_logged)
        if plan.new_seeds
        else None
    )
    logged_estimate = estimate(list(plan.arm_logged.values()))
    record = {
        "reeval": plan.reeval_number,
        "arm": plan.arm,
        "seeds": plan.seeds,
        "new_seeds": plan.new_seeds,
        "tolerance": plan.tolerance,
        "metric": plan.metric,
        "config_source": plan.config_source,
        "config": plan.config,
        "trial_ids": [plan.trial_id(s) for s in plan.seeds],
        "rows": [asdict(r) for r in rows],
        "identity_differences": [asdict(d) for d in plan.differences],
        "identity": plan.identity,
        "logged_estimate": logged_estimate,
        "new_estimate": new_estimate,
        "comparison": comparison,
        "verdict": name,
        "exit_code": code,
        "notes": plan.notes,
    }
    return ReevalResult(
        plan, rows, name, code, logged_estimate, new_estimate, comparison, _jsonable(record)
    )


def _jsonable(value: Any) -> Any:
    """Non-finite floats -> None (reevals.jsonl is strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
