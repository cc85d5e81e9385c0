"""The report's first lines: per treatment arm, both means, the effect with its interval and the
decision; for an `inconclusive` one, the seeds `plan power` asks for with this run as its pilot.

The seeds come from `plan power`'s own functions (`spread_from_pilot`, `power_summary`) over this
run's confirmation values, read from `load_run`'s trials frame: the same figures as
`plan power CONTRACT --pilot RUN_DIR`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from planner._core.errors import UsageError
from planner._core.lazy import lazy_import
from planner._core.status import TrialStatus
from planner._plan.pilot import Pilot

if TYPE_CHECKING:  # pragma: no cover
    from planner._results.tables import RunResults

model = lazy_import("planner._contract.model")  # pydantic: only for an inconclusive decision
plan_seeds = lazy_import("planner._plan.seeds")  # SciPy's root finder, likewise


@dataclass(frozen=True)
class SeedsNeeded:
    """What `plan power` asks for, with this run as its pilot, or why it cannot say."""

    seeds_80: int | None = None  # per arm, for 80 % power at the effect planned for
    seeds_90: int | None = None
    declared: int | None = None  # the seeds the contract declares
    effect: float | None = None  # the true effect planned for (min_effect)
    sd: float | None = None
    sd_source: str | None = None
    reason: str | None = None  # why `plan power` cannot size it from this run


@dataclass(frozen=True)
class Verdict:
    """One treatment arm against the baseline, as the report's first lines say it."""

    arm: str
    baseline: str
    metric: str
    arm_mean: float | None
    baseline_mean: float | None
    n_arm: int | None
    n_baseline: int | None
    decision: str | None
    effect: float | None
    ci_low: float | None
    ci_high: float | None
    alpha: float | None  # the adjusted alpha the CI is at
    seeds: SeedsNeeded | None  # only for an inconclusive decision


def verdicts(summary: Mapping[str, Any], results: RunResults) -> list[Verdict]:
    """One per decision row of the summary (`planner._results.report.summarize`)."""
    means = summary["per_seed"]["mean"]
    baseline = str(summary["baseline"])
    needed: SeedsNeeded | None = None
    out = []
    for d in summary["decisions"]:
        if d["decision"] == "inconclusive" and needed is None:
            needed = seeds_needed(results)
        out.append(
            Verdict(
                arm=str(d["arm"]),
                baseline=baseline,
                metric=str(summary["metric"]),
                arm_mean=means.get(d["arm"]),
                baseline_mean=means.get(baseline),
                n_arm=d["n_arm"],
                n_baseline=d["n_baseline"],
                decision=d["decision"],
                effect=d["effect"],
                ci_low=d["ci_low"],
                ci_high=d["ci_high"],
                alpha=d["alpha_adjusted"],
                seeds=needed if d["decision"] == "inconclusive" else None,
            )
        )
    return out


def confirmation_values(results: RunResults) -> dict[str, dict[int, float]]:
    """arm -> seed -> the final decision-metric value of each completed confirmation trial (a trial
    logged twice counts once: its last record), as `plan power --pilot` reads a pilot."""
    t = results.trials
    column = f"final.{results.decision_metric}"
    if not len(t) or column not in t.columns:
        return {}
    keep = (
        (t["phase"] == "confirm").to_numpy(dtype=bool, na_value=False)
        & (t["status"].astype(str) == str(TrialStatus.COMPLETED)).to_numpy()
        & t["seed"].notna().to_numpy()
        & np.isfinite(t[column].to_numpy(dtype=float))
    )
    values: dict[str, dict[int, float]] = {}
    rows = t.loc[keep]
    for arm, seed, value in zip(
        rows["arm"].astype(str), rows["seed"].tolist(), rows[column].tolist(), strict=True
    ):
        values.setdefault(arm, {})[int(seed)] = float(value)
    return values


def seeds_needed(results: RunResults) -> SeedsNeeded:
    """The seeds `plan power` asks for with this run as the pilot (80 % and 90 % power at
    min_effect)."""
    try:
        contract = model.contract_from(results.contract)
    except ValueError:
        return SeedsNeeded(
            reason="the run's frozen contract does not load with this planner version"
        )
    metric = contract.metric.decision_metric
    pilot = Pilot(
        str(results.run_dir),
        metric,
        contract.baseline.name,
        [a.name for a in contract.all_arms],
        confirmation_values(results),
    )
    try:
        sd, source = plan_seeds.spread_from_pilot(pilot, contract.acceptance.test)
        summary = plan_seeds.power_summary(contract, sd, sd_source=source)
    except UsageError as error:
        return SeedsNeeded(declared=len(contract.seeds), reason=str(error))
    return SeedsNeeded(
        seeds_80=summary["needed"]["80"]["seeds"],
        seeds_90=summary["needed"]["90"]["seeds"],
        declared=len(contract.seeds),
        effect=summary["effect"],
        sd=sd,
        sd_source=source,
    )
