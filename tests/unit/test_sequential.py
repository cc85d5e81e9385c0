"""Group-sequential confirmation: boundaries, the per-look decision, and simulations against fixed
n."""

import math

import numpy as np
import pytest
from scipy import stats

from planner._stats.decide import compare
from planner._stats.power import detectable_effect
from planner._stats.sequential import (
    boundaries,
    look_sizes,
    plan_design,
    sequential_decision,
    simulate_design,
    spent,
)

ALPHA = 0.05
SIMS = 40_000


def upper_bound(rate: float, sims: int, tail: float = 1e-3) -> float:
    return stats.binom.isf(tail, sims, rate) / sims


# --------------------------------------------------------------------------- boundaries


def test_obrien_fleming_bounds_match_published_lan_demets_values():
    # Lan-DeMets O'Brien-Fleming-type, 4 equal looks, one-sided 0.025 (as gsDesign's sfLDOF
    # tabulates)
    assert boundaries(4, ALPHA, "obrien_fleming") == pytest.approx(
        [4.3326, 2.9631, 2.3590, 2.0141], abs=2e-4
    )
    assert boundaries(1, ALPHA)[0] == pytest.approx(stats.norm.isf(0.025))


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("fractions", [[0.25, 0.5, 0.75, 1.0], [2 / 7, 4 / 7, 1.0]])
def test_bounds_spend_exactly_the_planned_alpha(spending, fractions):
    """Checked with scipy's multivariate normal, an independent method."""
    t = np.array(fractions)
    z = boundaries(len(t), ALPHA, spending, t)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    for k in range(1, len(t) + 1):
        no_cross = stats.multivariate_normal.cdf(
            z[:k], np.zeros(k), cov[:k, :k], rng=1, abseps=1e-6, releps=0
        )
        assert 1 - no_cross == pytest.approx(spent(t[k - 1], ALPHA / 2, spending), abs=2e-5)


def test_pocock_bounds_are_nearly_flat_and_obrien_fleming_starts_high():
    pocock, obf = boundaries(4, ALPHA, "pocock"), boundaries(4, ALPHA, "obrien_fleming")
    assert np.ptp(pocock) < 0.05 and np.all(np.diff(obf) < 0) and obf[-1] < pocock[-1]


def test_look_sizes():
    assert look_sizes(10, 2) == [5, 10]
    assert look_sizes(10, 3) == [3, 7, 10]
    assert look_sizes(5, 1) == [5]
    assert look_sizes(5, 3) == [2, 3, 5]
    with pytest.raises(ValueError, match="cannot make 3 looks.*at most 2 looks"):
        look_sizes(3, 3)


# --------------------------------------------------------------------------- one look


def test_a_single_look_is_the_fixed_welch_decision():
    base, arm = [0.80, 0.82, 0.81, 0.79, 0.83], [0.84, 0.85, 0.83, 0.86, 0.84]
    design = plan_design(5, 1, ALPHA)
    step = sequential_decision(0, base, arm, design=design, mode="max", min_effect=0.01)
    fixed = compare(base, arm, mode="max", test="welch", alpha=ALPHA)
    assert (step.ci_low, step.ci_high) == pytest.approx((fixed.ci_low, fixed.ci_high))
    assert step.action == step.decision == "accept"


def test_looks_continue_accept_and_stop_for_futility():
    design = plan_design(12, 3, ALPHA, futility=True, test="paired")
    base = np.random.default_rng(0).normal(0, 1, 12)
    rng = np.random.default_rng(1)
    noisy = base + rng.normal(0.3, 1, 12)
    step = sequential_decision(0, base[:4], noisy[:4], design=design, mode="max", min_effect=0.5)
    assert step.action == "continue" and step.decision == "pending" and step.n_arm == 4

    clear = base + 3.0 + rng.normal(0, 0.1, 12)
    step = sequential_decision(1, base[:8], clear[:8], design=design, mode="max", min_effect=0.5)
    assert step.action == step.decision == "accept" and "early" in step.reason
    recorded = step.as_decision("clear").as_dict()
    assert (
        recorded["decision"] == "accept"
        and recorded["p_value"] is None
        and recorded["alpha_adjusted"] == ALPHA
    )

    worse = base - 2.0 + rng.normal(0, 0.1, 12)
    step = sequential_decision(0, base[:4], worse[:4], design=design, mode="max", min_effect=0.5)
    assert step.action == "stop_futility" and step.decision == "reject"

    step = sequential_decision(
        2, base, worse, design=design, mode="min", min_effect=0.5
    )  # lower is better
    assert step.action == step.decision == "accept"


def test_a_look_without_enough_seeds_is_refused():
    design = plan_design(10, 2, ALPHA)
    with pytest.raises(ValueError, match="needs 5 seeds"):
        sequential_decision(0, [1.0, 2.0], [1.0, 2.0], design=design, mode="max", min_effect=0.1)


# --------------------------------------------------------------------------- simulations


@pytest.mark.parametrize(
    ("n_seeds", "looks", "spending"),
    [(6, 3, "obrien_fleming"), (10, 5, "obrien_fleming"), (24, 4, "pocock")],
)
@pytest.mark.parametrize("test", ["welch", "paired"])
def test_a_a_false_accept_rate_is_at_most_half_alpha(test, n_seeds, looks, spending):
    design = plan_design(n_seeds, looks, ALPHA, spending, futility=True, test=test)
    rates = simulate_design(
        design,
        0.0,
        min_effect=1e-9,
        sims=SIMS,
        rng_seed=looks,
        correlation=0.5 if test == "paired" else 0.0,
    )
    assert rates.detected <= upper_bound(ALPHA / 2, SIMS)


def test_z_bounds_on_small_sample_t_statistics_are_not_calibrated():
    """The check has teeth: without the t calibration the same simulation fails."""
    design = plan_design(8, 4, ALPHA, "pocock", test="paired")
    plain = simulate_design(design, 0.0, min_effect=1e-9, sims=SIMS, rng_seed=1, z_only=True)
    assert plain.detected > upper_bound(ALPHA / 2, SIMS)


def _at_min_effect(test, n_seeds, looks, spending="obrien_fleming", futility=False, power=0.9):
    """Sequential and fixed-n rates at a true effect of exactly min_effect (same data for both)."""
    min_effect = detectable_effect(
        1.0, n_seeds, ALPHA, power, test
    )  # fixed n detects it with `power`
    sd, rho = (1 / math.sqrt(2 * (1 - 0.5)), 0.5) if test == "paired" else (1.0, 0.0)
    kwargs = dict(min_effect=min_effect, sd=sd, correlation=rho, sims=SIMS, rng_seed=7)
    fixed = simulate_design(plan_design(n_seeds, 1, ALPHA, test=test), min_effect, **kwargs)
    sequential = simulate_design(
        plan_design(n_seeds, looks, ALPHA, spending, futility, test=test), min_effect, **kwargs
    )
    return fixed, sequential


@pytest.mark.parametrize(("test", "looks"), [("welch", 4), ("paired", 5)])
def test_obrien_fleming_keeps_power_and_saves_a_fifth_of_the_seeds(test, looks):
    fixed, sequential = _at_min_effect(test, 24, looks)
    assert fixed.detected == pytest.approx(0.9, abs=0.015)
    assert fixed.detected - sequential.detected <= 0.02
    assert sequential.expected_seeds <= 0.8 * fixed.expected_seeds
    assert sequential.accept >= fixed.accept - 0.02


def test_futility_saves_seeds_under_the_null_without_costing_power():
    min_effect = detectable_effect(1.0, 24, ALPHA, 0.9)
    design = plan_design(24, 4, ALPHA, futility=True)
    without = plan_design(24, 4, ALPHA, futility=False)
    null = simulate_design(design, 0.0, min_effect=min_effect, sims=SIMS, rng_seed=8)
    null_without = simulate_design(without, 0.0, min_effect=min_effect, sims=SIMS, rng_seed=8)
    assert null.expected_seeds <= 0.8 * null_without.expected_seeds
    fixed, sequential = _at_min_effect("welch", 24, 4, futility=True)
    assert fixed.detected - sequential.detected <= 0.02
