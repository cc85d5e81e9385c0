"""Group-sequential confirmation: look at the data K times, stop early when the answer is clear.

Contract option `confirmation: {looks: K, spending: obrien_fleming | pocock, futility: bool}`.
The confirmation seeds run in K planned, (nearly) equal batches; after each
batch the runner asks for a decision on the seeds so far.

Interface for the runner:

    design = plan_design(n_seeds, looks, alpha, spending, futility, test=...)
        once per run (about 1 s for welch, cached); `alpha` is the two-sided
        level of one comparison: with several arms pass alpha / m (Holm's
        step-down does not carry over to repeated looks; Bonferroni does).
        design.look_sizes[k] is how many seeds per arm look k (0-based) needs.
    step = sequential_decision(k, baseline_values, arm_values, design=design,
                               mode=..., min_effect=...)
        step.action: "continue" (run the next batch), "accept",
        "inconclusive" (stopped: the improvement is real but below
        min_effect), "stop_futility", or at the last look "reject" too;
        step.decision is the contract verdict to record when the arm stops
        ("pending" while it continues); step.reason is a sentence for users;
        step.as_decision(arm) is the Decision for decisions.json.
        An arm with a missing or failed trial is `incomplete`, as without
        looks: the runner checks completeness before calling this.

How it decides (docs/statistics.md has the figures, bench/bench_statistics.py makes them):
- Efficacy bounds: a Lan-DeMets spending function (O'Brien-Fleming-type or
  Pocock-type) spends the one-sided alpha / 2 that "accept" uses over the
  information fractions t_k = n_k / N. `boundaries` gives the z-scale bounds
  c_k, solving P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = spent(t_k)
  - spent(t_{k-1}) by recursive numerical integration (deterministic).
- Small n: the statistic is a t, not a z, and z bounds applied to it spend
  far more than alpha / 2 (0.06-0.17 with 6-10 seeds). Turning each c_k
  into a t quantile at the look's df is close but still liberal for the
  paired t. So the thresholds are calibrated by simulation under the t
  statistics themselves (`calibrated_p_thresholds`, fixed seed): each look's
  one-sided p threshold makes the null crossing fraction follow the
  spending function exactly, up to Monte-Carlo error of about 1.5 %.
- Each look draws a repeated CI, effect +- t_bound * se. The arm stops at the
  first look whose CI is above 0, and the contract's rule decides it there:
  accept when the effect reaches min_effect, else inconclusive. At the last
  look the rule applies as without looks.
- Futility (non-binding: the efficacy bounds ignore it, so it never raises
  the false-accept rate): stop when the conditional power to reach the final
  bound, if the true effect were min_effect (current sd estimate), is below
  `futility_power` (default 0.10), or when the repeated CI's upper end is
  already below min_effect (then the verdict is reject).
- The bootstrap test is monitored with Welch's t (no resampling boundaries).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
from scipy import special

from planner._core.lazy import lazy_import
from planner._stats.decide import (
    Decision,
    Verdict,
    _oriented,
    _pair,
    _paired_parts,
    _welch_parts,
    check_alpha,
    check_min_effect,
    check_test,
    degenerate_rows,
    flat_rows,
    verdict,
    welch_df,
)
from planner._stats.looks import look_sizes
from planner._stats.power import draw, quantize

optimize = lazy_import("scipy.optimize")  # a run without sequential looks never loads them (0.3 s)
stats = lazy_import("scipy.stats")

Spending = Literal["obrien_fleming", "pocock"]
Action = Literal["continue", "accept", "reject", "inconclusive", "stop_futility"]

_GRID_STEP = 0.02  # B-value grid for the recursive integration
_GRID_SPAN = 9.0  # standard deviations below 0 the grid reaches


def spent(fractions, alpha_one_sided: float, spending: Spending) -> np.ndarray:
    """Cumulative one-sided alpha spent by information fractions t (Lan & DeMets 1983)."""
    t = np.asarray(fractions, dtype=float)
    if spending == "obrien_fleming":
        return 2 * stats.norm.sf(stats.norm.isf(alpha_one_sided / 2) / np.sqrt(t))
    if spending == "pocock":
        return alpha_one_sided * np.log1p((math.e - 1) * t)
    raise ValueError(f"unknown spending {spending!r}: use obrien_fleming or pocock")


def boundaries(
    looks: int,
    alpha: float,
    spending: Spending = "obrien_fleming",
    fractions: Sequence[float] | None = None,
) -> np.ndarray:
    """z-scale efficacy bounds for the one-sided alpha / 2 of a two-sided `alpha`.

    `fractions`: information fractions of the looks (default k / looks).
    Computed by recursive integration of the Brownian-motion B-values
    B_k = Z_k sqrt(t_k), whose increments are independent N(0, t_k - t_{k-1}).
    """
    return np.array(
        _boundaries(looks, alpha, spending, None if fractions is None else tuple(fractions))
    )


@functools.lru_cache(maxsize=64)
def _boundaries(
    looks: int, alpha: float, spending: Spending, fractions: tuple[float, ...] | None
) -> tuple[float, ...]:
    """The cached body of `boundaries`."""
    t = np.arange(1, looks + 1) / looks if fractions is None else np.asarray(fractions, dtype=float)
    if len(t) != looks or np.any(np.diff(t) <= 0) or not 0 < t[0] or not math.isclose(t[-1], 1.0):
        raise ValueError("fractions must increase to 1, one per look")
    increments = np.diff(spent(t, alpha / 2, spending), prepend=0.0)
    bounds = np.empty(looks)
    bounds[0] = stats.norm.isf(increments[0])
    upper = bounds[0] * math.sqrt(t[0])
    grid = np.arange(
        -_GRID_SPAN, upper / math.sqrt(t[0]), _GRID_STEP / math.sqrt(t[0])
    ) * math.sqrt(t[0])
    grid = np.append(grid, upper)
    density = stats.norm.pdf(grid, scale=math.sqrt(t[0]))  # continuation density of B_1
    for k in range(1, looks):
        step = math.sqrt(t[k] - t[k - 1])
        weights = (
            _trapezoid_weights(grid) * density
        )  # mass of B_{k-1} at each grid point, still running
        bounds[k] = optimize.brentq(
            _excess_crossing,
            -10,
            40,
            args=(grid, weights, math.sqrt(t[k]), step, increments[k]),
            xtol=1e-10,
        )
        upper = bounds[k] * math.sqrt(t[k])
        new_grid = np.append(np.arange(-_GRID_SPAN * math.sqrt(t[k]), upper, _GRID_STEP), upper)
        density = stats.norm.pdf((new_grid[:, None] - grid[None, :]) / step) / step @ weights
        grid = new_grid
    return tuple(map(float, bounds))


def _excess_crossing(c, grid, weights, root_t, step, target):
    """P(still running before this look, B_k >= c sqrt(t_k)) - the alpha this look may spend."""
    return weights @ stats.norm.sf((c * root_t - grid) / step) - target


def _trapezoid_weights(grid: np.ndarray) -> np.ndarray:
    gaps = np.diff(grid)
    w = np.zeros_like(grid)
    w[:-1] += gaps / 2
    w[1:] += gaps / 2
    return w


@dataclass(frozen=True)
class Design:
    """A group-sequential confirmation plan for one comparison."""

    n_seeds: int
    looks: int
    alpha: float  # two-sided; "accept" uses alpha / 2 one-sided
    spending: str
    test: str  # the statistic monitored: welch (also for bootstrap) or paired
    futility: bool
    futility_power: float
    look_sizes: tuple[int, ...]
    z_bounds: tuple[float, ...]
    nominal_p: tuple[float, ...]  # one-sided p each look's t statistic must reach to accept


CALIBRATION_PATHS = 200_000
CALIBRATION_SEED = 20261129


def plan_design(
    n_seeds: int,
    looks: int,
    alpha: float,
    spending: Spending = "obrien_fleming",
    futility: bool = False,
    futility_power: float = 0.10,
    test: str = "welch",
    calibration: Literal["simulated", "t_quantile"] = "simulated",
) -> Design:
    """The looks, z bounds and the per-look p thresholds the t statistics use.

    calibration "simulated" (the default): thresholds that make the t
    statistics spend exactly the planned alpha at every look under normal
    errors (`calibrated_p_thresholds`). "t_quantile": each look's threshold is
    the z bound's own p, Phi(-c_k) (slightly liberal for paired at small n;
    kept for comparison).
    """
    _check_design(n_seeds, looks, alpha, spending, futility, futility_power, test)
    test = "paired" if test == "paired" else "welch"  # bootstrap is monitored with Welch's t
    sizes = look_sizes(n_seeds, looks)
    fractions = [s / n_seeds for s in sizes]
    z = boundaries(looks, alpha, spending, fractions)
    if calibration == "simulated":
        p = calibrated_p_thresholds(tuple(sizes), alpha, spending, test)
    elif calibration == "t_quantile":
        p = tuple(float(v) for v in stats.norm.sf(z))
    else:
        raise ValueError(f"unknown calibration {calibration!r}")
    return Design(
        n_seeds,
        looks,
        alpha,
        spending,
        test,
        futility,
        futility_power,
        tuple(sizes),
        tuple(map(float, z)),
        p,
    )


def _check_design(n_seeds, looks, alpha, spending, futility, futility_power, test) -> None:
    """Each input of `plan_design` refused with one sentence (ValueError)."""
    for value, what in ((n_seeds, "n_seeds"), (looks, "looks")):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
    check_alpha(alpha)
    if spending not in ("obrien_fleming", "pocock"):
        raise ValueError(f"unknown spending {spending!r}: use obrien_fleming or pocock")
    if not isinstance(futility, bool):
        raise ValueError(f"futility must be true or false, got {futility!r}")
    check_alpha(futility_power, "futility_power")
    check_test(test)  # never silently another test


@functools.lru_cache(maxsize=64)
def calibrated_p_thresholds(
    sizes: tuple[int, ...], alpha: float, spending: Spending, test: str
) -> tuple[float, ...]:
    """Per-look one-sided p thresholds so that the t statistics spend alpha / 2 as planned.

    Under H0 with normal errors the paired t's p-values form a pivotal
    sequence (free of the sd); so is Welch's at equal sds. CALIBRATION_PATHS
    null paths, drawn with a fixed seed from their sufficient statistics
    (batch means and within-batch sums of squares, so the cost does not grow
    with the seeds), give each look's threshold as the quantile among the
    still-running paths that makes the cumulative crossing fraction equal the
    spending function. The first look needs no simulation: its threshold is
    the spent alpha itself.
    """
    n_final = sizes[-1]
    if len(sizes) == 1:
        return (alpha / 2,)
    cumulative = spent(np.array(sizes) / n_final, alpha / 2, spending)
    rng = np.random.default_rng(CALIBRATION_SEED)
    paths = CALIBRATION_PATHS
    arms = 1 if test == "paired" else 2  # paired: the differences; welch: both arms
    count = np.zeros(arms)
    mean = np.zeros((arms, paths))
    m2 = np.zeros((arms, paths))
    running = np.ones(paths, dtype=bool)
    thresholds = []
    previous = 0
    for k, size in enumerate(sizes):
        batch = size - previous
        previous = size
        batch_mean = rng.standard_normal((arms, paths)) / math.sqrt(batch)
        within = rng.chisquare(batch - 1, (arms, paths)) if batch > 1 else np.zeros((arms, paths))
        delta = batch_mean - mean
        total = count[:, None] + batch
        m2 += within + delta**2 * count[:, None] * batch / total
        mean += delta * batch / total
        count += batch
        p = _one_sided_p(mean, m2, count, test)
        if k == 0:
            threshold = float(cumulative[0])
            cut = threshold if test != "paired" else float(special.stdtrit(size - 1, threshold))
        else:
            need = math.floor(cumulative[k] * paths) - (
                paths - int(running.sum())
            )  # to cross at this look
            candidates = p[running]
            cut = float(np.partition(candidates, need - 1)[need - 1]) if need > 0 else -np.inf
            threshold = cut if test != "paired" else float(special.stdtr(size - 1, cut))
        thresholds.append(threshold)
        running &= p > cut
    return tuple(thresholds)


def _one_sided_p(mean, m2, count, test):
    """One-sided p of 'arm better' from sufficient statistics (rows: arms; paired: one row of
    differences, for which it returns -t, which orders paths as p does)."""
    var = m2 / (count[:, None] - 1) / count[:, None]  # squared standard errors
    if test == "paired":  # one df for all paths: rank by t, the cheap monotone transform of p
        return -mean[0] / np.sqrt(var[0])
    df = welch_df(var[1], var[0], count[1], count[0])
    return special.stdtr(df, -(mean[1] - mean[0]) / np.sqrt(var[0] + var[1]))


@dataclass(frozen=True)
class SequentialStep:
    look: int
    action: Action
    decision: str  # the verdict to record if the arm stops here; "pending" while it continues
    effect: float
    ci_low: float  # repeated CI at this look: effect +- t_bound * se
    ci_high: float
    statistic: float
    t_bound: float
    conditional_power: float
    n_baseline: int
    n_arm: int
    alpha: float  # the design's two-sided level for this comparison
    reason: str

    def as_decision(self, arm: str) -> Decision:
        """The Decision to record (decisions.json) once the arm has stopped.

        p_value is NaN: a fixed-sample p-value does not apply after looks; the
        repeated CI carries the evidence.
        """
        if self.action == "continue":
            raise ValueError("the arm has not stopped: nothing to record yet")
        decision = cast(Verdict, self.decision)  # a stopped arm's is a verdict, never "pending"
        return Decision(
            arm=arm,
            decision=decision,
            effect=self.effect,
            ci_low=self.ci_low,
            ci_high=self.ci_high,
            p_value=math.nan,
            alpha_adjusted=self.alpha,
            n_baseline=self.n_baseline,
            n_arm=self.n_arm,
            reason=self.reason,
        )


def _look_statistics(base, arm, test, nominal_p):
    """Vectorized: effect, se, t statistic and t bound per row at one look.

    A row with a degenerate spread (decide's rule) gets se = NaN: its repeated CI
    is unbounded, so it never stops for efficacy or futility and is inconclusive at
    the last look. A look with no alpha to spend (nominal p 0) has an infinite bound.
    """
    effect, se, df = (_paired_parts if test == "paired" else _welch_parts)(base, arm)
    se = np.where(degenerate_rows(base, arm, test), np.nan, se)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = special.stdtrit(
            np.where(np.isfinite(df), df, 1.0), 1 - (nominal_p if nominal_p > 0 else 0.0)
        )
        statistic = effect / se
    return effect, se, statistic, bound


def no_stop_possible(nominal_p: float) -> bool:
    """A look the spending function gives no alpha: it can never stop for efficacy."""
    return not nominal_p > 0


def _conditional_power(statistic, se, fraction, final_z, min_effect, n_now, n_final):
    """P(final z >= final bound | now), if the true effect were min_effect (B-value drift)."""
    if fraction >= 1:
        return np.where(statistic >= final_z, 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        final_se = se * math.sqrt(n_now / n_final)
        drift = np.where(final_se > 0, min_effect / final_se, np.inf)
    b_now = np.clip(statistic, -1e6, 1e6) * math.sqrt(fraction)
    return stats.norm.sf((final_z - b_now - drift * (1 - fraction)) / math.sqrt(1 - fraction))


def _actions(k, design: Design, effect, se, statistic, bound, min_effect, *, flat=None):
    """Vectorized action codes: 0 continue, 1 accept, 2 reject, 3 inconclusive, 4 stop_futility.

    An arm stops at the first look whose repeated CI is above 0 (then the
    contract's rule decides: accept, or inconclusive when the effect is below
    min_effect), at a futility stop, or at the last look. A row of `flat`
    (decide's `flat_rows`: a side without spread so far) never stops for
    efficacy and is never accepted.
    """
    with np.errstate(invalid="ignore"):
        half = np.where(np.isnan(se) | np.isinf(bound), np.inf, bound * se)
    low, high = effect - half, effect + half
    flat = np.zeros(effect.shape, dtype=bool) if flat is None else flat
    verdicts = verdict(effect, low, high, min_effect, flat=flat)
    decided = np.where(verdicts == "accept", 1, np.where(verdicts == "reject", 2, 3))
    if k == design.looks - 1:
        return decided, low, high, np.full(effect.shape, np.nan)
    n_now, n_final = design.look_sizes[k], design.n_seeds
    cp = _conditional_power(
        statistic, se, n_now / n_final, design.z_bounds[-1], min_effect, n_now, n_final
    )
    cp = np.where(np.isnan(se), np.nan, cp)  # no spread: no conditional power either
    futile = design.futility & ((cp < design.futility_power) | (high < min_effect))
    return np.where((low > 0) & ~flat, decided, np.where(futile, 4, 0)), low, high, cp


_NAMES = np.array(["continue", "accept", "reject", "inconclusive", "stop_futility"])


def sequential_decision(
    look: int,
    baseline_values: Sequence[float],
    arm_values: Sequence[float],
    *,
    design: Design,
    mode: str,
    min_effect: float,
    baseline_seeds: Sequence[int] | None = None,
    arm_seeds: Sequence[int] | None = None,
) -> SequentialStep:
    """What to do after look `look` (0-based), given every value so far of both arms."""
    if not isinstance(design, Design):
        raise ValueError(
            f"design must be a Design (from looks / plan_design), got {type(design).__name__}"
        )
    if (
        isinstance(look, bool)
        or not isinstance(look, int | np.integer)
        or not 0 <= look < design.looks
    ):
        raise ValueError(f"look must be a whole number in 0..{design.looks - 1}, got {look!r}")
    check_min_effect(min_effect)
    base, arm = _oriented(baseline_values, mode), _oriented(arm_values, mode)
    if design.test == "paired":
        base, arm, _ = _pair(base, arm, baseline_seeds, arm_seeds)
    need = design.look_sizes[look]
    if min(len(base), len(arm)) < need:
        raise ValueError(f"look {look} needs {need} seeds per arm, got {len(base)} and {len(arm)}")
    p = design.nominal_p[look]
    effect, se, statistic, bound = _look_statistics(base[None], arm[None], design.test, p)
    flat = flat_rows(base[None], arm[None])
    code, low, high, cp = _actions(
        look, design, effect, se, statistic, bound, min_effect, flat=flat
    )
    action = cast(Action, str(_NAMES[code[0]]))  # _NAMES holds the Action words
    if action == "stop_futility":
        decision = str(verdict(effect[0], low[0], high[0], min_effect, flat=flat[0]))
    else:
        decision = "pending" if action == "continue" else action
    return SequentialStep(
        look=look,
        action=action,
        decision=decision,
        effect=float(effect[0]),
        ci_low=float(low[0]),
        ci_high=float(high[0]),
        statistic=float(statistic[0]),
        t_bound=float(bound[0]),
        conditional_power=float(cp[0]),
        n_baseline=len(base),
        n_arm=len(arm),
        alpha=design.alpha,
        reason=_reason(
            look,
            design,
            action,
            decision,
            float(effect[0]),
            float(low[0]),
            float(high[0]),
            float(cp[0]),
            min_effect=min_effect,
            degenerate=bool(
                np.isnan(se[0]) or (flat[0] and action in ("continue", "inconclusive"))
            ),
        ),
    )


NO_STOP = "no stop possible at this look"


def _reason(
    look, design, action, decision, effect, low, high, cp, *, min_effect, degenerate=False
) -> str:
    if degenerate:
        said = (
            f"Look {look + 1} of {design.looks}: effect {effect:+.4g}, but the seeds so far show "
            f"no spread "
            "(degenerate spread: a CI without the seed-to-seed noise of both sides is no evidence)"
        )
        if action == "continue":
            return f"{said}; run the next batch of seeds."
        return f"{said}: inconclusive; add seeds, or measure the metric more finely."
    if no_stop_possible(design.nominal_p[look]):
        said = (
            f"Look {look + 1} of {design.looks}: effect {effect:+.4g}, {NO_STOP} (the spending "
            f"function gives it no alpha)"
        )
    else:
        said = (
            f"Look {look + 1} of {design.looks}: effect {effect:+.4g}, repeated CI {low:.4g} "
            f"to {high:.4g}"
        )
    if action == "continue":
        return f"{said}; not yet decisive, run the next batch of seeds."
    early = look < design.looks - 1
    if action == "accept":
        return (
            f"{said}: above 0 and the effect reaches {min_effect:g}, "
            f"accepted{' early' if early else ''}."
        )
    if action == "inconclusive" and early:
        return (
            f"{said}: above 0 but the effect is below {min_effect:g}; stopped, the improvement "
            f"is real but may not matter."
        )
    if action == "stop_futility":
        if decision == "reject":
            return f"{said}: the CI's upper end is below {min_effect:g}, stopped and rejected."
        return (
            f"{said}: even at a true effect of {min_effect:g} the chance to accept is "
            f"{cp:.2f}, stopped for futility."
        )
    return f"{said}: {decision}."


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class SimulatedDesign:
    sims: int
    accept: float  # P(accept at some look)
    detected: float  # P(repeated CI low > 0 at the look where the arm stopped)
    reject: float
    stopped_early: float
    expected_seeds: float  # per arm
    max_seeds: int


def simulate_design(
    design: Design,
    effect: float,
    *,
    min_effect: float,
    sd: float = 1.0,
    sims: int = 20_000,
    distribution: str = "normal",
    correlation: float = 0.0,
    rng_seed: int = 0,
    z_only: bool = False,
    grid: float | None = None,
    level: float = 0.9,
) -> SimulatedDesign:
    """Run `sims` sequential confirmations through the same vectorized code.

    grid, level: a quantized metric (planner._stats.power.quantize).
    z_only: compare the t statistic with the z bounds themselves (the design
    without the small-n t correction), to show what the correction buys.
    """
    rng = np.random.default_rng(rng_seed)
    n = design.n_seeds
    shared = math.sqrt(correlation) * draw(distribution, (sims, n), rng)
    own = math.sqrt(1 - correlation)
    base = sd * (shared + own * draw(distribution, (sims, n), rng))
    arm = effect + sd * (shared + own * draw(distribution, (sims, n), rng))
    base, arm = quantize(base, grid, level), quantize(arm, grid, level)
    code = np.zeros(sims, dtype=int)
    detected = np.zeros(sims, dtype=bool)
    seeds = np.full(sims, n)
    for k, size in enumerate(design.look_sizes):
        open_ = code == 0
        if not open_.any():
            break
        e, se, stat, bound = _look_statistics(
            base[open_, :size], arm[open_, :size], design.test, design.nominal_p[k]
        )
        if z_only:
            bound = np.full(e.shape, design.z_bounds[k])
        codes, low, _, _ = _actions(
            k,
            design,
            e,
            se,
            stat,
            bound,
            min_effect,
            flat=flat_rows(base[open_, :size], arm[open_, :size]),
        )
        rows = np.flatnonzero(open_)
        code[rows] = codes
        detected[rows] = low > 0
        seeds[rows[codes != 0]] = size
    return SimulatedDesign(
        sims=sims,
        accept=float((code == 1).mean()),
        detected=float(detected.mean()),
        reject=float((code == 2).mean()),
        stopped_early=float((seeds < n).mean()),
        expected_seeds=float(seeds.mean()),
        max_seeds=n,
    )
