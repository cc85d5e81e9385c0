"""Sequential confirmation inside `plan run`: the confirmation seeds run in looks.

With `confirmation: {looks: K > 1, spending, futility}` the confirmation seeds
run in K planned batches (`planner._stats.looks.look_batches`, the sizes of
`planner._stats.sequential.look_sizes`). After each batch, every arm still running
is asked `planner._stats.sequential.sequential_decision`: continue, accept,
inconclusive, stop_futility, or (last look) reject. An arm that stopped gets
no more seeds; the baseline runs a batch while any arm needs it.

Several arms: each comparison is monitored at alpha / m (Bonferroni; Holm's
step-down does not carry over to repeated looks), with m the number of
treatment arms, unless `correction: none`.

Everything here is a function of the trial records, so a resumed run finds
the same looks again:

    SequentialConfirmation(contract).evaluate(records) -> LookState
        the steps so far per arm, which arms stopped, which are incomplete,
        and which (arm, seed) trials the next batch needs.
    LookState.decisions(...) -> rows for decisions.json, each with `looks`.
    confirm_in_looks(runner, configs) -> LooksResult: the driver's confirmation phase;
        `runner` is anything with the `LooksRunner` protocol (the driver's Runner).

Trials an arm no longer needs are "not needed": never run, logged in one
`trials_skipped` event with `by_design: true`; they make no arm incomplete
and the run `completed` (docs/planning.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from planner._core.lazy import lazy_import
from planner._core.records import final_value
from planner._core.status import StopReason, TrialStatus
from planner._dispatch.hooks import Outcome as PhaseOutcome
from planner._plan.trials import Plan, confirm_trial_id
from planner._stats.decide import Decision, Outcome, collect
from planner._stats.looks import look_batches
from planner._trial.spec import TrialSpec

# SciPy, slow to import, only for a sequential confirmation: a run without looks imports it at its
# decision, while its confirmation runs (Runner.confirm), not before Ray starts
_sequential = lazy_import("planner._stats.sequential")


def comparison_alpha(contract) -> float:
    """The two-sided level each arm's looks use: alpha / m across m arms (Bonferroni), alpha with
    one arm."""
    a = contract.acceptance
    m = len(contract.arms)
    return a.alpha if a.correction == "none" or m == 1 else a.alpha / m


@dataclass
class ArmLooks:
    arm: str
    steps: list = field(default_factory=list)  # SequentialStep per look taken
    stopped: bool = False  # decided (a step other than continue) or incomplete
    problem: str | None = None  # why the arm is incomplete
    waiting: int | None = None  # the look it waits for (missing trials), while running

    def looks_json(self) -> list[dict[str, Any]]:
        return [_look_json(s) for s in self.steps]


def _number(x: float) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def _look_json(step) -> dict[str, Any]:
    """One look of decisions.json; `note` says why a bound is missing (no alpha at this look, no
    spread)."""
    out = {
        "look": step.look + 1,
        "n_baseline": step.n_baseline,
        "n_arm": step.n_arm,
        "effect": _number(step.effect),
        "ci_low": _number(step.ci_low),
        "ci_high": _number(step.ci_high),
        "statistic": _number(step.statistic),
        "boundary": _number(step.t_bound),
        "conditional_power": _number(step.conditional_power),
        "action": step.action,
    }
    if not math.isfinite(step.t_bound):
        out["note"] = _sequential.NO_STOP
    elif not math.isfinite(step.ci_low) and math.isfinite(step.effect):
        out["note"] = "degenerate spread: no seed-to-seed variation yet"
    return out


@dataclass
class LookState:
    arms: dict[str, ArmLooks]
    needed: list[tuple[str, int]]  # (arm, seed) trials the next batches need, in plan order

    @property
    def running(self) -> list[str]:
        return [a for a, s in self.arms.items() if not s.stopped]


class SequentialConfirmation:
    """The looks of one contract's confirmation (plan_design runs once, about a second)."""

    def __init__(self, contract):
        c = contract
        self.contract = c
        self.baseline = c.baseline.name
        self.alpha = comparison_alpha(c)
        self.batches = look_batches(list(c.seeds), c.confirmation.looks)
        self.design = _sequential.plan_design(
            len(c.seeds),
            c.confirmation.looks,
            self.alpha,
            c.confirmation.spending,
            c.confirmation.futility,
            test=c.acceptance.test,
        )

    def describe(self) -> dict[str, Any]:
        d = self.design
        return {
            "looks": d.looks,
            "spending": d.spending,
            "futility": d.futility,
            "look_sizes": list(d.look_sizes),
            "alpha_per_comparison": self.alpha,
            "monitored_test": d.test,
            "nominal_p": [float(p) for p in d.nominal_p],
        }

    def _outcomes(
        self, records: Mapping[str, dict], arm: str, seeds: list[int]
    ) -> list[Outcome] | None:
        """Outcomes of `arm` at `seeds`, or None when one has no record yet."""
        metric = self.contract.metric.decision_metric
        out = []
        for seed in seeds:
            r = records.get(confirm_trial_id(arm, seed))
            if r is None:
                return None
            out.append(
                Outcome(seed, final_value(r, metric), r.get("status", TrialStatus.COMPLETED))
            )
        return out

    def evaluate(self, records: Mapping[str, dict]) -> LookState:
        """Walk the looks on the records so far: each arm's steps, and the trials still needed."""
        c = self.contract
        diverged = c.failures.diverged_value
        arms = {a.name: ArmLooks(a.name) for a in c.arms}
        for arm, state in arms.items():
            for k, _ in enumerate(self.batches):
                seeds = [s for batch in self.batches[: k + 1] for s in batch]
                base_out = self._outcomes(records, self.baseline, seeds)
                arm_out = self._outcomes(records, arm, seeds)
                problems = []
                if base_out is not None:
                    _, problem = collect(base_out, seeds, diverged)
                    if problem:
                        problems.append(f"in the baseline {self.baseline}, {problem}")
                if arm_out is not None:
                    _, problem = collect(arm_out, seeds, diverged)
                    if problem:
                        problems.append(f"in {arm}, {problem}")
                if problems:
                    state.stopped, state.problem = True, "; ".join(problems)
                    break
                if base_out is None or arm_out is None:
                    state.waiting = k
                    break
                base_values, _ = collect(base_out, seeds, diverged)
                arm_values, _ = collect(arm_out, seeds, diverged)
                step = _sequential.sequential_decision(
                    k,
                    list(base_values.values()),
                    list(arm_values.values()),
                    design=self.design,
                    mode=c.metric.decision_mode,
                    min_effect=c.acceptance.min_effect,
                    baseline_seeds=list(base_values),
                    arm_seeds=list(arm_values),
                )
                state.steps.append(step)
                if step.action != "continue":
                    state.stopped = True
                    break
        needed: list[tuple[str, int]] = []
        waiting = [s for s in arms.values() if not s.stopped and s.waiting is not None]
        for state in waiting:
            assert state.waiting is not None  # `waiting` holds the arms waiting at a look
            seeds = [s for batch in self.batches[: state.waiting + 1] for s in batch]
            for arm in (self.baseline, state.arm):
                needed += [
                    (arm, s)
                    for s in seeds
                    if confirm_trial_id(arm, s) not in records and (arm, s) not in needed
                ]
        order = {
            (a.name, s): i for i, (a, s) in enumerate((a, s) for a in c.all_arms for s in c.seeds)
        }
        return LookState(arms, sorted(needed, key=order.__getitem__))

    def decisions(self, state: LookState) -> list[dict[str, Any]]:
        """decisions.json rows, one per treatment arm, each with its `looks`."""
        metric = self.contract.metric.decision_metric
        rows = []
        for arm, s in state.arms.items():
            if s.problem is not None or not s.stopped:
                if s.problem is not None:
                    reason = f"Incomplete: {s.problem}."
                else:
                    look = (s.waiting or 0) + 1
                    reason = (
                        f"Incomplete: look {look} of {self.design.looks} did not get its seeds "
                        f"(the run stopped before the batch ended)."
                    )
                last = s.steps[-1] if s.steps else None
                decision = Decision(
                    arm=arm,
                    decision="incomplete",
                    effect=math.nan,
                    ci_low=math.nan,
                    ci_high=math.nan,
                    p_value=math.nan,
                    alpha_adjusted=self.alpha,
                    n_baseline=last.n_baseline if last else 0,
                    n_arm=last.n_arm if last else 0,
                    reason=reason,
                )
            else:
                step = s.steps[-1]
                decision = step.as_decision(arm)
                decision = Decision(
                    **{**decision.__dict__, "reason": f"{step.reason} (metric {metric})"}
                )
            rows.append({**decision.as_dict(), "looks": s.looks_json()})
        return rows


# --------------------------------------------------------------------------- the runner's phase


class LooksRunner(Protocol):
    """What a confirmation in looks needs from the driver: the plan, the records so far, a way to
    run one batch (within the time the run has left), and the run folder's events for its notes."""

    contract: Any  # planner._contract.model.Contract
    plan: Plan

    @property
    def records(self) -> Mapping[str, dict]: ...

    def spec(self, trial, config: dict) -> TrialSpec: ...

    def run_batch(
        self,
        specs: list[TrialSpec],
        note: str,
        started: dict | None = None,
        ended: dict | None = None,
    ) -> PhaseOutcome | None: ...  # None: no time left to start it

    def event(self, kind: str, **fields: Any) -> None: ...


@dataclass
class LooksResult:
    """What the confirmation in looks leaves for the driver: why it stopped, the looks, the trials
    not needed."""

    stopped: StopReason | None  # None when every look that could run ran
    sequential: SequentialConfirmation  # the design the decision reads the looks with
    not_needed: set[str] = field(
        default_factory=set
    )  # planned confirmation trials no arm needs: never run


def confirm_in_looks(runner: LooksRunner, configs: dict[str, dict]) -> LooksResult:
    """The confirmation phase for looks > 1: run batch after batch until every arm has stopped.

    Nothing is set on `runner`; the driver keeps what the LooksResult says (the
    looks for the decision, the trials not needed for its progress and end).
    """
    sequential = SequentialConfirmation(runner.contract)
    planned = {(t.arm, t.seed): t for t in runner.plan.confirm}
    previous: list[tuple[str, int]] | None = None
    while True:
        state = sequential.evaluate(runner.records)
        todo = [pair for pair in state.needed if pair[0] in configs]
        if not todo or todo == previous:
            break
        previous = todo
        look = 1 + min(
            s.waiting for s in state.arms.values() if not s.stopped and s.waiting is not None
        )
        specs = [runner.spec(planned[pair], configs[pair[0]]) for pair in todo]
        outcome = runner.run_batch(
            specs,
            f"confirming, look {look} of {sequential.design.looks}: {len(todo)} trials",
            started={"look": look, "arms": state.running},
            ended={"look": look},
        )
        if outcome is None:
            return LooksResult(StopReason.BUDGET, sequential)
        for arm, s in sequential.evaluate(runner.records).arms.items():
            if s.steps and s.steps[-1].look == look - 1:
                runner.event("look", arm=arm, **_look_json(s.steps[-1]))
        if outcome.stopped:
            return LooksResult(outcome.stopped, sequential)
    state = sequential.evaluate(runner.records)
    not_needed = [
        t.trial_id
        for t in runner.plan.confirm
        if t.trial_id not in runner.records
        and t.arm in configs
        and (t.arm, t.seed) not in state.needed
    ]
    if not_needed and not state.running:
        runner.event(
            "trials_skipped",
            phase="confirm",
            trial_ids=not_needed,
            by_design=True,
            reason="not needed: the sequential confirmation stopped every arm before its last look",
        )
        return LooksResult(None, sequential, set(not_needed))
    return LooksResult(None, sequential)
