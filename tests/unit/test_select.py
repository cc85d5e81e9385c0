"""Selection: complete full-exposure trials only, final or mean_last_k, ties to the earlier
trial."""

from planner._stats.select import score, select_arm


def rec(index, values, status="completed", seed=100, arm="a", exposure=None, params=None):
    reports = [{"step": i + 1, "metrics": {"acc": v}, "time_s": 0.1} for i, v in enumerate(values)]
    return {
        "trial_id": f"tune-{arm}-s{seed}-t{index:03d}",
        "phase": "tune",
        "arm": arm,
        "seed": seed,
        "index": index,
        "params": params or {"lr": index},
        "status": status,
        "exposure": exposure if exposure is not None else len(values),
        "reports": reports,
    }


def pick(records, **kw):
    args = {"metric": "acc", "mode": "max", "exposure": 4, "seed_order": [100, 101]}
    args.update(kw)
    return select_arm("a", records, **args)


def test_final_rule_uses_the_last_report_not_the_best_step():
    peaked = rec(0, [0.1, 0.9, 0.2, 0.3])
    steady = rec(1, [0.1, 0.2, 0.4, 0.5])
    chosen = pick([peaked, steady])
    assert (
        chosen.trial_id == steady["trial_id"] and chosen.score == 0.5 and chosen.params == {"lr": 1}
    )


def test_early_stopped_and_short_trials_are_never_selected():
    stopped = rec(0, [0.99, 0.99], status="early_stopped")
    short = rec(1, [0.98, 0.98, 0.98], status="completed")  # completed status but not full exposure
    failed = rec(2, [0.97, 0.97, 0.97, 0.97], status="failed")
    ok = rec(3, [0.1, 0.1, 0.1, 0.2])
    chosen = pick([stopped, short, failed, ok])
    assert chosen.trial_id == ok["trial_id"] and chosen.candidates == 1 and chosen.trials == 4


def test_nothing_to_select_says_why():
    chosen = pick([rec(0, [0.5, 0.5], status="early_stopped")])
    assert chosen.trial_id is None and "full exposure" in chosen.reason
    assert pick([]).trial_id is None


def test_ties_go_to_the_earlier_trial_then_earlier_tuning_seed():
    a = rec(2, [0.1, 0.2, 0.3, 0.5])
    b = rec(1, [0.4, 0.4, 0.4, 0.5])
    assert pick([a, b]).trial_id == b["trial_id"]
    late_seed = rec(0, [0.5] * 4, seed=101)
    early_seed = rec(3, [0.5] * 4, seed=100)
    assert pick([late_seed, early_seed]).trial_id == early_seed["trial_id"]


def test_mode_min_prefers_lower():
    low, high = rec(0, [1, 1, 1, 0.2]), rec(1, [1, 1, 1, 0.3])
    assert pick([high, low], mode="min").trial_id == low["trial_id"]


def test_mean_last_k_averages_the_last_k_reports():
    spiky = rec(0, [0.1, 0.1, 0.1, 0.9])  # final 0.9, mean of last 2 = 0.5
    steady = rec(1, [0.1, 0.1, 0.6, 0.6])  # final 0.6, mean of last 2 = 0.6
    assert pick([spiky, steady]).trial_id == spiky["trial_id"]
    chosen = pick([spiky, steady], rule="mean_last_k", k=2)
    assert chosen.trial_id == steady["trial_id"] and abs(chosen.score - 0.6) < 1e-12


def test_non_finite_scores_are_not_candidates():
    nan = rec(0, [0.1, 0.1, 0.1, 0.1])
    nan["reports"][-1]["metrics"]["acc"] = "nan"
    assert score(nan, "acc") is None
    ok = rec(1, [0.0, 0.0, 0.0, 0.0])
    assert pick([nan, ok]).trial_id == ok["trial_id"]


def test_other_arms_records_are_ignored():
    mine = rec(0, [0.1] * 4)
    theirs = rec(1, [0.9] * 4, arm="b")
    assert pick([mine, theirs]).trial_id == mine["trial_id"]


def test_a_continued_trial_is_scored_on_the_reports_its_checkpoint_held_too():
    """mean_last_k of 3: the continued trial's record reports steps 4-5 only; its checkpoint held
    1-3."""
    import pytest

    def rep(step, value):
        return {"step": step, "metrics": {"acc": value}}

    whole = {"reports": [rep(1, 0.1), rep(2, 0.2), rep(3, 0.3), rep(4, 0.4), rep(5, 0.5)]}
    continued = {
        "reports": [rep(4, 0.4), rep(5, 0.5)],
        "resumed_from": {"path": "x", "reports": [rep(1, 0.1), rep(2, 0.2), rep(3, 0.3)]},
    }
    assert (
        score(continued, "acc", "mean_last_k", 3)
        == score(whole, "acc", "mean_last_k", 3)
        == pytest.approx(0.4)
    )
    # a run folder is untrusted: held reports that overlap the record's own, go back, or are
    # malformed are left out
    odd = {
        "reports": [rep(4, 0.4), rep(5, 0.5)],
        "resumed_from": {
            "reports": [rep(3, 0.3), "x", {"step": True, "metrics": {}}, rep(2, 9.0), rep(4, 9.0)]
        },
    }
    assert score(odd, "acc", "mean_last_k", 3) == pytest.approx(0.4)
    assert (
        score(
            {"reports": [rep(4, 0.4)], "resumed_from": {"reports": "nope"}}, "acc", "mean_last_k", 3
        )
        == 0.4
    )
