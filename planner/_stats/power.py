"""Power and seeds: how many confirmation seeds a contract needs (for `plan power`).

Pure functions. "Power" here is the chance that the improvement is detected,
P(CI low > 0), when the true improvement is `effect`: the one-sided test at
alpha / 2 that "accept" relies on. "accept" also asks the *estimated* effect
to reach min_effect, so at a true effect of exactly min_effect it happens at
most about half the time; `accept_probability` gives that figure. Under
acceptance.rule margin, accept is CI low >= min_effect, the detection of
effect - min_effect: `rule="margin"` with `min_effect` gives its figures, and
`seeds_for_power` needs the true effect to plan for (above min_effect).
Every input is checked: a bad one is a ValueError with one sentence.

    detection_power(n, effect, sd, alpha, test)               -> P(CI low > 0)
    seeds_for_power(sd, min_effect, alpha, power, test, ...)  -> seeds per arm
    detectable_effect(sd, n, alpha, power, test, ...)         -> true effect detected with `power`
    accept_probability(n, effect, sd, alpha, min_effect, test) -> P(accept)
    pilot_sd(values_by_arm), pilot_sd_of_differences(base, arm) -> sd to plan with
    simulate(test, n, effect, ...)                            -> the same rates by simulation

sd: seed-to-seed standard deviation of the metric within an arm (welch,
bootstrap), or of the per-seed differences arm - baseline (paired).
Across arms (n_arms > 1, correction holm or bonferroni) the plan uses
alpha / n_arms: Holm's first step is Bonferroni's, so each arm's power under
Holm is at least this figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import special  # stats, optimize: imported where used (plan audit)

from planner._stats.decide import (
    RANDOM_PERMUTATIONS,
    Rule,
    _paired_t,
    _permutation,
    _welch_t,
    attainable_alpha,
    check_alpha,
    check_correction,
    check_min_effect,
    check_rule,
    check_test,
    flat_rows,
    permutation_splits,
    verdict,
)


def check_plan(
    *,
    alpha: float | None = None,
    test: str | None = None,
    n_arms: int = 1,
    correction: str = "holm",
    sd: float | None = None,
    rule: str = "estimate",
) -> None:
    """The inputs every plan shares, each refused with one sentence (ValueError)."""
    if alpha is not None:
        check_alpha(alpha)
    if test is not None:
        check_test(test)
    check_correction(correction)
    check_rule(rule)
    if isinstance(n_arms, bool) or not isinstance(n_arms, int) or n_arms < 1:
        raise ValueError(
            f"n_arms must be a whole number >= 1 (the treatment arms, the baseline not counted), "
            f"got {n_arms!r}"
        )
    if sd is not None and (
        isinstance(sd, bool)
        or not isinstance(sd, int | float)
        or not math.isfinite(sd)
        or not sd > 0
    ):
        raise ValueError(
            f"sd must be a finite number > 0 (the seed-to-seed standard deviation), got {sd!r}"
        )


def check_number(value: float, what: str) -> None:
    """A finite number (an effect may be negative: the arm worse)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")


def check_seeds(n: int, what: str = "n") -> None:
    """Seeds per arm: a whole number >= 2 (a spread needs two values)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(
            f"{what} must be a whole number of seeds per arm >= 2 (a spread needs two values), "
            f"got {n!r}"
        )


def check_power(power: float) -> None:
    if isinstance(power, bool) or not isinstance(power, int | float) or not 0 < power < 1:
        raise ValueError(f"power must be a number in (0, 1), got {power!r}")


def comparison_alpha(alpha: float, n_arms: int = 1, correction: str = "holm") -> float:
    """The per-arm two-sided level a plan uses."""
    check_plan(alpha=alpha, n_arms=n_arms, correction=correction)
    return alpha if correction == "none" else alpha / n_arms


def margin_effect(effect: float, min_effect: float | None, rule: str) -> float:
    """The effect whose detection (CI low > 0) is an accept under `rule`: margin accepts when CI
    low reaches min_effect, which is detecting effect - min_effect; estimate: the effect itself."""
    check_rule(rule)
    if rule == "estimate":
        return effect
    if min_effect is None:
        raise ValueError(
            "the margin rule accepts when the CI's lower end reaches min_effect: give min_effect"
        )
    check_min_effect(min_effect)
    return effect - min_effect


def _shape(n: int, sd: float, test: str) -> tuple[float, float]:
    """(degrees of freedom of the statistic, standard error of the effect) with n seeds per arm."""
    check_test(test)
    if test == "paired":
        return n - 1.0, sd / math.sqrt(n)
    return 2 * n - 2.0, sd * math.sqrt(2 / n)


def _critical_df(n: int, test: str) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the df the CI's t quantile uses.

    paired: n - 1. welch: at equal n and sd the Welch statistic equals the
    pooled t (2n - 2 df), but its df is (n - 1) / (r^2 + (1 - r)^2) with
    r = s1^2 / (s1^2 + s2^2) ~ Beta((n-1)/2, (n-1)/2), independent of the
    statistic; Gauss-Jacobi nodes integrate over r, so the power is exact
    under normal errors rather than the pooled-t approximation.
    """
    if test == "paired":
        return np.array([n - 1.0]), np.array([1.0])
    a = (n - 1) / 2
    y, w = special.roots_jacobi(48, a - 1, a - 1)
    r = (1 + y) / 2
    return (n - 1) / (r**2 + (1 - r) ** 2), w / w.sum()


def _level(n: int, alpha: float, test: str) -> float:
    """The two-sided level the test really has with n seeds per arm."""
    return attainable_alpha(n, n, alpha) if test == "bootstrap" else alpha


def detection_power(
    n: int,
    effect: float,
    sd: float,
    alpha: float,
    test: str = "welch",
    *,
    n_arms: int = 1,
    correction: str = "holm",
    rule: str = "estimate",
    min_effect: float | None = None,
) -> float:
    """P(CI low > 0) with n seeds per arm when the true improvement is `effect`; under rule
    margin, P(CI low >= min_effect), which is its accept.

    Normal errors, equal sd in both arms. welch: noncentral t, integrated over
    the law of Welch's df (see `_critical_df`). paired: noncentral t with
    n - 1 df on the differences. bootstrap: the Welch figure at the level the
    permutation test can attain with n + n seeds (`attainable_alpha`; 0 when
    it cannot reach the level at all); the permutation test has no closed
    form, `simulate` measures it, and this figure is 0-3 points below.
    Margin: CI low >= min_effect is CI low > 0 for the effect - min_effect.
    Fewer than 2 seeds detect nothing (0).
    """
    check_plan(alpha=alpha, test=test, n_arms=n_arms, correction=correction, sd=sd, rule=rule)
    check_number(effect, "effect")
    effect = margin_effect(effect, min_effect, rule)
    if n < 2:
        return 0.0
    level = _level(n, comparison_alpha(alpha, n_arms, correction), test)
    if level == 0:
        return 0.0
    df, se = _shape(n, sd, test)
    critical_df, weights = _critical_df(n, test)
    critical = special.stdtrit(critical_df, 1 - level / 2)  # the t quantile (scipy.stats' t.ppf)
    sf = 1 - special.nctdtr(
        df, effect / se, critical
    )  # the noncentral t's sf, as scipy.stats' nct.sf ...
    if not np.all(
        np.isfinite(sf)
    ):  # ... except far in its tails, where nctdtr gives NaN and nct.sf does not
        from scipy import stats

        sf = stats.nct.sf(critical, df, effect / se)
    return float(weights @ sf)


def seeds_for_power(
    sd: float,
    min_effect: float,
    alpha: float,
    power: float = 0.8,
    test: str = "welch",
    *,
    n_arms: int = 1,
    correction: str = "holm",
    rule: str = "estimate",
    effect: float | None = None,
    max_seeds: int = 100_000,
) -> int:
    """The fewest seeds per arm with detection_power(n, effect, ...) >= power.

    estimate rule: power = P(CI low > 0) at a true effect of `effect` (default min_effect).
    margin rule: power = P(accept) = P(CI low >= min_effect) at a true effect of `effect`,
    which must be given and above min_effect (at min_effect itself accept happens alpha / 2 of
    the time, whatever the seeds).
    """
    check_plan(alpha=alpha, test=test, n_arms=n_arms, correction=correction, sd=sd, rule=rule)
    check_min_effect(min_effect)
    check_power(power)
    if effect is None and rule == "margin":
        raise ValueError(
            "under the margin rule accept needs the CI's lower end to reach min_effect, which at a "
            "true effect of min_effect happens alpha / 2 of the time whatever the seeds: give the "
            "true effect to plan for (effect, above min_effect)"
        )
    effect = min_effect if effect is None else effect
    check_number(effect, "effect")
    if rule == "margin" and not effect > min_effect:
        raise ValueError(
            f"under the margin rule the true effect to plan for must be above min_effect "
            f"{min_effect:g}, got {effect:g}"
        )
    if not effect > 0:
        raise ValueError(f"the true effect to plan for must be > 0, got {effect:g}")

    def enough(n: int) -> bool:
        return (
            detection_power(
                n,
                effect,
                sd,
                alpha,
                test,
                n_arms=n_arms,
                correction=correction,
                rule=rule,
                min_effect=min_effect,
            )
            >= power
        )

    high = 2
    while not enough(high):
        if high >= max_seeds:
            raise ValueError(f"more than {max_seeds} seeds per arm would be needed")
        high = min(2 * high, max_seeds)
    low = max(2, high // 2)  # enough(high); find the first n that is enough (power grows with n)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return high


def detectable_effect(
    sd: float,
    n: int,
    alpha: float,
    power: float = 0.8,
    test: str = "welch",
    *,
    n_arms: int = 1,
    correction: str = "holm",
    rule: str = "estimate",
    min_effect: float | None = None,
) -> float:
    """The true improvement detected (CI low > 0) with probability `power` at n seeds per arm;
    under rule margin, accepted (CI low >= min_effect): min_effect more.

    inf when the bootstrap test cannot reach the level with n seeds.
    """
    from scipy import optimize

    check_plan(alpha=alpha, test=test, n_arms=n_arms, correction=correction, sd=sd, rule=rule)
    check_power(power)
    shift = -margin_effect(0.0, min_effect, rule)
    if n < 2 or _level(n, comparison_alpha(alpha, n_arms, correction), test) == 0:
        return math.inf
    se = _shape(n, sd, test)[1]
    return shift + float(
        optimize.brentq(
            lambda e: (
                detection_power(n, e, sd, alpha, test, n_arms=n_arms, correction=correction) - power
            ),
            0.0,
            100 * se,
        )
    )


def accept_probability(
    n: int,
    effect: float,
    sd: float,
    alpha: float,
    min_effect: float,
    test: str = "welch",
    *,
    rule: str = "estimate",
) -> float:
    """P(accept) at the two-sided level `alpha`, normal errors.

    estimate rule: P(CI low > 0 and estimated effect >= min_effect). The
    estimate D ~ N(effect, se^2) is independent of the sd estimate; this
    integrates P(D >= max(min_effect, t_crit * se_hat)) over the chi-square law
    of se_hat. Welch and bootstrap use the pooled-t approximation as `detection_power` does.
    margin rule: P(CI low >= min_effect), `detection_power` of effect - min_effect.
    """
    from scipy import stats

    check_plan(alpha=alpha, test=test, sd=sd, rule=rule)
    check_number(effect, "effect")
    check_min_effect(min_effect)
    if rule == "margin":
        return detection_power(
            n, effect, sd, alpha, test, correction="none", rule=rule, min_effect=min_effect
        )
    level = _level(n, alpha, test)
    if n < 2 or level == 0:
        return 0.0
    df, se = _shape(n, sd, test)
    critical_df, weights = _critical_df(n, test)
    t_crit = stats.t.ppf(1 - level / 2, critical_df)[:, None]
    # u = sqrt(chi-square(df)), se_hat = se * u / sqrt(df). Below `knot` the
    # threshold is min_effect (closed form); above it, Gauss-Legendre in u.
    u_max = math.sqrt(stats.chi2.isf(1e-14, df))
    knot = np.minimum(u_max, math.sqrt(df) * min_effect / (t_crit * se))
    below = stats.norm.sf((min_effect - effect) / se) * stats.chi2.cdf(knot**2, df)
    nodes, node_weights = np.polynomial.legendre.leggauss(96)
    u = knot + (u_max - knot) * (nodes + 1) / 2
    density = stats.chi2.pdf(u**2, df) * 2 * u
    tail = stats.norm.sf((t_crit * u / math.sqrt(df) * se - effect) / se)
    above = (density * tail) @ node_weights * (u_max - knot[:, 0]) / 2
    return float(min(1.0, weights @ (below[:, 0] + above)))


def pilot_sd(values_by_arm: Mapping[str, Sequence[float]]) -> float:
    """Pooled seed-to-seed sd: sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)) over arms.

    Non-finite values are ignored; arms with fewer than 2 values add nothing.
    """
    squares, dof = 0.0, 0
    for values in values_by_arm.values():
        v = np.asarray(values, dtype=float)
        v = v[np.isfinite(v)]
        if len(v) >= 2:
            squares += float(((v - v.mean()) ** 2).sum())
            dof += len(v) - 1
    if dof == 0:
        raise ValueError("a pilot sd needs an arm with at least 2 finite values")
    return math.sqrt(squares / dof)


def pilot_sd_of_differences(
    baseline_by_seed: Mapping[int, float], arm_by_seed: Mapping[int, float]
) -> float:
    """The sd of per-seed differences arm - baseline: what the paired test's power needs."""
    diffs = [arm_by_seed[s] - baseline_by_seed[s] for s in baseline_by_seed if s in arm_by_seed]
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        raise ValueError("a pilot sd of differences needs at least 2 seeds both arms have")
    return float(d.std(ddof=1))


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class SimulatedRates:
    """Fractions of simulated experiments; `sims` of them."""

    sims: int
    accept: float
    detected: float  # CI low > 0
    reject: float


def draw(distribution: str, size, rng: np.random.Generator) -> np.ndarray:
    """Seed-to-seed noise with mean 0 and sd 1: 'normal', 'lognormal' (sigma 1, skew 6.2)
    or 'exponential' (skew 2)."""
    if distribution == "normal":
        return rng.standard_normal(size)
    if distribution == "lognormal":
        mean, var = math.exp(0.5), (math.e - 1) * math.e
        return (rng.lognormal(0.0, 1.0, size) - mean) / math.sqrt(var)
    if distribution == "exponential":
        return rng.exponential(1.0, size) - 1.0
    raise ValueError(f"unknown distribution {distribution!r}")


def quantize(values: np.ndarray, grid: float | None, level: float = 0.0) -> np.ndarray:
    """`level + values` rounded to multiples of `grid` (a coarse metric: accuracy on 100 examples
    is grid 0.01); no grid: the values as they are. The rounding is done as a metric is: to the
    nearest k * grid, in floats."""
    if grid is None:
        return values
    return np.round((level + values) / grid) * grid


def simulate(
    test: str,
    n: int,
    effect: float,
    *,
    alpha: float,
    min_effect: float,
    sd: float = 1.0,
    sims: int = 20_000,
    distribution: str = "normal",
    correlation: float = 0.0,
    rng_seed: int = 0,
    chunk: int = 500,
    permutations: int = RANDOM_PERMUTATIONS,
    arm_sd_ratio: float = 1.0,
    grid: float | None = None,
    level: float = 0.9,
    rule: str = "estimate",
    diverged: float = 0.0,
    diverged_value: float = 0.0,
    offset: float = 0.0,
) -> SimulatedRates:
    """Run `sims` experiments of n seeds per arm through the deciding code.

    The arm's values are the baseline's noise distribution shifted by `effect`
    (the improvement; mode max). `correlation` is the share of the variance a
    seed gives both arms alike, which the paired test removes: the sd of the
    differences is sd * sqrt(2 * (1 - correlation)). `permutations`: random
    splits the bootstrap test draws when it cannot list them all (fewer make
    the simulation cheaper and stay valid). `arm_sd_ratio` scales the arm's
    noise: a null where the arm changes the spread but not the mean. `grid`:
    the metric is quantized around `level` (see `quantize`), which makes ties
    and zero spreads common. `diverged`: the chance that a seed diverges (in
    either arm alike), its value then `diverged_value` (around `level` + noise
    otherwise), as `decide` counts failures.diverged_value. `offset` is added
    to every value (a metric far from 0). `rule`: the acceptance rule.
    """
    check_rule(rule)
    known_rule = cast(Rule, rule)  # check_rule refused any other word
    rng = np.random.default_rng(rng_seed)
    splits = permutation_splits(n, n, rng_seed, permutations) if test == "bootstrap" else None
    counts = np.zeros(3)
    for start in range(0, sims, chunk):
        rows = min(chunk, sims - start)
        shared = math.sqrt(correlation) * draw(distribution, (rows, n), rng)
        own = math.sqrt(1 - correlation)
        base = sd * (shared + own * draw(distribution, (rows, n), rng))
        arm = effect + sd * arm_sd_ratio * (shared + own * draw(distribution, (rows, n), rng))
        base, arm = quantize(base, grid, level), quantize(arm, grid, level)
        exact = None  # the rows with a diverged seed: the paired test decides them exactly
        if diverged:  # around `level` (quantize has put them there already)
            centre = level if grid is None else 0.0
            base_diverged = rng.random(base.shape) < diverged
            arm_diverged = rng.random(arm.shape) < diverged
            base = np.where(base_diverged, diverged_value, centre + base)
            arm = np.where(arm_diverged, diverged_value, centre + arm)
            exact = (base_diverged | arm_diverged).any(axis=-1)
        base, arm = base + offset, arm + offset
        if test == "welch":
            est, low, high, _ = _welch_t(base, arm, alpha)
        elif test == "paired":
            est, low, high, _ = _paired_t(base, arm, alpha, exact=exact)
        else:
            assert splits is not None  # drawn above for the bootstrap test
            est, low, high, _ = _permutation(base, arm, alpha, splits)
        v = verdict(est, low, high, min_effect, known_rule, flat=flat_rows(base, arm))
        counts += [(v == "accept").sum(), (low > 0).sum(), (v == "reject").sum()]
    accept, detected, reject = counts / sims
    return SimulatedRates(sims, accept, detected, reject)
