"""The paired test's exact rules, and the public planning functions' paired default.

- a diverged seed: the exact sign-flip test. Its level is checked exactly, not by sampling: for
  fixed per-seed pairs, every way of swapping the two arms at each seed is equally likely under
  no effect, so the share of those 2^n swaps that accept is the test's level given the pairs;
- an exact shift: the sign rule over seeds, the same way (ties included);
- planner.stats plans with the paired test by default, from the sd of the per-seed differences.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import planner.stats as ps
from planner._stats.decide import _paired_t, flat_rows, sign_rule, verdict
from planner._stats.power import seeds_for_power

ALPHA = 0.05


def swaps(first: list[float], second: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, arm) rows for every way of swapping the two arms' values at each seed."""
    x, y = np.asarray(first), np.asarray(second)
    signs = np.array(list(itertools.product([False, True], repeat=len(x))))
    return np.where(signs, y, x), np.where(signs, x, y)


def accepted_share(base: np.ndarray, arm: np.ndarray, exact: bool) -> float:
    effect, low, high, _ = _paired_t(base, arm, ALPHA, exact=exact)
    decided = verdict(effect, low, high, 1e-6, flat=flat_rows(base, arm))
    return float((decided == "accept").mean())


def diverged_pairs() -> tuple[list[float], list[float]]:
    """10 seeds: the baseline diverged (diverged_value 0.0) at 4, small differences of both signs
    at 6."""
    kept = [0.91, 0.90, 0.92, 0.905, 0.915, 0.90, 0.91, 0.925, 0.895, 0.91]
    small = [0.001, -0.002, 0.0015, 0.0005, -0.001, 0.002]
    return [0.0] * 4 + [v - e for v, e in zip(kept[4:], small, strict=True)], kept


def test_the_sign_flip_test_holds_its_level_where_the_t_does_not():
    """Given 4 diverged seeds and 6 small differences, the t accepts on more than alpha / 2 of the
    equally likely swaps (4 jumps agreeing, 1/16, read as significant); the exact test does not."""
    base, arm = swaps(*diverged_pairs())
    assert accepted_share(base, arm, exact=False) > ALPHA / 2
    assert accepted_share(base, arm, exact=True) <= ALPHA / 2


@pytest.mark.parametrize("n", [5, 6, 8])
def test_the_sign_rule_accepts_an_exact_shift_at_most_half_alpha_of_the_time(n):
    """Every seed the same difference in size (0.02): of the 2^n equally likely swaps, the sign
    rule decides the two exact shifts (all one sign) and accepts the positive one only from 6
    seeds (0.5 ** 6 = 0.016 <= 0.025); a tie at one seed makes it no exact shift."""
    level = 0.01 * np.arange(n)  # the seeds differ; each seed's two arms by 0.02
    base, arm = swaps(list(0.90 + level), list(0.92 + level))
    effect, low, high, _ = _paired_t(base, arm, ALPHA)
    accepted = verdict(effect, low, high, 1e-6, flat=flat_rows(base, arm)) == "accept"
    shifts = np.isfinite(sign_rule(arm - base, base, arm))
    assert shifts.sum() == 2  # all +0.02 and all -0.02
    by_the_rule = (accepted & shifts).mean()
    assert by_the_rule == (0.5**n if n >= 6 else 0.0) and by_the_rule <= ALPHA / 2
    tied = arm.copy()
    tied[:, -1] = base[:, -1]
    assert not np.isfinite(sign_rule(tied - base, base, tied)).any()


def test_the_audit_and_the_decision_share_the_sign_rule():
    assert sign_rule(np.full((1, 6), 0.02))[0] == 0.5**6
    assert math.isnan(sign_rule(np.array([[0.02, 0.03, 0.02]]))[0])
    # float noise is no spread: equal decimal differences
    assert sign_rule(np.array([[0.91 - 0.90, 0.81 - 0.80, 0.71 - 0.70]]))[0] == 0.5**3


# --------------------------------------------------------------------------- planning defaults


def test_planning_defaults_to_paired_with_the_sd_of_differences():
    assert ps.seeds_needed(sd_of_differences=0.5, min_effect=1.0) == seeds_for_power(
        0.5, 1.0, ALPHA, 0.8, "paired"
    )
    assert ps.power(8, 1.0, sd_of_differences=0.7) == pytest.approx(
        ps.power(8, 1.0, sd_of_differences=0.7, test="paired")
    )
    assert ps.seeds_needed(1.0, 1.0, test="welch") == seeds_for_power(1.0, 1.0, ALPHA, 0.8)
    # the two sds plan the same differences at seed correlation rho: sd_diff = sd sqrt(2 (1 - rho))
    at_0 = ps.seeds_needed(sd_of_differences=math.sqrt(2), min_effect=1.0)
    at_09 = ps.seeds_needed(sd_of_differences=math.sqrt(0.2), min_effect=1.0)
    assert at_09 < ps.seeds_needed(1.0, 1.0, test="welch") <= at_0


def test_a_paired_plan_refuses_a_per_arm_sd_and_says_what_welch_needs():
    welch = ps.seeds_needed(0.004, 0.005, test="welch")
    with pytest.raises(ValueError, match="sd of the per-seed differences") as caught:
        ps.seeds_needed(0.004, 0.005)
    assert f"test='welch' would need {welch} seeds per arm" in str(caught.value)
    for call in (
        lambda: ps.power(10, 0.01, 0.005),
        lambda: ps.detectable_effect(0.004, 5),
        lambda: ps.accept_probability(10, 0.01, 0.005, min_effect=0.01),
    ):
        with pytest.raises(ValueError, match="give sd_of_differences"):
            call()
    with pytest.raises(ValueError, match="sd_of_differences is the paired test's"):
        ps.power(10, 0.01, sd_of_differences=0.005, test="welch")


def test_pilot_sd_of_differences_pairs_by_seed():
    base = {0: 0.90, 1: 0.92, 2: 0.91}
    arm = {2: 0.95, 0: 0.93, 1: 0.96}
    expected = float(np.std([0.03, 0.04, 0.04], ddof=1))
    assert ps.pilot_sd_of_differences(base, arm) == pytest.approx(expected)
    assert ps.pilot_sd_of_differences([0.90, 0.92, 0.91], [0.93, 0.96, 0.95]) == pytest.approx(
        expected
    )
    with pytest.raises(ValueError, match="pair"):
        ps.pilot_sd_of_differences(base, [0.93, 0.96, 0.95])
