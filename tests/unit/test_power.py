"""Power and seeds, checked against simulation of the deciding code, not only against formulas."""

import math

import numpy as np
import pytest
from scipy import stats

from planner._stats.power import (
    accept_probability,
    detectable_effect,
    detection_power,
    pilot_sd,
    pilot_sd_of_differences,
    seeds_for_power,
    simulate,
)

SIMS = 20_000


def mc_tolerance(p: float, sims: int, z: float = 4.0) -> float:
    """z Monte-Carlo standard errors of a simulated proportion."""
    return z * math.sqrt(p * (1 - p) / sims)


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("test", ["welch", "paired"])
def test_power_formula_matches_simulation(test, n):
    effect = detectable_effect(1.0, n, 0.05, 0.7, test)
    # paired: `sd` is the sd of differences; arms with sd s and correlation 0.5 differ with sd s
    sd, rho = (1.0, 0.5) if test == "paired" else (1.0, 0.0)
    sim = simulate(
        test,
        n,
        effect,
        alpha=0.05,
        min_effect=effect,
        sd=sd,
        correlation=rho,
        sims=SIMS,
        rng_seed=n,
    )
    assert detection_power(n, effect, 1.0, 0.05, test) == pytest.approx(0.7)
    assert sim.detected == pytest.approx(0.7, abs=mc_tolerance(0.7, SIMS))
    expected_accept = accept_probability(n, effect, 1.0, 0.05, effect, test)
    assert sim.accept == pytest.approx(expected_accept, abs=mc_tolerance(expected_accept, SIMS))


def test_accept_at_exactly_min_effect_is_at_most_a_coin_flip():
    for n in (5, 50, 500):
        assert accept_probability(n, 1.0, 1.0, 0.05, 1.0) <= 0.5
    assert accept_probability(500, 1.0, 1.0, 0.05, 1.0) == pytest.approx(0.5, abs=1e-3)
    # with a tiny min_effect, accept is just detection
    assert accept_probability(20, 1.0, 1.0, 0.05, 0.01) == pytest.approx(
        detection_power(20, 1.0, 1.0, 0.05), abs=1e-4
    )


def test_seeds_for_power_is_the_first_n_that_reaches_it_in_simulation():
    n = seeds_for_power(1.0, 0.8, 0.05, 0.8, "welch")
    at_n = simulate("welch", n, 0.8, alpha=0.05, min_effect=0.8, sims=SIMS, rng_seed=1).detected
    below = simulate(
        "welch", n - 1, 0.8, alpha=0.05, min_effect=0.8, sims=SIMS, rng_seed=2
    ).detected
    assert at_n >= 0.8 - mc_tolerance(0.8, SIMS) and below < 0.8
    # the textbook normal approximation 2 (z_a/2 + z_b)^2 sd^2 / d^2, plus about one seed for t
    z = stats.norm.isf(0.025) + stats.norm.isf(0.2)
    assert 2 * z**2 / 0.8**2 <= n <= 2 * z**2 / 0.8**2 + 2


def test_more_arms_need_more_seeds_and_paired_needs_fewer_when_seeds_correlate():
    one = seeds_for_power(1.0, 0.5, 0.05, 0.8)
    assert seeds_for_power(1.0, 0.5, 0.05, 0.8, n_arms=3) > one
    assert seeds_for_power(1.0, 0.5, 0.05, 0.8, n_arms=3, correction="none") == one
    sd_diff = math.sqrt(2 * (1 - 0.8))  # arms with sd 1 and correlation 0.8
    assert seeds_for_power(sd_diff, 0.5, 0.05, 0.8, "paired") < one


def test_bootstrap_plans_with_welch_at_the_level_it_can_attain():
    assert detection_power(3, 10.0, 1.0, 0.05, "bootstrap") == 0.0
    assert detectable_effect(1.0, 3, 0.05, 0.8, "bootstrap") == math.inf
    assert detection_power(6, 1.0, 1.0, 0.05, "bootstrap") == detection_power(
        6, 1.0, 1.0, 2 * 23 / 924, "welch"
    )
    assert seeds_for_power(1.0, 100.0, 0.05, 0.8, "bootstrap") == 4  # 1 / C(8, 4) < 0.025
    for n in (4, 5, 12):  # 4 seeds: the attainable level is 2/70, well below 0.05
        effect = detectable_effect(1.0, n, 0.05, 0.7, "welch")
        planned = detection_power(n, effect, 1.0, 0.05, "bootstrap")
        sim = simulate(
            "bootstrap",
            n,
            effect,
            alpha=0.05,
            min_effect=effect,
            sims=4000,
            rng_seed=n,
            permutations=1999,
        )
        assert planned - mc_tolerance(planned, 4000) <= sim.detected <= planned + 0.04
    assert (
        detection_power(4, 2.0, 1.0, 0.05, "bootstrap")
        < detection_power(4, 2.0, 1.0, 0.05, "welch") - 0.1
    )


def test_pilot_sd_pools_arms_and_skips_non_finite_values():
    rng = np.random.default_rng(0)
    values = {"a": rng.normal(0, 2, 400), "b": rng.normal(5, 2, 600)}
    assert pilot_sd(values) == pytest.approx(2, rel=0.05)
    assert pilot_sd({"a": [1.0, 3.0], "b": [10.0, math.nan, 12.0], "c": [7.0]}) == pytest.approx(
        math.sqrt(2)
    )
    with pytest.raises(ValueError):
        pilot_sd({"a": [1.0]})
    assert pilot_sd_of_differences(
        {0: 1.0, 1: 2.0, 2: 3.0}, {0: 2.0, 1: 4.0, 2: 6.0, 9: 0.0}
    ) == pytest.approx(1.0)


# ------------------------------------------------------------------ plan power under
# acceptance.rule margin


def _margin_contract(tmp_path, rule: str):
    from tests._estimate_contracts import contract

    return contract(acceptance={"min_effect": 0.01, "rule": rule})


def test_plan_power_plans_the_margin_rule_at_the_given_effect(tmp_path):
    import pytest

    from planner import UsageError
    from planner._cli.power_text import format_power
    from planner._plan.seeds import power_summary
    from planner._stats.power import detection_power

    contract = _margin_contract(tmp_path, "margin")
    with pytest.raises(
        UsageError, match="--effect"
    ):  # at min_effect itself accept is alpha / 2 whatever the seeds
        power_summary(contract, 0.01)
    with pytest.raises(UsageError, match="above min_effect"):
        power_summary(contract, 0.01, effect=0.01)
    summary = power_summary(contract, 0.01, effect=0.03)
    assert summary["rule"] == "margin" and summary["effect"] == 0.03
    assert summary["declared"]["power"] == detection_power(
        5, 0.03, 0.01, 0.05, "paired", rule="margin", min_effect=0.01
    )
    # margin needs more seeds than the estimate rule at the same effect
    estimate = power_summary(_margin_contract(tmp_path, "estimate"), 0.01, effect=0.03)
    assert summary["needed"]["80"]["seeds"] > estimate["needed"]["80"]["seeds"]
    assert "rule margin: power = P(accept)" in format_power(summary)
