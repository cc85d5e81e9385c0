"""The decision rule on hand-made values: tests agree with scipy, the rule and the correction."""

import json
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from planner._contract.model import Acceptance
from planner._stats.decide import (
    DECISION_KEYS,
    Outcome,
    adjusted_alphas,
    compare,
    decide,
    permutation_splits,
    smallest_p_value,
    verdict,
)

BASE = [0.80, 0.82, 0.81, 0.79, 0.83]
ARM = [0.84, 0.85, 0.83, 0.86, 0.84]
SEEDS = [0, 1, 2, 3, 4]


def results(base=BASE, **arms):
    out = {"base": list(zip(SEEDS, base, strict=True))}
    out.update({name: list(zip(SEEDS, values, strict=True)) for name, values in arms.items()})
    return out


def test_welch_matches_scipy():
    c = compare(BASE, ARM, mode="max", test="welch", alpha=0.05)
    ref = stats.ttest_ind(ARM, BASE, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert c.effect == pytest.approx(np.mean(ARM) - np.mean(BASE))
    assert (c.ci_low, c.ci_high, c.p_value) == pytest.approx((ci.low, ci.high, ref.pvalue))
    assert (c.n_baseline, c.n_arm) == (5, 5)


def test_min_mode_turns_the_effect_around():
    up = compare(BASE, ARM, mode="max", test="welch", alpha=0.05)
    down = compare(BASE, ARM, mode="min", test="welch", alpha=0.05)
    assert down.effect == pytest.approx(-up.effect)
    assert (down.ci_low, down.ci_high) == pytest.approx((-up.ci_high, -up.ci_low))


def test_paired_pairs_by_seed_and_reports_dropped_seeds():
    c = compare(
        BASE,
        ARM[:4] + [9.0],
        mode="max",
        test="paired",
        alpha=0.05,
        baseline_seeds=[0, 1, 2, 3, 4],
        arm_seeds=[3, 2, 1, 0, 7],
    )
    # arm seeds 3,2,1,0 carry ARM[0..3]: pairs (BASE[0], ARM[3]), (BASE[1], ARM[2]), ...
    ref = stats.ttest_rel([ARM[3], ARM[2], ARM[1], ARM[0]], BASE[:4])
    assert c.p_value == pytest.approx(ref.pvalue)
    assert c.n_unpaired == 2 and c.n_arm == c.n_baseline == 4


def test_bootstrap_p_is_the_exact_permutation_p():
    c = compare(BASE, ARM, mode="max", test="bootstrap", alpha=0.05)
    ref = stats.permutation_test(
        (ARM, BASE),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type="independent",
        n_resamples=np.inf,
        vectorized=True,
    )
    assert c.p_value == pytest.approx(ref.pvalue)


def test_bootstrap_counts_ties_despite_rounding():
    base, arm = (
        [0.7, 0.8, 0.9, 0.8, 0.7],
        [0.9, 0.8, 0.7, 0.9, 0.8],
    )  # many sums tie, up to float error
    c = compare(base, arm, mode="max", test="bootstrap", alpha=0.05)
    ref = stats.permutation_test(
        (arm, base),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type="independent",
        n_resamples=np.inf,
        vectorized=True,
    )
    assert c.p_value == pytest.approx(ref.pvalue)
    mirrored = compare(arm, base, mode="max", test="bootstrap", alpha=0.05)
    assert mirrored.p_value == pytest.approx(c.p_value)


def test_bootstrap_ci_is_the_set_of_shifts_the_permutation_test_keeps():
    alpha = 0.1
    c = compare(BASE, ARM, mode="max", test="bootstrap", alpha=alpha)

    def p_upper(delta):  # one-sided p of "arm - delta better than base"
        return stats.permutation_test(
            (np.array(ARM) - delta, BASE),
            lambda x, y, axis: x.mean(axis) - y.mean(axis),
            permutation_type="independent",
            n_resamples=np.inf,
            vectorized=True,
            alternative="greater",
        ).pvalue

    assert p_upper(c.ci_low - 1e-9) <= alpha / 2 < p_upper(c.ci_low + 1e-9)


def test_bootstrap_at_three_seeds_cannot_reach_005_and_says_so():
    assert smallest_p_value(3, 3) == pytest.approx(0.1)
    c = compare([0.0, 0.1, 0.2], [5.0, 5.1, 5.2], mode="max", test="bootstrap", alpha=0.05)
    assert c.ci_low == -math.inf and c.ci_high == math.inf
    (d,) = decide(
        Acceptance(min_effect=1, test="bootstrap"),
        "max",
        {"b": [(0, 0.0), (1, 0.1), (2, 0.2)], "a": [(0, 5.0), (1, 5.1), (2, 5.2)]},
        "b",
        planned_seeds=[0, 1, 2],
    )
    assert d.decision == "inconclusive" and "cannot reach alpha" in d.reason
    assert json.loads(json.dumps(d.as_dict(), allow_nan=False))["ci_low"] is None


def test_random_permutations_are_reproducible_and_include_the_observed_split():
    a, b = permutation_splits(12, 12, rng_seed=3), permutation_splits(12, 12, rng_seed=3)
    assert np.array_equal(a, b) and a[0, :12].all() and not a[0, 12:].any()
    assert len(permutation_splits(5, 5)) == math.comb(10, 5)


@pytest.mark.parametrize("test", ["welch", "paired", "bootstrap"])
def test_zero_variance_is_no_evidence_not_certainty(test):
    """A spread of zero once gave a CI of width zero and p = 0 (accept) or CI [0, 0] (reject).
    Paired, arms that vary with every seed the same difference are the sign rule's: at 3 seeds
    only 0.5 ** 3, no CI."""
    for base, arm in (([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]), ([1.0, 1.0], [1.0, 1.0])):
        c = compare(base, arm, mode="max", test=test, alpha=0.05)
        assert (
            c.degenerate
            and (c.ci_low, c.ci_high) == (-math.inf, math.inf)
            and math.isnan(c.p_value)
        )
    if test == "paired":
        c = compare([1.0, 1.5, 1.2], [2.0, 2.5, 2.2], mode="max", test=test, alpha=0.05)
        assert c.exact_shift and c.p_value == 2 * 0.5**3
        assert (c.ci_low, c.ci_high) == (-math.inf, math.inf)


def paired(min_effect=0.01, alpha=0.05, rule="estimate"):
    return Acceptance(min_effect=min_effect, alpha=alpha, test="paired", rule=rule)


def shifted(n, shift):
    seeds = list(range(n))
    base = [0.80 + 0.013 * s for s in seeds]
    return seeds, {
        "b": list(zip(seeds, base, strict=True)),
        "a": [(s, v + shift) for s, v in zip(seeds, base, strict=True)],
    }


def test_an_exact_shift_on_enough_seeds_is_accepted_by_the_sign_rule():
    """Every seed the same difference: no spread for a t, but 6 seeds agreeing happen by chance
    with p = 0.5 ** 6 = 0.016 one-sided, within the 0.025 an accept needs."""
    seeds, res = shifted(6, 0.02)
    (d,) = decide(paired(), "max", res, "b", planned_seeds=seeds)
    assert d.decision == "accept" and d.ci_low == pytest.approx(0.02)
    assert d.p_value == pytest.approx(2 * 0.5**6)
    assert "sign rule" in d.reason and "0.5^6 = 0.016" in d.reason
    (d,) = decide(paired(rule="margin"), "max", res, "b", planned_seeds=seeds)
    assert d.decision == "accept"


def test_an_exact_shift_on_too_few_seeds_is_inconclusive():
    seeds, res = shifted(5, 0.02)
    (d,) = decide(paired(), "max", res, "b", planned_seeds=seeds)
    assert d.decision == "inconclusive" and math.isinf(d.ci_low) and math.isinf(d.ci_high)
    assert "0.5^5 = 0.031" in d.reason and "6 seeds or more" in d.reason
    # Holm at 2 arms tests the first at alpha / 2: the sign rule then needs 7 seeds
    seeds, res = shifted(6, 0.02)
    res["c"] = res["a"]
    first = decide(paired(), "max", res, "b", planned_seeds=seeds)[0]
    assert first.alpha_adjusted == 0.025 and first.decision == "inconclusive"
    assert "7 seeds or more" in first.reason


def test_an_exact_shift_below_min_effect_or_worse_is_rejected():
    seeds, res = shifted(6, 0.005)
    (d,) = decide(paired(), "max", res, "b", planned_seeds=seeds)
    assert d.decision == "reject" and "too small to matter" in d.reason
    seeds, res = shifted(6, -0.02)
    (d,) = decide(paired(), "max", res, "b", planned_seeds=seeds)
    assert d.decision == "reject" and d.ci_high == pytest.approx(-0.02)
    seeds, res = shifted(6, 0.02)
    (d,) = decide(paired(), "min", res, "b", planned_seeds=seeds)  # lower is better: worse
    assert d.decision == "reject"


def test_a_diverged_seed_is_decided_by_the_exact_sign_flip_test():
    """4 of 4 diverged seeds on one side with 6 small differences: the t (9 df) read it as p near
    0.03, the sign-flip test as the 1/16 chance it is; it cannot accept."""
    seeds = list(range(10))
    small = [0.001, -0.002, 0.0015, 0.0, -0.001, 0.002]
    base = [(s, math.nan, "diverged") for s in seeds[:4]] + [(s, 0.9) for s in seeds[4:]]
    arm = [(s, 0.9) for s in seeds[:4]] + [
        (s, 0.9 + e) for s, e in zip(seeds[4:], small, strict=True)
    ]
    res = {"b": base, "a": arm}
    (d,) = decide(paired(), "max", res, "b", planned_seeds=seeds, diverged_value=0.0)
    t = stats.ttest_1samp([0.9] * 4 + small, 0.0, alternative="greater").pvalue
    assert t < 0.025  # the t alone would have accepted
    assert d.decision == "inconclusive" and "exact sign-flip test" in d.reason
    assert d.p_value > 0.05


@pytest.mark.parametrize(
    ("effect", "low", "high", "expected"),
    [
        (0.05, 0.01, 0.09, "accept"),
        (0.005, 0.001, 0.009, "reject"),  # real but too small to matter
        (0.005, 0.001, 0.02, "inconclusive"),  # CI above 0, effect below the minimum
        (0.03, -0.01, 0.07, "inconclusive"),
        (-0.03, -0.05, -0.01, "reject"),
        (0.01, 0.0, 0.02, "inconclusive"),  # CI low must be strictly above 0
    ],
)
def test_rule(effect, low, high, expected):
    assert verdict(effect, low, high, min_effect=0.01) == expected


def test_holm_levels_step_down_and_stop():
    assert adjusted_alphas([0.01, 0.04, 0.02], 0.05, "holm") == pytest.approx(
        [0.05 / 3, 0.05, 0.025]
    )
    assert adjusted_alphas([0.03, 0.001, 0.2], 0.05, "holm") == pytest.approx(
        [0.025, 0.05 / 3, 0.025]
    )
    assert adjusted_alphas([0.3, math.nan], 0.05, "holm") == pytest.approx([0.025, 0.025])
    assert adjusted_alphas([0.3, 0.1], 0.05, "bonferroni") == [0.025, 0.025]
    assert adjusted_alphas([0.3, 0.1], 0.05, "none") == [0.05, 0.05]


def test_holm_ci_excludes_zero_exactly_when_holm_rejects():
    rng = np.random.default_rng(0)
    for _ in range(50):
        base = rng.normal(size=5)
        arms = {f"a{i}": base + rng.normal(0.8, 0.5, size=5) * rng.integers(0, 2) for i in range(3)}
        res = {"base": list(zip(SEEDS, base, strict=True))} | {
            k: list(zip(SEEDS, v, strict=True)) for k, v in arms.items()
        }
        ds = decide(
            Acceptance(min_effect=0.1, test="paired"), "max", res, "base", planned_seeds=SEEDS
        )
        p = sorted(
            (d.p_value for d in ds), key=lambda v: (math.isnan(v), v)
        )  # degenerate (NaN) last
        holm_rejects = 0
        for rank, value in enumerate(p):
            if not value <= 0.05 / (3 - rank):
                break
            holm_rejects += 1
        assert sum((d.ci_low > 0) or (d.ci_high < 0) for d in ds) == holm_rejects


def test_decide_accepts_rejects_and_writes_json():
    acc = Acceptance(min_effect=0.03, alpha=0.05, test="welch", correction="holm")
    good = [v + 0.06 for v in reversed(BASE)]
    ds = decide(
        acc,
        "max",
        results(good=good, same=[v + 0.001 for v in reversed(BASE)]),
        "base",
        planned_seeds=SEEDS,
        metric="val_acc",
    )
    by = {d.arm: d for d in ds}
    assert by["good"].decision == "accept" and by["good"].alpha_adjusted == pytest.approx(0.025)
    assert by["same"].decision == "reject" and by["same"].alpha_adjusted == pytest.approx(0.05)
    assert "val_acc" in by["good"].reason
    d = json.loads(json.dumps(by["good"].as_dict(), allow_nan=False))
    assert tuple(d) == DECISION_KEYS


def test_missing_failed_or_diverged_trials_make_arms_incomplete():
    acc = Acceptance(min_effect=0.01)
    res = results(good=ARM)
    res["good"] = res["good"][:4]  # seed 4 pending
    (d,) = decide(acc, "max", res, "base", planned_seeds=SEEDS)
    assert d.decision == "incomplete" and "seed 4 not run yet" in d.reason
    assert d.as_dict()["effect"] is None

    res = results(good=ARM)
    res["base"][1] = Outcome(1, None, "failed")
    (d,) = decide(acc, "max", res, "base", planned_seeds=SEEDS)
    assert d.decision == "incomplete" and "baseline" in d.reason and "failed" in d.reason

    res = results(good=ARM)
    res["good"][0] = (0, 0.9, "timeout")
    res["good"][1] = (1, None)
    (d,) = decide(acc, "max", res, "base", planned_seeds=SEEDS)
    assert d.reason == "Incomplete: in good, seed 0 timed out; seed 1 reported no value."

    res = results(good=ARM)
    res["good"][2] = (2, math.nan, "diverged")
    (d,) = decide(acc, "max", res, "base", planned_seeds=SEEDS)
    assert d.decision == "incomplete" and "diverged" in d.reason
    (d,) = decide(acc, "max", res, "base", planned_seeds=SEEDS, diverged_value=0.0)
    assert d.decision != "incomplete" and d.n_arm == 5
    assert d.effect == pytest.approx(np.mean([0.84, 0.85, 0.0, 0.86, 0.84]) - np.mean(BASE))

    res = results(good=ARM)
    res["good"][3] = (3, math.inf)  # a non-finite "completed" value is a divergence
    (d,) = decide(acc, "max", res, "base", planned_seeds=SEEDS)
    assert d.decision == "incomplete"


def test_an_incomplete_arm_still_counts_in_the_correction():
    acc = Acceptance(min_effect=0.01, correction="bonferroni")
    res = results(good=ARM, other=ARM)
    res["other"] = res["other"][:2]
    by = {d.arm: d for d in decide(acc, "max", res, "base", planned_seeds=SEEDS)}
    assert by["good"].alpha_adjusted == pytest.approx(0.025)
    assert by["other"].decision == "incomplete"


def test_bad_input_is_refused():
    acc = Acceptance(min_effect=0.01)
    with pytest.raises(ValueError, match="not a planned"):
        decide(acc, "max", {"base": [(9, 1.0)], "a": []}, "base", planned_seeds=SEEDS)
    with pytest.raises(ValueError, match="two outcomes"):
        decide(acc, "max", {"base": [(0, 1.0), (0, 2.0)], "a": []}, "base", planned_seeds=SEEDS)
    with pytest.raises(ValueError, match="unknown test"):
        compare(BASE, ARM, mode="max", test="mann", alpha=0.05)


@settings(max_examples=60, deadline=None)
@example([0.0, 0.0], [7e-131, 1e-130], "welch", 0.05)  # Welch's df once underflowed to NaN here
@given(
    st.lists(st.floats(-5, 5), min_size=2, max_size=7),
    st.lists(st.floats(-5, 5), min_size=2, max_size=7),
    st.sampled_from(["welch", "bootstrap"]),
    st.sampled_from([0.01, 0.05, 0.2]),
)
def test_ci_and_p_agree_and_min_mode_mirrors_max(base, arm, test, alpha):
    up = compare(base, arm, mode="max", test=test, alpha=alpha)
    excludes_zero = up.ci_low > 0 or up.ci_high < 0
    if not math.isclose(up.p_value, alpha, rel_tol=1e-9):
        assert excludes_zero == (up.p_value <= alpha)
    assert up.ci_low <= up.effect <= up.ci_high
    down = compare([-v for v in base], [-v for v in arm], mode="min", test=test, alpha=alpha)
    assert (down.effect, down.ci_low, down.ci_high) == pytest.approx(
        (up.effect, up.ci_low, up.ci_high)
    )
