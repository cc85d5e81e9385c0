"""Statistics checked like code: simulated A/A experiments must not be accepted too often.

"accept" needs CI low > 0, a one-sided test at alpha / 2, so an arm identical
to the baseline may be accepted at most alpha / 2 of the time. Every rate is
simulated through the functions that decide, with fixed RNG seeds; the bounds
are binomial quantiles computed here, never measured figures pasted in.
"""

import math

import numpy as np
import pytest
from scipy import stats

from planner._stats.decide import _welch_t, adjusted_alphas, verdict
from planner._stats.power import accept_probability, detection_power, seeds_for_power, simulate
from tests._percentile_bootstrap import percentile_bootstrap

ALPHA = 0.05
SIMS = {"welch": 20_000, "paired": 20_000, "bootstrap": 4_000}
# A calibrated method exceeds its bound with this probability only.
BOUND_TAIL = 1e-3


def upper_bound(rate: float, sims: int) -> float:
    """The highest simulated rate a method with true rate `rate` gives, but for BOUND_TAIL."""
    return stats.binom.isf(BOUND_TAIL, sims, rate) / sims


def lower_bound(rate: float, sims: int) -> float:
    return stats.binom.ppf(BOUND_TAIL, sims, rate) / sims


def a_a(test, n, distribution, sims=None, seed=0):
    """Rates for an arm that is the baseline again (true effect 0).

    The bootstrap test draws 1,999 random splits here where it cannot list
    them all (10 + 10 seeds) instead of 9,999: as valid, five times cheaper.
    """
    return simulate(
        test,
        n,
        0.0,
        alpha=ALPHA,
        min_effect=1e-9,
        sims=sims or SIMS[test],
        distribution=distribution,
        correlation=0.5 if test == "paired" else 0.0,
        rng_seed=seed,
        permutations=1_999,
    )


@pytest.mark.parametrize("distribution", ["normal", "lognormal"])
@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("test", ["welch", "paired", "bootstrap"])
def test_a_a_false_accept_rate_is_at_most_half_alpha(test, n, distribution):
    rates = a_a(test, n, distribution, seed=n)
    assert rates.detected <= upper_bound(ALPHA / 2, rates.sims)
    assert rates.accept <= rates.detected


def test_paired_t_is_exact_under_normal_errors():
    rates = a_a("paired", 5, "normal", seed=11)
    assert (
        lower_bound(ALPHA / 2, rates.sims) <= rates.detected <= upper_bound(ALPHA / 2, rates.sims)
    )


def test_bootstrap_reaches_its_attainable_level_exactly():
    # 5 + 5 seeds: 252 splits; the largest one-sided level <= 0.025 is 6/252.
    level = math.floor(ALPHA / 2 * math.comb(10, 5)) / math.comb(10, 5)
    rates = a_a("bootstrap", 5, "lognormal", sims=20_000, seed=12)
    assert lower_bound(level, rates.sims) <= rates.detected <= upper_bound(level, rates.sims)


def test_bootstrap_at_three_seeds_never_accepts_at_alpha_005():
    assert a_a("bootstrap", 3, "normal", seed=13).detected == 0.0


def test_a_plain_percentile_bootstrap_fails_this_calibration():
    """The check has teeth: the method the bootstrap test replaces does not pass it."""
    rng = np.random.default_rng(14)
    sims, n = 4_000, 5
    base, arm = rng.standard_normal((sims, n)), rng.standard_normal((sims, n))
    _, low, _ = percentile_bootstrap(base, arm, ALPHA, 2_000, rng_seed=15)
    assert (low > 0).mean() > upper_bound(ALPHA / 2, sims)


@pytest.mark.parametrize("n", [3, 5, 10])
def test_welch_power_at_min_effect_matches_noncentral_t(n):
    """Detection rate at a true effect of exactly min_effect, against the analytic power."""
    sims = SIMS["welch"]
    min_effect = 1.4 * math.sqrt(2 / n) * stats.t.isf(ALPHA / 2, 2 * n - 2)  # power 0.5-0.9
    analytic = detection_power(n, min_effect, 1.0, ALPHA, "welch")
    assert 0.5 <= analytic <= 0.9
    # the naive noncentral t with 2n - 2 df; Welch's df is smaller, so power is a bit lower
    naive = stats.nct.sf(
        stats.t.isf(ALPHA / 2, 2 * n - 2), 2 * n - 2, min_effect / math.sqrt(2 / n)
    )
    rates = simulate(
        "welch", n, min_effect, alpha=ALPHA, min_effect=min_effect, sims=sims, rng_seed=20 + n
    )
    tolerance = 4 * math.sqrt(analytic * (1 - analytic) / sims)
    assert rates.detected == pytest.approx(analytic, abs=tolerance)
    assert rates.detected == pytest.approx(
        naive, abs=0.12
    )  # within a few points of the textbook figure
    assert rates.detected <= naive
    accept = accept_probability(n, min_effect, 1.0, ALPHA, min_effect, "welch")
    assert rates.accept == pytest.approx(accept, abs=4 * math.sqrt(accept * (1 - accept) / sims))


def test_paired_detects_a_real_effect_at_the_stated_power():
    rho, min_effect = 0.7, 0.5
    sd_diff = math.sqrt(2 * (1 - rho))
    n = seeds_for_power(sd_diff, min_effect, ALPHA, 0.8, "paired")
    sims = SIMS["paired"]
    rates = simulate(
        "paired",
        n,
        min_effect,
        alpha=ALPHA,
        min_effect=min_effect,
        correlation=rho,
        sims=sims,
        rng_seed=30,
    )
    analytic = detection_power(n, min_effect, sd_diff, ALPHA, "paired")
    assert analytic >= 0.8
    assert rates.detected == pytest.approx(
        analytic, abs=4 * math.sqrt(analytic * (1 - analytic) / sims)
    )


def test_holm_keeps_the_family_false_accept_rate_with_a_shared_baseline():
    """Three A/A arms against one baseline: P(any arm accepted) <= alpha / 2.

    Vectorized like `decide`: p-values, Holm levels from `adjusted_alphas`,
    then each arm's CI at its level (test_decide checks decide does this).
    """
    rng = np.random.default_rng(40)
    sims, n, m = 20_000, 5, 3
    base = rng.standard_normal((sims, n))
    arms = [rng.standard_normal((sims, n)) for _ in range(m)]
    p = np.column_stack([_welch_t(base, arm, ALPHA)[3] for arm in arms])
    levels = np.array([adjusted_alphas(row, ALPHA, "holm") for row in p])
    accepted = np.column_stack(
        [
            verdict(*_welch_t(base, arm, levels[:, j])[:3], min_effect=1e-9) == "accept"
            for j, arm in enumerate(arms)
        ]
    )
    assert accepted.any(axis=1).mean() <= upper_bound(ALPHA / 2, sims)
