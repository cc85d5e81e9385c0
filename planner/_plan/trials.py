"""The plan: every trial a contract asks for, named before anything runs.

Pure: a function of the contract. Tuning expands arms (baseline first) x tuning
seeds x `trials_per_arm`; confirmation expands arms x confirmation seeds. Trial
ids follow docs/run-folder.md, so a resumed run finds the same ids again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from planner._contract.load import LoadedYaml
from planner._contract.rules import check_bounds, planned_trials
from planner._core.errors import ContractError


def tune_trial_id(arm: str, seed: int, index: int) -> str:
    return f"tune-{arm}-s{seed}-t{index:03d}"


def confirm_trial_id(arm: str, seed: int) -> str:
    return f"confirm-{arm}-s{seed}"


@dataclass(frozen=True)
class PlannedTrial:
    trial_id: str
    phase: str  # tune | confirm
    arm: str
    seed: int
    index: int


@dataclass(frozen=True)
class TuneGroup:
    """One Optuna sweep: an arm at one tuning seed, `size` trials."""

    arm: str
    seed: int
    size: int

    @property
    def trial_ids(self) -> list[str]:
        return [tune_trial_id(self.arm, self.seed, i) for i in range(self.size)]


@dataclass(frozen=True)
class Plan:
    arms: tuple[str, ...]
    tune_groups: tuple[TuneGroup, ...]
    tune: tuple[PlannedTrial, ...]
    confirm: tuple[PlannedTrial, ...]
    exposure: int
    max_trials: int | None

    @property
    def planned_count(self) -> int:
        return len(self.tune) + len(self.confirm)

    @property
    def trials(self) -> tuple[PlannedTrial, ...]:
        return self.tune + self.confirm

    @property
    def counts(self) -> dict[str, int]:
        """{"tune", "confirm", "total"}: the shape `planned_trials` gives."""
        return {"tune": len(self.tune), "confirm": len(self.confirm), "total": self.planned_count}

    def as_dict(self) -> dict:
        return {
            "planned_count": self.planned_count,
            "exposure": self.exposure,
            "max_trials": self.max_trials,
            "phases": [
                {
                    "phase": "tune",
                    "count": len(self.tune),
                    "trials": [asdict(t) for t in self.tune],
                },
                {
                    "phase": "confirm",
                    "count": len(self.confirm),
                    "trials": [asdict(t) for t in self.confirm],
                },
            ],
        }


def make_plan(contract) -> Plan:
    """Every planned trial of `contract` (a `planner._contract.model.Contract`); a count past its
    bound (P430) is refused before anything is built, also for a contract no validation saw."""
    past = check_bounds(contract, LoadedYaml(None, "<contract>"))
    if past:
        raise ContractError(past)
    arms = tuple(arm.name for arm in contract.all_arms)
    groups: list[TuneGroup] = []
    tune: list[PlannedTrial] = []
    if contract.tuning is not None:
        for arm in arms:
            for seed in contract.tuning.seeds:
                group = TuneGroup(arm, seed, contract.tuning.trials_per_arm)
                groups.append(group)
                tune += [
                    PlannedTrial(tune_trial_id(arm, seed, i), "tune", arm, seed, i)
                    for i in range(group.size)
                ]
    confirm = [
        PlannedTrial(confirm_trial_id(arm, seed), "confirm", arm, seed, 0)
        for arm in arms
        for seed in contract.seeds
    ]
    plan = Plan(
        arms,
        tuple(groups),
        tuple(tune),
        tuple(confirm),
        contract.budget.exposure,
        contract.budget.max_trials,
    )
    if plan.counts != planned_trials(
        contract
    ):  # one count: validate, estimate and P409 use planned_trials
        raise AssertionError(
            f"the plan lists {plan.counts} trials but planned_trials counts "
            f"{planned_trials(contract)}"
        )
    return plan
