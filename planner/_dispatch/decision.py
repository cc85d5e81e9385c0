"""The decision of `plan run` from its records: decisions.json's rows per arm (the contract's
rule, then an arm made `invalid` by its data, a tuning budget not matched, or seeds or tuned values
that did not vary the run), and how far each arm's tuning explored its space."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

# called through its module (tests swap the rule there)
import planner._stats.decide as decision_rule
from planner._core.records import (
    error_groups,
    final_value,
    non_finite_metrics,
    seeds_identical,
    tuned_values_identical,
)
from planner._core.status import TrialStatus
from planner._data.checks import invalid_reasons
from planner._plan.explored import ArmReach, arm_reach
from planner._plan.space import arm_space
from planner._plan.trials import Plan
from planner._stats.decide import (
    latest_outcomes,
    mark_invalid,
    seeds_did_not_vary,
    tuned_values_did_not_vary,
)

NEVER_RAN = "NotRun"  # the error type of a planned trial Ray ended twice without running it


def decide_arms(contract, confirm_records: list[dict]) -> list[dict]:
    """The contract's decision per treatment arm (planner._stats.decide), as decisions.json rows.

    A confirmation record becomes an Outcome: its seed, the last reported value
    of the decision metric, and its status; a planned seed with no record is
    pending, which makes the arm incomplete.
    """
    metric = contract.metric.decision_metric
    confirm = latest_outcomes(
        (
            (
                cast(str, r.get("arm")),
                r.get("seed"),
                final_value(r, metric),
                cast(str, r.get("status", TrialStatus.FAILED)),
            )
            for r in confirm_records
            if r.get("phase") == "confirm"
        ),
        [contract.baseline.name, *(arm.name for arm in contract.arms)],
        list(contract.seeds),
    )
    decisions = decision_rule.decide(
        contract.acceptance,
        contract.metric.decision_mode,
        confirm,
        contract.baseline.name,
        planned_seeds=list(contract.seeds),
        diverged_value=contract.failures.diverged_value,
        arms=[arm.name for arm in contract.arms],
        metric=metric,
    )
    return [d.as_dict() for d in decisions]


def tuning_reach(contract, records: Iterable[dict], selected: dict[str, dict]) -> list[ArmReach]:
    """How far each arm's tuning explored its space (planner._plan.explored), from its tuning
    records and the params selected for it; [] for a contract without tuning."""
    if contract.tuning is None:
        return []
    tune = [r for r in records if r.get("phase") == "tune"]
    return [
        arm_reach(
            arm,
            arm_space(contract.tuning, arm),
            [r.get("params") or {} for r in tune if r.get("arm") == arm],
            selected.get(arm),
        )
        for arm in [contract.baseline.name, *(a.name for a in contract.arms)]
    ]


def invalid_on_data(contract, rows: list[dict], confirm_records: list[dict]) -> list[dict]:
    """Arms whose confirmation trials (or the baseline's) carry a data violation: decision
    `invalid`."""
    latest: dict[tuple, dict] = {}
    for record in confirm_records:
        latest[(record.get("arm"), record.get("seed"))] = record
    reasons = invalid_reasons(
        latest.values(), contract.baseline.name, [arm.name for arm in contract.arms]
    )
    return mark_invalid(rows, reasons, "data")


def budget_not_matched(contract, plan: Plan, records: dict[str, dict]) -> dict[str, str]:
    """Arms whose tuning ran fewer trials than the plan gives every arm (a planned trial Ray never
    ran, recorded as such): arm -> why its decision is `invalid`. The baseline's shortfall is every
    arm's."""
    planned: dict[str, int] = {}
    never: dict[str, int] = {}
    for t in plan.tune:
        planned[t.arm] = planned.get(t.arm, 0) + 1
        record = records.get(t.trial_id)
        if record is not None and any(
            e.get("type") == NEVER_RAN for e in record.get("errors") or []
        ):
            never[t.arm] = never.get(t.arm, 0) + 1
    short = {
        arm: f"tuning budget not matched: {arm} {planned[arm] - n} of {planned[arm]} trials."
        for arm, n in never.items()
        if n
    }
    base = short.get(contract.baseline.name)
    return {
        arm.name: " ".join(w for w in (short.get(arm.name), base) if w)
        for arm in contract.arms
        if arm.name in short or base
    }


def did_not_vary(
    contract, records: dict[str, dict], rows: list[dict]
) -> tuple[list[dict], list[dict]]:
    """Arms whose seeds, or whose tuned values, did not vary the run become `invalid` (not an
    incomplete one); and the findings for decisions.json. One rule: trials that should differ
    reported the same curves."""
    c = contract
    confirmed = [r for r in records.values() if r["phase"] == "confirm"]
    tuning = [r for r in records.values() if r["phase"] == "tune"]
    identical = seeds_identical(confirmed)
    tuned = tuned_values_identical(tuning, c.metric.name)
    diverged_confirm = (
        non_finite_metrics(confirmed) if identical else {}
    )  # a cause of identical curves
    diverged_tune = non_finite_metrics(tuning) if tuned else {}
    reasons, rules = {}, {}
    for row in rows:
        whys = {
            rule: why
            for rule, why in (
                (
                    "tuned_values",
                    tuned_values_did_not_vary(row["arm"], tuned, c.baseline.name, diverged_tune),
                ),
                (
                    "seeds",
                    seeds_did_not_vary(
                        row["arm"],
                        identical,
                        c.baseline.name,
                        c.metric.decision_metric,
                        diverged_confirm,
                    ),
                ),
            )
            if why is not None
        }
        if whys and row["decision"] != "incomplete":
            reasons[row["arm"]], rules[row["arm"]] = " ".join(whys.values()), list(whys)

    def diverged(arm: str, names: dict[str, list[str]]) -> str:
        return (
            f" (their reports hold NaN or infinite {', '.join(names[arm])}: diverged)"
            if arm in names
            else ""
        )

    findings = [
        {
            "kind": "seeds_identical",
            "arm": arm,
            "seeds": n,
            "message": f"every confirmation seed of {arm} ({n} seeds) reported exactly the "
            f"same curves"
            f"{diverged(arm, diverged_confirm)}: the seeds did not vary the run",
        }
        for arm, n in identical.items()
    ]
    findings += [
        {
            "kind": "tuned_values_identical",
            "arm": arm,
            "trials": n,
            "message": f"the tuned values did not vary the run: {n} tuning trials of arm "
            f"{arm} with "
            f"different params reported the same curves of {c.metric.name}"
            + (diverged(arm, diverged_tune) or "; check that the trainable uses them"),
        }
        for arm, n in tuned.items()
    ]
    return mark_invalid(rows, reasons, rules), findings


def nothing_confirmed(
    contract, records: dict[str, dict], unselected: dict[str, str], rows: list[dict]
) -> list[dict]:
    """An arm (or the baseline) whose tuning selected nothing was never confirmed: say why, not
    "seeds not run yet" (which reads as pending work that --resume would do)."""
    if not unselected or any(
        r["phase"] == "confirm" and r["arm"] in unselected for r in records.values()
    ):
        return rows
    out = []
    for row in rows:
        said = []
        for arm in (contract.baseline.name, row["arm"]):
            if arm in unselected:
                tuned = [r for r in records.values() if r["phase"] == "tune" and r["arm"] == arm]
                groups = error_groups(tuned)
                error = f"; {groups[0]['error']} in {groups[0]['count']} of them" if groups else ""
                said.append(
                    f"{'the baseline ' if arm != row['arm'] else ''}{arm} was never confirmed: "
                    f"{unselected[arm]}{error}"
                )
        if said and row["decision"] == "incomplete":
            row = {
                **row,
                "reason": f"Incomplete: {'; '.join(said)}. Resuming will not change this: fix "
                f"the "
                "trainable or the contract and start a new run.",
            }
        out.append(row)
    return out
