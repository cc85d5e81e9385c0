"""What each arm cost, kept apart from the decision: trials, trial-seconds, seconds per step,
resource-seconds.

Pure, no pandas: a function of the trial records (slim ones do: the first and
last report's step and time are cached in them) and the frozen contract.

- trial-seconds: the sum of the trials' `duration_s` (wall time per trial);
- seconds per step: the median over the arm's trials of the slope of report
  time over step (set-up before the first report is not a step);
- cpu- and gpu-seconds: trial-seconds times the resources each trial reserved
  (`budget.resources`): what the arm held, not what it used;
- disk: the sum of the trials' `disk_bytes` (what a command trial's folder held once its record was
  written and its checkpoints pruned); None when no trial of the arm measured it.

Every phase counts (tuning, confirmation, re-evaluation); `phases` splits it.
"""

from __future__ import annotations

import statistics
from typing import Any

from planner._core.records import TrialRecord
from planner._store import facts


def _seconds(value: Any) -> float:
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value
        and abs(value) != float("inf")
    ):
        return float(value)
    return 0.0


def cost_by_arm(records: list[TrialRecord], contract: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per arm (the contract's order, then arms seen only in records)."""
    cpu = _seconds(facts.contract_get(contract, "budget.resources.cpu", 1.0))
    gpu = _seconds(facts.contract_get(contract, "budget.resources.gpu", 0.0))
    arms = facts.arm_names(contract)
    acc: dict[str, dict[str, Any]] = {}
    for r in records:
        arm = r.get("arm")
        if arm is None:
            continue
        arm = str(arm)
        if arm not in arms:
            arms.append(arm)
        a = acc.setdefault(
            arm, {"trials": 0, "seconds": 0.0, "slopes": [], "phases": {}, "disk": None}
        )
        disk = r.get("disk_bytes")
        if isinstance(disk, int) and not isinstance(disk, bool) and disk >= 0:
            a["disk"] = (a["disk"] or 0) + disk
        seconds = _seconds(r.get("duration_s"))
        a["trials"] += 1
        a["seconds"] += seconds
        slope = facts.seconds_per_step(r)
        if slope is not None:
            a["slopes"].append(slope)
        p = a["phases"].setdefault(str(r.get("phase")), {"trials": 0, "trial_seconds": 0.0})
        p["trials"] += 1
        p["trial_seconds"] += seconds
    rows = []
    for arm in arms:
        held = acc.get(arm)
        if held is None:
            rows.append(
                {
                    "arm": arm,
                    "trials": 0,
                    "trial_seconds": 0.0,
                    "median_s_per_step": None,
                    "cpu_seconds": 0.0,
                    "gpu_seconds": 0.0,
                    "disk_bytes": None,
                    "phases": {},
                }
            )
            continue
        rows.append(
            {
                "arm": arm,
                "trials": held["trials"],
                "trial_seconds": round(held["seconds"], 3),
                "median_s_per_step": statistics.median(held["slopes"]) if held["slopes"] else None,
                "cpu_seconds": round(held["seconds"] * cpu, 3),
                "gpu_seconds": round(held["seconds"] * gpu, 3),
                "disk_bytes": held["disk"],
                "phases": {
                    k: {"trials": v["trials"], "trial_seconds": round(v["trial_seconds"], 3)}
                    for k, v in held["phases"].items()
                },
            }
        )
    return rows
