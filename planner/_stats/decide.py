"""The decision rule: one arm against the baseline, then every arm under a correction.

Pure functions of values (no Ray, no printing); docs/statistics.md explains the
statistics and the figures that back them.

    compare(baseline, arm, mode=..., test=..., alpha=...) -> Comparison
        the effect (improvement in the direction of `mode`), a two-sided
        (1 - alpha) CI and a p-value for one arm against the baseline.
    decide(acceptance, mode, results_by_arm, baseline, planned_seeds=...) -> list[Decision]
        the contract's rule for every arm: accept | reject | inconclusive | incomplete.

Tests:
    welch      Welch t, Welch-Satterthwaite df. p: two-sided, H0 effect = 0.
    paired     one-sample t on the per-seed differences (seeds both arms have;
               the others are dropped and counted). p: two-sided, H0 effect = 0.
               Two cases the t cannot read are decided exactly: every seed the
               same difference (an exact shift) by the sign rule over seeds
               (`sign_rule`: n seeds agreeing by chance with p = 0.5 ** n one-sided);
               a diverged seed in either arm (compare's `diverged`) by the
               sign-flip test, exact whatever the distribution, as a difference
               at a diverged seed is a jump of the metric's whole range the t
               misreads (docs/statistics.md).
    bootstrap  a resampling test calibrated at small n: the permutation
               (randomization) distribution of the difference of means, inverted
               into a CI for the shift. p: two-sided permutation p-value,
               2 * min(one-sided p's), capped at 1. With few seeds the smallest
               one-sided p is 1 / C(n_a + n_b, n_a): 0.05 at 3 + 3 seeds, above
               the 0.025 that accept needs at alpha 0.05, so the CI is unbounded
               and the decision inconclusive.

Every test's CI and p agree: the CI excludes 0 exactly when p <= alpha, and
"CI low > 0" exactly when the one-sided p (improvement) is <= alpha / 2.

Degenerate spread: a side shows no seed-to-seed spread when it gives the same
value on every seed (say every seed diverged to failures.diverged_value), up
to the float resolution of the values at their magnitude.
- Both sides (welch, bootstrap): there is no noise at all to weigh the effect
  against. A CI of width zero and p = 0 would read as certainty; instead the
  test returns an unbounded CI and p = NaN, so the decision is neither accept
  nor reject. Paired, every seed the same difference while the arms vary is the
  sign rule's case; arms that do not vary either stay without a CI.
- One side: its noise was never observed, and the CI is drawn from the other
  side's noise alone, too narrow to show an improvement: such a comparison
  is never accepted (`verdict(..., flat=...)`); it can still be rejected, as
  the CI shows the arm falling short. An all-diverged baseline at 2 seeds
  is the case that made A/A comparisons accept 5-7 % of the time.
The reason says which side, and whether its values were equal or only
within the float resolution.

Rules (acceptance.rule): `estimate` (the default) accepts when the CI is above
0 and the estimate reaches min_effect; `margin` only when the CI's lower end
reaches min_effect (superiority by a margin). Both reject when the CI's upper
end is below min_effect.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any, Literal, cast

import numpy as np

from planner._core.lazy import lazy_import

# their home is attainable (light, for validate); re-exported here
from planner._stats.attainable import (
    MAX_ENUMERATED_SPLITS,
    attainable_alpha,  # noqa: F401
    smallest_p_value,
)

# the t test's quantiles: a report that checks a rule never loads SciPy; a run imports it
SCIPY = "scipy.special"
special = lazy_import(SCIPY)  # while its confirmation runs (planner._dispatch.runner)

Mode = Literal["max", "min"]
Test = Literal["welch", "paired", "bootstrap"]
Correction = Literal["holm", "bonferroni", "none"]
Rule = Literal["estimate", "margin"]
Verdict = Literal["accept", "reject", "inconclusive", "incomplete", "invalid"]

# The decision values of decisions.json. `invalid`: the data cannot support any verdict
# (the seeds did not vary the run, a data violation); the reason says which.
VERDICTS = ("accept", "reject", "inconclusive", "incomplete", "invalid")

TESTS = ("welch", "paired", "bootstrap")
CORRECTIONS = ("holm", "bonferroni", "none")
RULES = ("estimate", "margin")
DECISION_KEYS = (
    "arm",
    "decision",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "alpha_adjusted",
    "n_baseline",
    "n_arm",
    "reason",
)

# Permutation test: enumerate every split up to MAX_ENUMERATED_SPLITS, else draw this many at
# random.
RANDOM_PERMUTATIONS = 9_999


@dataclass(frozen=True)
class NoSpread:
    """One side of a comparison that shows no seed-to-seed spread (the degenerate-spread rule).

    side: "baseline", "arm" or "differences" (paired: arm - baseline per seed).
    equal: every seed gave exactly the same value; else the values differ, but their sd is
    below `resolution`, the float resolution of the values at their magnitude.
    """

    side: str
    n: int
    equal: bool
    sd: float
    resolution: float
    magnitude: float


@dataclass(frozen=True)
class Comparison:
    """One arm against the baseline. `effect` > 0 means the arm is better."""

    test: str
    alpha: float
    effect: float
    ci_low: float
    ci_high: float
    p_value: float
    n_baseline: int
    n_arm: int
    n_unpaired: int = 0  # paired test: seeds only one side had, dropped
    no_spread: tuple[NoSpread, ...] = ()  # the sides without spread (module doc)
    sign_flip: bool = False  # paired with a diverged seed: the exact sign-flip test decided

    @property
    def degenerate(self) -> bool:
        """No spread to weigh the effect against (see the module doc): the CI is unbounded and p is
        NaN."""
        return math.isnan(self.p_value)

    @property
    def one_side_flat(self) -> bool:
        """The baseline or the arm without spread (module doc): whatever the CI says, the
        comparison is never accepted."""
        return any(s.side != "differences" for s in self.no_spread)

    @property
    def exact_shift(self) -> bool:
        """Paired, every seed the same difference: the sign rule over the seeds decided."""
        return any(s.side == "differences" for s in self.no_spread) and not self.degenerate


@dataclass(frozen=True)
class Outcome:
    """One confirmation trial as the decision sees it.

    `status` is the trial record's status (`completed`, `diverged`, `failed`,
    `timeout`, `oom`, `protocol_error`, ...) or `pending` for one not ended yet.
    """

    seed: int
    value: float | None
    status: str = "completed"


@dataclass(frozen=True)
class Decision:
    """One arm's entry of decisions.json (docs/run-folder.md)."""

    arm: str
    decision: Verdict
    effect: float
    ci_low: float
    ci_high: float
    p_value: float
    alpha_adjusted: float
    n_baseline: int
    n_arm: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """Exactly DECISION_KEYS as strict JSON values: NaN and infinities become None.

        A null CI bound next to a finite effect means an unbounded CI (the
        bootstrap test with too few seeds); the reason says so.
        """
        out = {}
        for key in DECISION_KEYS:
            value = getattr(self, key)
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            out[key] = value
        return out


# --------------------------------------------------------------------------- one comparison


def compare(
    baseline: Sequence[float],
    arm: Sequence[float],
    *,
    mode: Mode,
    test: Test,
    alpha: float,
    baseline_seeds: Sequence[int] | None = None,
    arm_seeds: Sequence[int] | None = None,
    rng_seed: int = 0,
    diverged: bool = False,
) -> Comparison:
    """Effect, two-sided (1 - alpha) CI and p-value of `arm` against `baseline`.

    Values must be finite. `paired` pairs by seed when both seed lists are
    given, else by position (equal lengths required). `rng_seed` fixes the
    random permutations the bootstrap test draws when there are too many
    splits to enumerate, so a decision is reproducible. `diverged`: a seed of
    either side is a diverged trial counted as failures.diverged_value; the
    paired test then decides by the exact sign-flip test (module doc).
    """
    check_test(test)
    check_alpha(alpha)
    base = _oriented(baseline, mode)
    treated = _oriented(arm, mode)
    if test == "paired":
        base, treated, n_unpaired = _pair(base, treated, baseline_seeds, arm_seeds)
        if len(base) < 2:
            raise ValueError(
                f"the paired test needs at least 2 seeds both arms have, got {len(base)}"
            )
        effect, low, high, p = _paired_t(base[None], treated[None], alpha, exact=diverged)
    else:
        n_unpaired = 0
        if len(base) < 2 or len(treated) < 2:
            raise ValueError(
                f"the {test} test needs at least 2 values per arm, got {len(base)} and "
                f"{len(treated)}"
            )
        if test == "welch":
            effect, low, high, p = _welch_t(base[None], treated[None], alpha)
        else:
            splits = permutation_splits(len(treated), len(base), rng_seed)
            effect, low, high, p = _permutation(base[None], treated[None], alpha, splits)
    return Comparison(
        test=test,
        alpha=alpha,
        effect=float(effect[0]),
        ci_low=float(low[0]),
        ci_high=float(high[0]),
        p_value=float(p[0]),
        n_baseline=len(base),
        n_arm=len(treated),
        n_unpaired=n_unpaired,
        no_spread=sides_without_spread(base, treated, test),
        sign_flip=test == "paired" and diverged,
    )


def check_test(test: str) -> None:
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}: use one of {', '.join(TESTS)}")


def check_alpha(alpha: float, what: str = "alpha") -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise ValueError(f"{what} must be a number in (0, 1), got {alpha!r}")


def check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ValueError(f"unknown acceptance rule {rule!r}: use one of {', '.join(RULES)}")


def check_min_effect(min_effect: float) -> None:
    if (
        isinstance(min_effect, bool)
        or not isinstance(min_effect, int | float)
        or not math.isfinite(min_effect)
        or not min_effect > 0
    ):
        raise ValueError(
            f"min_effect must be a finite number > 0 (the smallest improvement that matters), "
            f"got {min_effect!r}"
        )


def check_correction(correction: str) -> None:
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}: use one of {', '.join(CORRECTIONS)}")


def _oriented(values: Sequence[float], mode: str) -> np.ndarray:
    """Values turned so that larger is better."""
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("values must be a flat sequence of finite numbers") from None
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError("values must be a flat sequence of finite numbers")
    return array if mode == "max" else -array


def _pair(base, treated, baseline_seeds, arm_seeds):
    if baseline_seeds is None or arm_seeds is None:
        if len(base) != len(treated):
            raise ValueError(
                "the paired test without seeds pairs by position and needs equal lengths"
            )
        return base, treated, 0
    if len(baseline_seeds) != len(base) or len(arm_seeds) != len(treated):
        raise ValueError("each seed list must be as long as its values")
    arm_index = {seed: i for i, seed in enumerate(arm_seeds)}
    common = [seed for seed in baseline_seeds if seed in arm_index]
    base_index = {seed: i for i, seed in enumerate(baseline_seeds)}
    n_unpaired = len(base) + len(treated) - 2 * len(common)
    return (
        base[[base_index[s] for s in common]],
        treated[[arm_index[s] for s in common]],
        n_unpaired,
    )


# ------------------------------------------------------------- vectorized tests (rows =
# experiments)
#
# Each takes oriented values of shape (experiments, n) and returns arrays
# (effect, ci_low, ci_high, p_value), so the calibration tests and the bench
# simulate with exactly the code that decides. The t tests take alpha as a
# scalar or one level per experiment.


# A spread within this many float steps (machine epsilons) of the values' magnitude is float noise,
# not spread: equal decimal differences (0.81 - 0.80 and 0.91 - 0.90) or 0.1 + 0.2 against 0.3
# differ by about one step (their sd is near 1e-17 at 0.9), not 0. The spread is measured on the
# values less their first one (exact for values this close), so the sd's own arithmetic adds
# nothing and 2 steps cover the rounding of the values; a real spread at a large offset stays a
# spread (values near 1e10 with sd 1e-3 are about 500 steps apart). Values exactly equal are no
# spread whatever the tolerance.
FLOAT_NOISE_STEPS = 2


def resolution(*values) -> np.ndarray:
    """Per row: the float resolution of `values` (arrays, rows = experiments) at their magnitude."""
    scale = np.max([np.abs(v).max(axis=-1) for v in values], axis=0)
    return FLOAT_NOISE_STEPS * np.finfo(float).eps * scale


def spread(values: np.ndarray) -> np.ndarray:
    """Per row: the sd (ddof 0) of the values, measured on the values less the row's first (see
    above)."""
    return (values - values[..., :1]).std(axis=-1)


def no_spread(values: np.ndarray, *scale_of) -> np.ndarray:
    """Per row: do `values` show no spread: exactly equal, or an sd within the float resolution at
    the magnitude of `scale_of` (default: the values themselves)?"""
    return (np.ptp(values, axis=-1) == 0) | (spread(values) <= resolution(*(scale_of or (values,))))


def _t_interval(effect, se, df, alpha, degenerate):
    """CI and two-sided p of effect / se ~ t(df); a degenerate row gets (-inf, inf) and p NaN."""
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # scipy.special: stats.t's ufuncs, less overhead
        half = special.stdtrit(df, 1 - np.asarray(alpha) / 2) * se
        p = 2 * special.stdtr(df, -np.abs(effect) / se)
    half = np.where(degenerate, np.inf, half)
    p = np.where(degenerate, np.nan, np.minimum(p, 1.0))
    return effect, effect - half, effect + half, p


def welch_df(se2_arm, se2_base, n_arm, n_base):
    """Welch-Satterthwaite degrees of freedom from the squared standard errors of the two means."""
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # in shares of the total: no underflow for tiny values
        share_arm = se2_arm / (se2_arm + se2_base)
        return 1 / (share_arm**2 / (n_arm - 1) + (1 - share_arm) ** 2 / (n_base - 1))


def _welch_parts(base: np.ndarray, arm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(effect, se, df) of Welch's t per row."""
    n_b, n_a = base.shape[-1], arm.shape[-1]
    se2_b = base.var(axis=-1, ddof=1) / n_b
    se2_a = arm.var(axis=-1, ddof=1) / n_a
    effect = arm.mean(axis=-1) - base.mean(axis=-1)
    return effect, np.sqrt(se2_a + se2_b), welch_df(se2_a, se2_b, n_a, n_b)


def _paired_parts(base: np.ndarray, arm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(effect, se, df) of the paired t per row; columns are paired seeds."""
    diff = arm - base
    n = diff.shape[-1]
    se = diff.std(axis=-1, ddof=1) / np.sqrt(n)
    return diff.mean(axis=-1), se, np.full(se.shape, n - 1.0)


def degenerate_rows(base: np.ndarray, arm: np.ndarray, test: str) -> np.ndarray:
    """Rows with no spread at all to weigh the effect against (module doc): paired, the
    differences'; otherwise both arms' own. Such a row gets an unbounded CI and p NaN."""
    if test == "paired":
        return no_spread(arm - base, base, arm)
    return no_spread(base) & no_spread(arm)


def flat_rows(base: np.ndarray, arm: np.ndarray) -> np.ndarray:
    """Rows where a side (the baseline or the arm) shows no spread: never accepted (module doc)."""
    return no_spread(base) | no_spread(arm)


def sides_without_spread(base: np.ndarray, arm: np.ndarray, test: str) -> tuple[NoSpread, ...]:
    """The sides of one comparison (1-D oriented values) that `flat_rows` (baseline, arm) and,
    paired, `degenerate_rows` (differences) find without spread."""
    sides: list[tuple[str, np.ndarray, tuple[np.ndarray, ...]]] = [
        ("baseline", base, (base,)),
        ("arm", arm, (arm,)),
    ]
    if test == "paired":
        sides.append(("differences", arm - base, (base, arm)))
    out = []
    for side, values, scale_of in sides:
        if no_spread(values, *scale_of):
            magnitude = float(max(np.abs(v).max() for v in scale_of))
            out.append(
                NoSpread(
                    side,
                    len(values),
                    bool(np.ptp(values) == 0),
                    float(spread(values)),
                    float(resolution(*scale_of)),
                    magnitude,
                )
            )
    return tuple(out)


def _welch_t(base: np.ndarray, arm: np.ndarray, alpha):
    return _t_interval(*_welch_parts(base, arm), alpha, degenerate_rows(base, arm, "welch"))


def _paired_t(base: np.ndarray, arm: np.ndarray, alpha, exact=None):
    """The paired test per row: the t on the differences; the sign rule where they show no spread
    but the arms do (`sign_rule`; arms without spread are seeds that did not vary the run, no
    evidence); the exact sign-flip test on the rows of `exact` (a diverged seed: module doc)."""
    degenerate = degenerate_rows(base, arm, "paired")
    effect, low, high, p = _t_interval(*_paired_parts(base, arm), alpha, degenerate)
    diff = arm - base
    if exact is not None and np.any(exact):
        rows = np.broadcast_to(np.asarray(exact, dtype=bool), effect.shape) & ~degenerate
        level = np.broadcast_to(np.asarray(alpha, dtype=float), effect.shape)[rows]
        flips = sign_flips(diff.shape[-1])
        _, low[rows], high[rows], p[rows] = _sign_flip(diff[rows], level, flips)
    shift = degenerate & ~flat_rows(base, arm)
    if np.any(shift):
        level = np.broadcast_to(np.asarray(alpha, dtype=float), effect.shape)[shift]
        _, low[shift], high[shift], p[shift] = _sign_rule_interval(
            diff[shift], level, base[shift], arm[shift]
        )
    return effect, low, high, p


def sign_rule(differences: np.ndarray, *scale_of) -> np.ndarray:
    """Per row: the one-sided p of the sign rule over seeds, 0.5 ** n, where the n per-seed
    differences show no spread (`no_spread`: an exact shift, every seed the same difference);
    NaN where they spread (a t or a CI reads those).

    Chance alone puts all n of a difference symmetric about any value on one side of it with
    probability 0.5 ** n, so n seeds agreeing exactly are that much evidence, for the decision's
    paired test and the audit's curves alike; they are no evidence of the size beyond their range.
    """
    differences = np.asarray(differences, dtype=float)
    flat = no_spread(differences, *(scale_of or (differences,)))
    return np.where(flat, 0.5 ** differences.shape[-1], np.nan)


def _sign_rule_interval(diff: np.ndarray, alpha, base: np.ndarray, arm: np.ndarray):
    """Effect, CI and two-sided p of rows whose differences show no spread, by the sign rule: every
    value outside [min, max] of the differences is refused at the one-sided 0.5 ** n (the
    sign-flip test's inversion), so the CI is that range when 0.5 ** n <= alpha / 2, else
    unbounded; p is 2 * 0.5 ** n when the range excludes 0, else 1."""
    one_sided = sign_rule(diff, base, arm)
    low, high = diff.min(axis=-1), diff.max(axis=-1)
    shown = one_sided <= np.asarray(alpha) / 2
    excludes_0 = (low > 0) | (high < 0)
    p = np.where(excludes_0, np.minimum(1.0, 2 * one_sided), 1.0)
    return (
        diff.mean(axis=-1),
        np.where(shown, low, -np.inf),
        np.where(shown, high, np.inf),
        p,
    )


@lru_cache(maxsize=32)
def sign_flips(n: int, rng_seed: int = 0, n_random: int = RANDOM_PERMUTATIONS) -> np.ndarray:
    """Boolean matrix (flips, n): True where a seed's difference changes sign. Row 0 is the
    observed differences (no flip). Every flip is listed when there are at most
    MAX_ENUMERATED_SPLITS (up to 14 seeds), else `n_random` random ones follow row 0: both give
    valid p-values, as `permutation_splits`."""
    if 2**n <= MAX_ENUMERATED_SPLITS:
        flips = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    else:
        rng = np.random.default_rng(rng_seed)
        flips = np.vstack([np.zeros((1, n), dtype=bool), rng.random((n_random, n)) < 0.5])
    flips.setflags(write=False)
    return flips


def _sign_flip(diff: np.ndarray, alpha, flips: np.ndarray):
    """The sign-flip (randomization) test of the mean of paired differences, inverted into a CI.

    Under no effect a seed's two arms are exchangeable, so each difference is as likely with
    either sign: exact whatever the distribution. Flipping the set S against a shift delta gives
    a statistic at least the observed one exactly when mean(diff over S) <= delta, so the
    one-sided p's count subset means, and the CI's bounds are order statistics of them
    (Hartigan's subset means). alpha: a scalar or one level per row.
    """
    sizes = flips.sum(axis=1)
    same = sizes == 0  # the observed differences (and a random draw that flips nothing)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = (diff @ flips.T.astype(float)) / np.where(same, 1, sizes)
    # a subset mean at 0 up to rounding is a tie (both arms diverged at a seed: a difference of 0)
    tie = 1e-9 * np.abs(diff).max(axis=-1, keepdims=True)
    means = np.where(np.abs(means) <= tie, 0.0, means)
    n_flips, n_same = len(flips), int(same.sum())
    low_side = np.sort(np.where(same, np.inf, means), axis=1)
    high_side = -np.sort(-np.where(same, -np.inf, means), axis=1)
    p_upper = (n_same + (low_side <= 0).sum(axis=1)) / n_flips
    p_lower = (n_same + (high_side >= 0).sum(axis=1)) / n_flips
    # smallest count j of subset means with (n_same + j) / n_flips > alpha / 2
    j = np.floor(np.asarray(alpha) / 2 * n_flips - n_same + 1e-9).astype(int) + 1
    j = np.broadcast_to(j, p_upper.shape)
    index = np.clip(j - 1, 0, n_flips - 1)[:, None]
    low = np.where(j > 0, np.take_along_axis(low_side, index, axis=1)[:, 0], -np.inf)
    high = np.where(j > 0, np.take_along_axis(high_side, index, axis=1)[:, 0], np.inf)
    effect = diff.mean(axis=-1)
    low, high = np.minimum(low, effect), np.maximum(high, effect)
    return effect, low, high, np.minimum(1.0, 2 * np.minimum(p_upper, p_lower))


def permutation_splits(
    n_arm: int, n_baseline: int, rng_seed: int = 0, n_random: int = RANDOM_PERMUTATIONS
) -> np.ndarray:
    """Boolean matrix (splits, n_arm + n_baseline): True where a value goes to the arm group.

    Row 0 is the observed split (the arm's values first). Every split is listed
    when there are at most MAX_ENUMERATED_SPLITS, else `n_random` random ones
    follow the observed split; both give valid p-values (a random set only
    adds Monte-Carlo noise to the p, never bias below the level).
    """
    n = n_arm + n_baseline
    if math.comb(n, n_arm) <= MAX_ENUMERATED_SPLITS:
        chosen = np.array(list(combinations(range(n), n_arm)))  # (0..n_arm-1) comes first
    else:
        rng = np.random.default_rng(rng_seed)
        random = rng.random((n_random, n)).argsort(axis=1)[:, :n_arm]
        chosen = np.vstack([np.arange(n_arm)[None], random])
    splits = np.zeros((len(chosen), n), dtype=bool)
    np.put_along_axis(splits, chosen, True, axis=1)
    return splits


def _permutation(base: np.ndarray, arm: np.ndarray, alpha: float, splits: np.ndarray):
    """Permutation test of the difference of means, inverted into a CI for a shift.

    Shifting the arm by -delta changes a split's statistic linearly in delta, so
    each split has a critical shift d where it crosses the observed statistic;
    the one-sided p at delta counts splits with d <= delta (upper) or d >= delta
    (lower), and the CI bounds are order statistics of d.
    """
    n_a, n_b = arm.shape[-1], base.shape[-1]
    degenerate = degenerate_rows(base, arm, "bootstrap")
    pooled = np.concatenate([arm, base], axis=-1)
    pooled = pooled - pooled.mean(
        axis=-1, keepdims=True
    )  # shift-free: the tie tolerance below is scale-free
    arm_sums = pooled @ splits.T.astype(float)  # (experiments, splits)
    stat = arm_sums / n_a - (pooled.sum(axis=-1, keepdims=True) - arm_sums) / n_b
    observed = stat[:, :1]
    arm_kept = splits[:, :n_a].sum(axis=1)
    slope = (n_a - arm_kept) * (1 / n_a + 1 / n_b)  # 0 for splits equal to the observed one
    same = slope == 0
    n_splits, n_same = len(splits), int(same.sum())
    gap = observed - stat
    # a split that ties the observed statistic up to rounding (equal metric values are common)
    # counts as a tie; the values are centred, so the tolerance follows their spread, not their
    # offset
    gap = np.where(np.abs(gap) <= 1e-9 * np.abs(pooled).max(axis=-1, keepdims=True), 0.0, gap)
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = gap / np.where(same, 1.0, slope)
    low_side = np.where(same, np.inf, crossing)  # never counted by "d <= delta"
    high_side = np.where(same, -np.inf, crossing)  # never counted by "d >= delta"
    p_upper = (n_same + (low_side <= 0).sum(axis=1)) / n_splits
    p_lower = (n_same + (high_side >= 0).sum(axis=1)) / n_splits
    # smallest count j of crossings with (n_same + j) / n_splits > alpha / 2
    j = math.floor(alpha / 2 * n_splits - n_same + 1e-9) + 1
    rows = len(stat)
    if j <= 0:
        low, high = np.full(rows, -np.inf), np.full(rows, np.inf)
    else:
        low = np.partition(low_side, j - 1, axis=1)[:, j - 1]
        high = -np.partition(-high_side, j - 1, axis=1)[:, j - 1]
    p = np.minimum(1.0, 2 * np.minimum(p_upper, p_lower))
    # the inverted CI holds the observed effect (p = 1 there); a crossing one ulp off it is rounding
    low, high = np.minimum(low, observed[:, 0]), np.maximum(high, observed[:, 0])
    low, high = np.where(degenerate, -np.inf, low), np.where(degenerate, np.inf, high)
    return observed[:, 0], low, high, np.where(degenerate, np.nan, p)


# --------------------------------------------------------------------------- the rule


def reaches(value, min_effect: float):
    """value >= min_effect, up to float noise: 0.81 - 0.80 (0.010000000000000009) and
    0.00999999999999995 both reach 0.01, as they print. NaN reaches nothing."""
    return np.asarray(value) >= min_effect - 1e-9 * abs(min_effect)


def below(value, min_effect: float):
    """value < min_effect beyond float noise (the negation of `reaches`, except NaN is not below
    either)."""
    return np.asarray(value) < min_effect - 1e-9 * abs(min_effect)


def verdict(effect, ci_low, ci_high, min_effect: float, rule: Rule = "estimate", *, flat=None):
    """The contract's rule on arrays: 'accept' | 'reject' | 'inconclusive' per element.

    estimate: accept when CI low > 0 and the estimate reaches min_effect. margin: accept only when
    CI low itself reaches min_effect. Both reject when CI high is below min_effect. An unbounded CI
    (a degenerate spread, or too few seeds for the bootstrap test) is never accept or reject; an
    element of `flat` (`flat_rows`: a side without spread) is never accept.
    """
    check_rule(rule)
    effect, ci_low, ci_high = np.broadcast_arrays(effect, ci_low, ci_high)
    accept = (ci_low > 0) & reaches(ci_low if rule == "margin" else effect, min_effect)
    if flat is not None:
        accept &= ~np.asarray(flat, dtype=bool)
    reject = below(ci_high, min_effect)
    return np.where(accept, "accept", np.where(reject, "reject", "inconclusive"))


def adjusted_alphas(p_values: Sequence[float], alpha: float, correction: Correction) -> list[float]:
    """The two-sided level at which each comparison's CI is drawn.

    bonferroni: alpha / m for every arm. none: alpha. holm: arms in order of
    p-value (NaN last, as if p = 1) get alpha / m, alpha / (m - 1), ... while
    each p is within its level; the first arm whose p is not, and every arm
    after it, get that arm's level. So an arm's CI excludes 0 exactly when
    Holm's step-down rejects it, and arms Holm retains get CIs that cover 0.
    """
    check_correction(correction)
    m = len(p_values)
    if correction == "none" or m == 0:
        return [alpha] * m
    if correction == "bonferroni":
        return [alpha / m] * m
    p = np.array([1.0 if p is None or math.isnan(p) else p for p in p_values])
    levels = [0.0] * m
    stopped_at = None
    for rank, index in enumerate(np.argsort(p, kind="stable")):
        if stopped_at is None:
            level = alpha / (m - rank)
            if p[index] > level:
                stopped_at = level
        levels[index] = stopped_at if stopped_at is not None else level
    return levels


def _check_acceptance(acceptance: Any, rule: str) -> None:
    """Each part of the acceptance checked, in turn: a ValueError that names the bad one."""
    check_test(acceptance.test)
    check_alpha(acceptance.alpha)
    check_min_effect(acceptance.min_effect)
    check_rule(rule)
    check_correction(acceptance.correction)


def decide(
    acceptance: Any,
    mode: Mode,
    results_by_arm: Mapping[str, Iterable[Outcome | tuple]],
    baseline: str,
    *,
    planned_seeds: Sequence[int],
    diverged_value: float | None = None,
    arms: Sequence[str] | None = None,
    metric: str = "the metric",
    rng_seed: int = 0,
) -> list[Decision]:
    """The contract's decision for every arm against `baseline`.

    acceptance: an `Acceptance` (or anything with min_effect, alpha, test, correction, and
        optionally rule: "estimate", the default, or "margin").
    results_by_arm: arm -> confirmation outcomes, each an `Outcome` or a tuple
        (seed, value) or (seed, value, status). A seed of `planned_seeds` with
        no outcome is pending: the arm is incomplete.
    arms: the treatment arms in contract order (default: every key but the
        baseline). Their number is the m of the correction, whether or not
        every arm completed, so a failure cannot loosen the others' alpha.
    """
    test, alpha, min_effect = acceptance.test, acceptance.alpha, acceptance.min_effect
    # checked by check_rule below: any other word stops the decision
    rule = cast(Rule, getattr(acceptance, "rule", "estimate"))
    _check_acceptance(acceptance, rule)
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    if diverged_value is not None and not (
        isinstance(diverged_value, int | float) and math.isfinite(diverged_value)
    ):
        raise ValueError(
            f"diverged_value must be a finite number (the metric's worst value), got "
            f"{diverged_value!r}"
        )
    arms = [a for a in results_by_arm if a != baseline] if arms is None else list(arms)
    if baseline not in results_by_arm:
        raise ValueError(f"no results for the baseline {baseline!r}")
    planned = list(planned_seeds)
    base_values, base_problem, base_diverged = _collect(
        results_by_arm[baseline], planned, diverged_value
    )
    collected = {a: _collect(results_by_arm.get(a, ()), planned, diverged_value) for a in arms}

    first = {}
    for name in arms:
        values, problem, diverged = collected[name]
        if base_problem is None and problem is None:
            first[name] = _compare_collected(
                base_values, values, mode, test, alpha, rng_seed, bool(base_diverged or diverged)
            )
    # an arm with a side without spread counts as p = 1 in Holm's order: its p rests on one side's
    # noise
    p_values = [
        first[a].p_value if a in first and not first[a].one_side_flat else math.nan for a in arms
    ]
    levels = adjusted_alphas(p_values, alpha, acceptance.correction)

    decisions = []
    for name, level in zip(arms, levels, strict=True):
        values, problem, diverged = collected[name]
        if base_problem is not None or problem is not None:
            said = (
                [f"in the baseline {baseline}, {base_problem}"] if base_problem is not None else []
            )
            said += [f"in {name}, {problem}"] if problem is not None else []
            decisions.append(
                Decision(
                    arm=name,
                    decision="incomplete",
                    effect=math.nan,
                    ci_low=math.nan,
                    ci_high=math.nan,
                    p_value=math.nan,
                    alpha_adjusted=level,
                    n_baseline=len(base_values),
                    n_arm=len(values),
                    reason=f"Incomplete: {'; '.join(said)}.",
                )
            )
            continue
        c = (
            first[name]
            if level == alpha
            else _compare_collected(
                base_values, values, mode, test, level, rng_seed, bool(base_diverged or diverged)
            )
        )
        # verdict's array holds one of its three words
        decision = cast(
            Verdict,
            str(verdict(c.effect, c.ci_low, c.ci_high, min_effect, rule, flat=c.one_side_flat)),
        )
        names = {"baseline": baseline, "arm": name, "metric": metric}
        decisions.append(
            Decision(
                arm=name,
                decision=decision,
                effect=c.effect,
                ci_low=c.ci_low,
                ci_high=c.ci_high,
                p_value=c.p_value,
                alpha_adjusted=level,
                n_baseline=c.n_baseline,
                n_arm=c.n_arm,
                reason=_reason(
                    c,
                    decision,
                    level=level,
                    min_effect=min_effect,
                    rule=rule,
                    names=names,
                    diverged={"baseline": base_diverged, "arm": diverged},
                ),
            )
        )
    return decisions


def seeds_did_not_vary(
    arm: str,
    arms_identical: Mapping[str, int],
    baseline: str,
    metric: str,
    diverged: Mapping[str, list[str]] | None = None,
) -> str | None:
    """Why `arm` is `invalid` when the seeds did not vary the baseline's or the arm's run, else None
    (for `mark_invalid`).

    arms_identical: arm -> how many confirmation seeds reported exactly the same curves. Such
    values have no seed-to-seed noise: no test can weigh an effect on them, so the arm is neither
    accepted nor rejected. diverged: arm -> the metrics its trials reported as NaN or an infinity:
    then the cause said is the divergence (every diverged run reports the same chance-level value),
    not an ignored seed.
    """
    said = [
        f"{'the baseline ' if a == baseline else ''}{a} reported exactly the same curves on all "
        f"{arms_identical[a]} seeds"
        for a in (baseline, arm)
        if a in arms_identical
    ]
    if not said:
        return None
    cause = _diverged_cause(arm, arms_identical, baseline, diverged)
    return f"Invalid: the seeds did not vary the run: {' and '.join(said)} of {metric}. " + (
        cause
        or "The trainable ignores its seed (trial.seed / the seed in its config), so there is no "
        "seed-to-seed "
        "noise to test an effect against. Make the trainable seed its randomness from the trial's "
        "seed and "
        "run again."
    )


def _diverged_cause(
    arm: str,
    arms_identical: Mapping[str, int],
    baseline: str,
    diverged: Mapping[str, list[str]] | None,
) -> str:
    """The sentence that names a divergence as the cause of identical curves, or "" when none was
    seen."""
    names = sorted(
        {n for a in (baseline, arm) if a in arms_identical for n in (diverged or {}).get(a, [])}
    )
    if not names:
        return ""
    return (
        f"Their reports hold NaN or infinite values of {', '.join(names)}: the training diverged, "
        f"and a "
        "diverged model reports the same value whatever its seed or tuned values. Narrow the "
        "tuned range "
        "(a lower learning rate), or report the diverging metric so the trial ends as diverged."
    )


def tuned_values_did_not_vary(
    arm: str,
    arms_identical: Mapping[str, int],
    baseline: str,
    diverged: Mapping[str, list[str]] | None = None,
) -> str | None:
    """Why `arm` is `invalid` when the tuned values did not vary the baseline's or the arm's run,
    else None (for `mark_invalid`).

    arms_identical: arm -> how many tuning trials with different params reported exactly the same
    curves (`planner._core.records.tuned_values_identical`). The selection among them is arbitrary:
    the arm was not tuned, and its selected params are not what ran.
    """
    said = [
        f"{arms_identical[a]} tuning trials of {'the baseline' if a == baseline else 'arm'} {a} "
        f"with different "
        "params reported the same curves"
        for a in (baseline, arm)
        if a in arms_identical
    ]
    if not said:
        return None
    cause = _diverged_cause(arm, arms_identical, baseline, diverged)
    return f"Invalid: the tuned values did not vary the run: {' and '.join(said)}; " + (
        cause
        or "check that the trainable uses them (the tuned keys of its config or command line)."
    )


_STATUS_PHRASES = {
    "failed": "failed",
    "timeout": "timed out",
    "oom": "ran out of memory",
    "protocol_error": "broke the reporting protocol",
    "pending": "is still running",
    "early_stopped": "was stopped early",
}


def latest_outcomes(
    rows: Iterable[tuple[str, Any, float | None, str]], arms: Sequence[str], planned: Sequence[int]
) -> dict[str, list[Outcome]]:
    """arm -> the Outcomes the decision takes, from confirmation trials as (arm, seed, final value,
    status) in the order they were logged: the last of an (arm, seed) (a re-run after a resume
    supersedes), planned seeds of the given arms only. The one rule of the run's decision and of
    the report's confirmation table."""
    latest: dict[tuple[str, int], Outcome] = {}
    wanted, seeds = set(arms), set(planned)
    for arm, seed, value, status in rows:
        if arm in wanted and seed in seeds:
            latest[(arm, seed)] = Outcome(seed, value, status)
    out: dict[str, list[Outcome]] = {arm: [] for arm in arms}
    for (arm, _), outcome in latest.items():
        out[arm].append(outcome)
    return out


def collect(outcomes, planned: list[int], diverged_value):
    """seed -> value for the planned seeds, and why the arm is incomplete (or None)."""
    ordered, problem, _ = _collect(outcomes, planned, diverged_value)
    return ordered, problem


def _collect(outcomes, planned: list[int], diverged_value):
    """`collect`, and how many of the values are diverged seeds counted as diverged_value."""
    values: dict[int, float] = {}
    problems: list[str] = []
    seen = set()
    n_diverged = 0
    for item in outcomes:
        outcome = item if isinstance(item, Outcome) else Outcome(*item)
        if outcome.seed in seen:
            raise ValueError(f"seed {outcome.seed} has two outcomes")
        if outcome.seed not in planned:
            raise ValueError(f"seed {outcome.seed} is not a planned confirmation seed {planned}")
        seen.add(outcome.seed)
        value = None if outcome.value is None else float(outcome.value)
        diverged = outcome.status == "diverged" or (
            outcome.status == "completed" and value is not None and not math.isfinite(value)
        )
        if diverged:
            if diverged_value is None:
                problems.append(
                    f"seed {outcome.seed} diverged and the contract sets no failures.diverged_value"
                )
            else:
                values[outcome.seed] = float(diverged_value)
                n_diverged += 1
        elif outcome.status == "completed" and value is not None:
            values[outcome.seed] = value
        elif outcome.status == "completed":
            problems.append(f"seed {outcome.seed} reported no value")
        else:
            problems.append(
                f"seed {outcome.seed} "
                f"{_STATUS_PHRASES.get(outcome.status, 'ended as ' + outcome.status)}"
            )
    missing = [s for s in planned if s not in seen]
    if missing:
        problems.append(
            f"seed{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} not run yet"
        )
    ordered = {s: values[s] for s in planned if s in values}
    return ordered, ("; ".join(problems) if problems else None), n_diverged


def _compare_collected(
    base: dict, arm: dict, mode, test, alpha, rng_seed, diverged: bool = False
) -> Comparison:
    return compare(
        list(base.values()),
        list(arm.values()),
        mode=mode,
        test=test,
        alpha=alpha,
        baseline_seeds=list(base),
        arm_seeds=list(arm),
        rng_seed=rng_seed,
        diverged=diverged,
    )


def _reason(c: Comparison, decision: str, *, level, min_effect, rule, names, diverged) -> str:
    """The decision's sentence. names: baseline, arm, metric; diverged: side -> diverged seeds
    counted."""
    name, baseline, metric = names["arm"], names["baseline"], names["metric"]
    if c.degenerate:
        return (
            f"Improvement of {name} over {baseline} in {metric}: {c.effect:+.4g}, but "
            f"{_no_spread_said(c.no_spread, names, diverged)}: with no seed-to-seed spread there "
            f"is no noise "
            "to weigh the effect against, and a CI of width zero is no evidence (degenerate "
            "spread). "
            "Inconclusive: add seeds, or measure the metric more finely (a coarse metric, such as "
            "accuracy on "
            "few examples, ties)."
        )
    ci = f"{100 * (1 - level):.4g}% CI {c.ci_low:.4g} to {c.ci_high:.4g}"
    said = f"Improvement of {name} over {baseline} in {metric}: {c.effect:+.4g} ({ci})"
    m = f"{min_effect:g}"
    if c.exact_shift:
        return _exact_shift_said(c, decision, level=level, min_effect=min_effect, names=names)
    if c.sign_flip:
        said += (
            " by the exact sign-flip test over the seeds, as a diverged seed counts as "
            "failures.diverged_value, far from the normal noise the t test assumes"
        )
        if not math.isfinite(c.ci_low) and 2 * 0.5**c.n_arm > level:
            return (
                f"{said}: with {c.n_arm} seeds its smallest p is {2 * 0.5**c.n_arm:.3g}, above "
                f"alpha {level:.4g}. Inconclusive: add seeds."
            )
    if c.one_side_flat and decision != "reject":
        return (
            f"{said}, but {_no_spread_said(c.no_spread, names, diverged)}: that side's "
            f"seed-to-seed noise "
            "was never observed, and a CI drawn from the other side's noise alone cannot show an "
            "improvement "
            "(degenerate spread). Inconclusive: add seeds, or measure the metric more finely (a "
            "coarse "
            "metric, such as accuracy on few examples, ties)."
        )
    if decision == "accept" and reaches(c.ci_low, min_effect):
        return (
            f"{said}: the CI's lower end reaches the minimum effect {m}, so an improvement of "
            f"at least {m} is shown."
        )
    if decision == "accept":
        return (
            f"{said}: the CI is above 0 and the estimate reaches the minimum effect {m}, but the "
            f"CI's lower end "
            f"is below {m}: an improvement is shown, one of at least {m} only estimated "
            "(acceptance.rule margin accepts only when the CI shows it)."
        )
    if decision == "reject" and c.one_side_flat:
        return (
            f"{said}: even the CI's upper end is below the minimum effect {m}; the CI rests on "
            f"one side's "
            f"noise, as {_no_spread_said(c.no_spread, names, diverged)}."
        )
    if decision == "reject":
        return f"{said}: even the CI's upper end is below the minimum effect {m}."
    if (
        c.test == "bootstrap"
        and not math.isfinite(c.ci_low)
        and smallest_p_value(c.n_arm, c.n_baseline) > level
    ):
        return (
            f"{said}: with {c.n_arm} + {c.n_baseline} seeds the bootstrap test cannot reach alpha "
            f"{level:.4g} "
            "(its smallest p is {:.3g}); add seeds or use welch.".format(
                smallest_p_value(c.n_arm, c.n_baseline)
            )
        )
    if c.ci_low > 0 and rule == "margin":
        return (
            f"{said}: the CI is above 0 but its lower end is below the minimum effect {m}: an "
            f"improvement is "
            f"shown, one of at least {m} is not, and acceptance.rule margin accepts only that; "
            f"more seeds "
            "narrow the CI."
        )
    if c.ci_low > 0:
        return f"{said}: the CI is above 0 but the effect is below the minimum {m}."
    return f"{said}: the CI includes 0 and reaches the minimum effect {m}, so the data cannot tell."


def _exact_shift_said(c: Comparison, decision: str, *, level, min_effect, names) -> str:
    """The decision's sentence when every seed gave the same difference (the sign rule)."""
    n, one_sided = c.n_arm, 0.5**c.n_arm
    said = (
        f"Improvement of {names['arm']} over {names['baseline']} in {names['metric']}: "
        f"{c.effect:+.4g} on every one of the {n} seeds (no spread: an exact shift). By the sign "
        f"rule over seeds, chance alone makes {n} seeds agree with p = 0.5^{n} = {one_sided:.2g} "
        "one-sided"
    )
    if not math.isfinite(c.ci_low):
        needed = math.ceil(math.log2(2 / level) - 1e-9)
        return (
            f"{said}, above the {level / 2:.4g} an accept needs at alpha {level:.4g}. "
            f"Inconclusive: an exact shift is shown by {needed} seeds or more."
        )
    m = f"{min_effect:g}"
    said += f", within {level / 2:.4g}: the {100 * (1 - level):.4g}% CI is that difference"
    if decision == "accept" and reaches(c.ci_low, min_effect):
        return f"{said}, and it reaches the minimum effect {m}: an improvement of {m} is shown."
    if decision == "accept":
        return f"{said}, above 0 and reaching the minimum effect {m}: an improvement is shown."
    if decision == "reject":
        return f"{said}, below the minimum effect {m}: any improvement is too small to matter."
    sides = [s for s in c.no_spread if s.side != "differences"]
    if sides:
        return (
            f"{said}, but {_no_spread_said(sides, names, {})}: that side's seed-to-seed "
            "noise was never observed (degenerate spread). Inconclusive: add seeds, or measure "
            "the metric more finely."
        )
    return f"{said}, which only in part reaches the minimum effect {m}: inconclusive."


def _no_spread_said(sides: Sequence[NoSpread], names, diverged) -> str:
    """What is true of the sides without spread: the same value on every seed, or a spread below the
    float resolution of the metric at its magnitude."""
    base = names["baseline"]
    who = {
        "baseline": "the baseline" if base == "baseline" else f"the baseline {base}",
        "arm": names["arm"],
    }
    by = {s.side: s for s in sides}
    if "differences" in by:
        d = by["differences"]
        said = "every seed gave the same difference between the arms"
        if not d.equal:
            said += (
                f" up to the float resolution of {names['metric']} at its magnitude (the "
                f"differences' sd "
                f"{d.sd:.2g} is below {d.resolution:.2g} at {d.magnitude:.4g})"
            )
        return said
    parts = []
    for s in sides:
        if s.equal:
            part = f"{who[s.side]} gave the same value on all {s.n} seeds"
            if diverged.get(s.side) == s.n:
                part += " (every one diverged and counts as failures.diverged_value)"
        else:
            part = (
                f"the spread of {who[s.side]}'s values (sd {s.sd:.2g}) is below the float "
                f"resolution of "
                f"{names['metric']} at its magnitude ({s.resolution:.2g} at {s.magnitude:.4g})"
            )
        parts.append(part)
    return " and ".join(parts)


def mark_invalid(
    rows: list[dict[str, Any]], reasons: Mapping[str, str], rules: str | Mapping[str, list[str]]
) -> list[dict[str, Any]]:
    """decisions.json rows with `invalid` for each arm in `reasons` (arm -> why: the data it saw
    broke the contract's data section, docs/data.md; the budget; seeds or tuned values that did not
    vary the run). The measured effect and CI stay; `reason` says why they do not count ("<why>
    Measured: <the measured reason>"), `invalid_reason` is the why alone and `invalid_rules` the
    names of the rules broken (`rules`: one name for every arm, or arm -> names), for code to read:
    no reader parses the sentence (a row marked twice keeps both: "<why> <earlier why>", the
    earlier rules after the new)."""
    out = []
    for row in rows:
        if row.get("arm") in reasons:
            why = reasons[row["arm"]]
            both = f"{why} {row['invalid_reason']}" if row.get("invalid_reason") else why
            named = [rules] if isinstance(rules, str) else list(rules.get(row["arm"], []))
            broken = list(dict.fromkeys(named + list(row.get("invalid_rules") or [])))
            row = {
                **row,
                "decision": "invalid",
                "reason": f"{why} Measured: {row.get('reason', '')}",
                "invalid_reason": both,
                "invalid_rules": broken,
            }
        out.append(row)
    return out
