"""Selection: one config per arm from its tuning trials, by the declared rule.

Pure. Only trials that reached the full exposure and completed are candidates:
an early-stopped trial is never selected, and a trial is scored on its final
reports, never on the best step of its curve. `final` scores a trial by its
last report of the selection metric; `mean_last_k` by the mean of its last k
reports of it (all of them when it reported fewer than k times). Higher is
better for `mode: max`, lower for `mode: min`. Ties go to the earlier trial:
the earlier tuning seed in the contract, then the lower index.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from planner._core.records import held_reports


@dataclass(frozen=True)
class Selected:
    arm: str
    trial_id: str | None  # None: no candidate, the arm cannot be confirmed
    params: dict[str, Any]
    score: float | None
    candidates: int  # completed full-exposure trials considered
    trials: int  # tuning trials of the arm that ended
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def metric_values(record: dict, metric: str) -> list[float]:
    """The values of `metric` in a trial record's reports, in order (non-finite ones as float). A
    trial that continued from its checkpoint counts the reports the checkpoint held first
    (`held_reports`): its record reports only the steps it had left, and `mean_last_k` scored it on
    fewer values than the others."""
    out = []
    for report in [*held_reports(record), *record.get("reports", [])]:
        if metric in report.get("metrics", {}):
            out.append(_as_float(report["metrics"][metric]))
    return out


def _as_float(value: Any) -> float:
    if isinstance(value, str):  # non-finite values are stored as "nan", "inf", "-inf"
        return float(value)
    return float(value)


def score(record: dict, metric: str, rule: str = "final", k: int | None = None) -> float | None:
    """The trial's selection score, or None when it has no finite one."""
    values = metric_values(record, metric)
    if not values:
        return None
    if rule == "final":
        value = values[-1]
    else:
        tail = values[-(k or 1) :]
        value = sum(tail) / len(tail)
    return value if math.isfinite(value) else None


def is_candidate(record: dict, exposure: int) -> bool:
    return record.get("status") == "completed" and record.get("exposure") == exposure


def select_arm(
    arm: str,
    records: list[dict],
    *,
    metric: str,
    mode: str,
    exposure: int,
    rule: str = "final",
    k: int | None = None,
    seed_order: list[int] | None = None,
) -> Selected:
    """The selected tuning trial of `arm` among `records` (tuning records of any arms)."""
    mine = [r for r in records if r.get("arm") == arm and r.get("phase") == "tune"]
    order = {seed: i for i, seed in enumerate(seed_order or [])}
    best: tuple[float, tuple[int, int], dict] | None = None
    candidates = 0
    for record in mine:
        if not is_candidate(record, exposure):
            continue
        value = score(record, metric, rule, k)
        if value is None:
            continue
        candidates += 1
        oriented = value if mode == "max" else -value
        position = (order.get(record["seed"], len(order)), record.get("index", 0))
        if best is None or oriented > best[0] or (oriented == best[0] and position < best[1]):
            best = (oriented, position, record)
    if best is None:
        why = (
            "no tuning trial of this arm ended"
            if not mine
            else f"none of its {len(mine)} tuning trials completed the full exposure with a "
            f"finite {metric}"
        )
        return Selected(arm, None, {}, None, 0, len(mine), why)
    record = best[2]
    return Selected(
        arm,
        record["trial_id"],
        dict(record.get("params", {})),
        best[0] if mode == "max" else -best[0],
        candidates,
        len(mine),
    )


def select(contract, records: list[dict]) -> dict[str, Selected]:
    """The selected trial of every arm of `contract` (which has `tuning`)."""
    tuning = contract.tuning
    return {
        arm.name: select_arm(
            arm.name,
            records,
            metric=contract.metric.name,
            mode=contract.metric.mode,
            exposure=contract.budget.exposure,
            rule=tuning.selection.rule,
            k=tuning.selection.k,
            seed_order=list(tuning.seeds),
        )
        for arm in contract.all_arms
    }
