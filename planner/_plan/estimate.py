"""`plan estimate`: what a contract will cost before it runs.

Pure functions of values; the CLI prints the estimate.

    asha_milestones(grace, reduction_factor, max_t)    -> steps where ASHA judges a trial
    asha_expected_steps(n, max_t, grace, rf)           -> AshaSteps: expected, synchronous, full
    median_rule_range(n, max_t, grace)                 -> (low, high) steps: data-dependent
    estimate(contract, timing=None, slots=1)           -> dict: trials, steps, savings, wall time

ASHA (Li et al. 2020, "A System for Massively Parallel Hyperparameter
Tuning"): rungs at grace * rf^k below max_t (Ray Tune's `ASHAScheduler`, one
bracket, as `planner._dispatch.tune` builds it; one scheduler per arm and tuning
seed). The paper's bracket arithmetic for synchronous successive halving:
n / rf^k of n trials reach rung k, so the steps are
n r_0 + sum_k n / rf^(k+1) (r_(k+1) - r_k) + ... up to max_t.
Asynchronous ASHA promotes more than that: the i-th trial to reach a rung is
compared only with the i - 1 that reached it before (Ray stops it when its
value is below the (1 - 1/rf) percentile of those, linearly interpolated),
so the first always goes on, the second half the time, and only late
arrivals face the 1/rf cut. The survivors of a rung are not a random sample
of the next rung's arrivals either (a trial that got through late beat more
rivals), so there is no closed form: `asha_expected_steps` runs the rule
itself on ASHA_SIMULATIONS simulated sweeps (fixed seed, so the figure is
deterministic), with each trial keeping its rank at every rung and trials
reaching each rung in the order they started. A sampler that improves as it
learns (TPE after its random start-up trials) makes later trials better,
so a little more goes on than this figure says.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner._contract.rules import planned_trials
from planner._stats.looks import look_batches

MEDIAN_MIN_SAMPLES = 3  # Ray's MedianStoppingRule: min_samples_required (its default)


def asha_milestones(grace: int, reduction_factor: float, max_t: int) -> list[int]:
    """The steps at which ASHA judges a trial, below max_t (a rung at max_t judges a finished
    trial)."""
    if grace < 1 or reduction_factor <= 1 or max_t < 1:
        raise ValueError("need grace >= 1, reduction_factor > 1 and max_t >= 1")
    rungs = int(
        np.log(max_t / grace) / np.log(reduction_factor) + 1
    )  # as Ray's _Bracket counts them
    steps = sorted({math.ceil(grace * reduction_factor**k) for k in range(max(rungs, 0))})
    return [s for s in steps if s < max_t]


ASHA_SIMULATIONS = 4000  # rule runs behind the ASHA figure (fixed seed; fewer for large sweeps)
ASHA_SEED = 20261129


def _asha_reaching(
    trials: int, milestones: list[int], reduction_factor: float
) -> tuple[np.ndarray, float]:
    """Expected trials reaching each milestone (and the end), and the standard error of the
    expected steps' driver.

    Each simulated sweep draws one value per trial (its rank is the same at every
    rung, as a learning curve that keeps its order) and lets the trials reach
    each rung in the order they started; a trial goes on unless its value is
    below the (1 - 1/rf) percentile, linearly interpolated, of the values the
    rung recorded before it (Ray's `_Bracket.on_result`), so the first always
    goes on.
    """
    reps = max(200, min(ASHA_SIMULATIONS, 4_000_000 // max(1, trials * trials)))
    rng = np.random.default_rng(ASHA_SEED)
    values = rng.random((reps, trials))
    alive = np.ones((reps, trials), dtype=bool)
    reaching = [np.full(reps, float(trials))]
    q = 100 * (1 - 1 / reduction_factor)
    for _ in milestones:
        recorded = np.full((reps, trials), np.nan)
        went_on = np.zeros((reps, trials), dtype=bool)
        for i in range(trials):
            arrived = alive[:, i]
            if i == 0:
                cutoff = np.full(reps, -np.inf)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter(
                        "ignore", RuntimeWarning
                    )  # a row with nothing recorded yet
                    cutoff = np.nanpercentile(recorded[:, :i], q, axis=1)
                cutoff = np.where(np.isnan(cutoff), -np.inf, cutoff)
            went_on[:, i] = arrived & (values[:, i] >= cutoff)
            recorded[arrived, i] = values[arrived, i]
        alive = went_on
        reaching.append(alive.sum(axis=1).astype(float))
    return np.array(reaching), reps


@dataclass(frozen=True)
class AshaSteps:
    trials: int
    max_t: int
    milestones: tuple[int, ...]
    expected: float  # asynchronous ASHA, values in random order
    synchronous: float  # the paper's successive-halving arithmetic: floor(n / rf^k) reach rung k
    full: int  # no early stopping: trials * max_t
    expected_reaching: tuple[float, ...]  # expected trials that reach each milestone, then max_t
    spread: float = (
        0.0  # sd of one sweep's steps around `expected` (what a real sweep may differ by)
    )

    @property
    def saving(self) -> float:
        return 1 - self.expected / self.full if self.full else 0.0


def asha_expected_steps(trials: int, max_t: int, grace: int, reduction_factor: float) -> AshaSteps:
    """Expected steps of exposure `trials` trials use under ASHA (one scheduler, as one sweep
    has)."""
    milestones = asha_milestones(grace, reduction_factor, max_t)
    stops = [*milestones, max_t]
    per_sweep, reps = _asha_reaching(trials, milestones, reduction_factor)
    widths = np.diff([0, *stops])
    steps = widths @ per_sweep  # steps of each simulated sweep
    reaching = per_sweep.mean(axis=1)
    expected = float(steps.mean())
    sync_reaching = [trials] + [
        max(1, math.floor(trials / reduction_factor ** (k + 1))) if trials else 0
        for k in range(len(milestones))
    ]
    synchronous = sum(
        n * (stop - before)
        for n, stop, before in zip(sync_reaching, stops, [0, *stops[:-1]], strict=True)
    )
    return AshaSteps(
        trials,
        max_t,
        tuple(milestones),
        expected,
        float(synchronous),
        trials * max_t,
        tuple(map(float, reaching)),
        float(steps.std(ddof=1)) if reps > 1 else 0.0,
    )


def median_rule_range(trials: int, max_t: int, grace: int) -> tuple[int, int]:
    """(fewest, most) steps under Ray's median stopping rule: the figure depends on the data.

    Most: no trial is stopped. Fewest: the first trials (the rule needs
    MEDIAN_MIN_SAMPLES others to compare with) run in full, every other one
    stops at `grace` (trials running side by side can leave more in full).
    """
    full = min(trials, MEDIAN_MIN_SAMPLES)
    return full * max_t + (trials - full) * min(grace, max_t), trials * max_t


# --------------------------------------------------------------------------- the whole contract


def estimate(
    contract, timing=None, slots: int = 1, confirm_trials_expected: float | None = None
) -> dict[str, Any]:
    """Planned trials and steps per phase, the early-stopping saving and (with `timing`) a
    wall-time forecast.

    contract: a `planner._contract.model.Contract`. timing: a `planner._plan.pilot.PilotTiming`
    (or anything with time_per_step_s, overhead_s, startup_s). slots: trials
    that run at once. confirm_trials_expected: with sequential looks, the
    expected confirmation trials (else the planned number is used).
    """
    if slots < 1:
        raise ValueError("slots must be at least 1")

    exposure = contract.budget.exposure
    arms = len(contract.all_arms)
    planned = planned_trials(contract)
    phases = []
    tuning = contract.tuning
    if tuning is not None:
        sweeps = arms * len(tuning.seeds)
        n = tuning.trials_per_arm
        rule = tuning.early_stop.rule
        full = planned["tune"] * exposure
        tune = {
            "phase": "tune",
            "trials": planned["tune"],
            "sweeps": sweeps,
            "trials_per_sweep": n,
            "steps_planned": full,
            "early_stop": rule,
        }
        if rule == "asha":
            asha = asha_expected_steps(
                n, exposure, tuning.early_stop.grace, tuning.early_stop.reduction_factor
            )
            tune.update(
                steps_expected=sweeps * asha.expected,
                steps_synchronous=sweeps * asha.synchronous,
                milestones=list(asha.milestones),
                reaching_per_sweep=[round(r, 3) for r in asha.expected_reaching],
                saving=asha.saving,
                note=f"ASHA rungs at "
                f"{', '.join(map(str, asha.milestones)) or 'none below the exposure'} "
                f"(grace {tuning.early_stop.grace}, reduction_factor "
                f"{tuning.early_stop.reduction_factor:g})",
            )
        elif rule == "median":
            low, high = median_rule_range(n, exposure, tuning.early_stop.grace)
            tune.update(
                steps_expected=None,
                steps_range=[sweeps * low, sweeps * high],
                saving=None,
                saving_range=[0.0, 1 - low / (n * exposure)],
                note="the median rule's saving depends on the data: it stops a trial whose best "
                "value is "
                "below the median of the others' running means",
            )
        else:
            tune.update(
                steps_expected=full,
                saving=0.0,
                note="no early stopping: every trial runs the full exposure",
            )
        phases.append(tune)
    planned_confirm = planned["confirm"]
    looks = contract.confirmation.looks
    confirm = {
        "phase": "confirm",
        "trials": planned_confirm,
        "steps_planned": planned_confirm * exposure,
        "steps_expected": (
            confirm_trials_expected if confirm_trials_expected is not None else planned_confirm
        )
        * exposure,
        "looks": looks,
        "saving": 0.0
        if confirm_trials_expected is None
        else 1 - confirm_trials_expected / planned_confirm,
        "note": "every seed of every arm runs the full exposure, no early stopping"
        if looks == 1
        else f"sequential: {looks} looks; at most {planned_confirm} trials, fewer when an arm's "
        f"answer is clear early",
    }
    phases.append(confirm)
    out: dict[str, Any] = {
        "name": contract.name,
        "unit": contract.budget.unit,
        "exposure": exposure,
        "slots": slots,
        "phases": phases,
        "trials_planned": planned["total"],
        "steps_planned": sum(p["steps_planned"] for p in phases),
    }
    if timing is not None:
        out["timing"] = timing.as_dict()
        total = timing.startup_s or 0.0
        for p in phases:
            p["wall_s"] = timing.cold_start_s + _phase_wall(p, timing, slots, exposure, contract)
            total += p["wall_s"]
        out["wall_s"] = total
        out["max_wall_time_s"] = contract.budget.max_wall_time_s
    return out


def _phase_wall(phase: dict[str, Any], timing, slots: int, exposure: int, contract) -> float:
    one_trial = exposure * timing.time_per_step_s + timing.overhead_s
    if phase["phase"] == "tune":
        steps = phase["steps_expected"]
        if steps is None:  # median rule: plan with the most
            steps = phase["steps_range"][1]
        work = steps * timing.time_per_step_s + phase["trials"] * timing.overhead_s
        return max(work / min(slots, phase["trials"]), one_trial)
    # confirmation: equal trials in waves of `slots`; each look waits for its batch

    arms = len(contract.all_arms)
    waves = sum(
        math.ceil(arms * len(batch) / slots)
        for batch in look_batches(list(contract.seeds), phase["looks"])
    )
    if phase["steps_expected"] < phase["steps_planned"]:
        waves *= phase["steps_expected"] / phase["steps_planned"]
    return waves * one_trial


def default_slots(contract) -> int:
    """Trials this machine runs at once: its CPUs / cpu per trial (GPUs too when a trial asks for
    one)."""
    resources = contract.budget.resources
    cpus = os.cpu_count() or 1
    slots = int(cpus // resources.cpu) if resources.cpu > 0 else cpus
    return max(1, slots)
