"""The pure data functions (docs/data.md): ids, fingerprints, overlaps, the checks within and
across trials, the `invalid` reasons, the Data section's lines; and the contract's data rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner._data.checks import (
    cross_trial_violations,
    data_summary,
    fingerprint_differences,
    invalid_reasons,
    missing_required,
    overlap_violations,
    split_line,
    summary_lines,
)
from planner._data.splits import SplitError, SplitLog, as_ids, fingerprint, summarize
from planner._stats.decide import mark_invalid
from tests._scaling import growth

DATA = {
    "unit": "image",
    "independent": {"pairs": [["train", "test"]], "by": ["unit", "patient"]},
    "matched": True,
    "fixed": ["test"],
    "require": ["train", "test"],
}


# ------------------------------------------------------------------ ids and fingerprints


@pytest.mark.parametrize(
    "ids",
    [
        [3, 1, 2, 2],
        np.array([2, 3, 1]),
        pd.Series([1, 2, 3, 3, 3]),
        (1, 2, 3),
        np.array([3, 2, 1], dtype=np.uint16),
        pd.Index([3, 1, 2]),
    ],
)
def test_the_fingerprint_is_of_the_distinct_set_whatever_the_container_order_or_repeats(ids):
    summary, _ = summarize("train", ids)
    assert summary["fingerprint"] == summarize("train", [1, 2, 3])[0]["fingerprint"]
    assert summary["distinct"] == 3 and summary["presentations"] == len(ids)


def test_strings_from_lists_arrays_and_pandas_columns_agree_and_differ_from_ints():
    a = summarize("t", ["b", "a", "a"])[0]["fingerprint"]
    assert a == summarize("t", np.array(["a", "b"]))[0]["fingerprint"]
    assert a == summarize("t", pd.Series(["a", "b", "b"], dtype=object))[0]["fingerprint"]
    assert a == summarize("t", pd.Series(["a", "b"], dtype="category"))[0]["fingerprint"]
    assert a == summarize("t", list(np.array(["a", "b"])))[0]["fingerprint"]  # numpy str_ elements
    assert (
        summarize("t", list(np.arange(3)))[0]["fingerprint"]
        == summarize("t", [0, 1, 2])[0]["fingerprint"]
    )
    assert summarize("t", ["1", "2"])[0]["fingerprint"] != summarize("t", [1, 2])[0]["fingerprint"]
    # lengths are hashed: "ab" + "c" is not "a" + "bc"
    assert (
        summarize("t", ["ab", "c"])[0]["fingerprint"]
        != summarize("t", ["a", "bc"])[0]["fingerprint"]
    )


def test_one_different_id_changes_the_fingerprint():
    assert fingerprint(np.arange(1000)) != fingerprint(np.r_[np.arange(999), 1000])


@pytest.mark.parametrize(
    "ids, says",
    [
        ([1.5, 2.0], "floats"),
        (["a", 1], "only ints or only strings"),
        ([[1, 2], [3, 4]], "one-dimensional"),
        ("abc", "list, array or column"),
        ([True, False], "bool"),
        (pd.Series([1, None, 3]), "floats"),
    ],
)
def test_ids_that_are_not_ints_or_strings_are_refused_with_a_sentence(ids, says):
    with pytest.raises(SplitError, match=says):
        as_ids(ids, "ids")


def test_groups_must_be_aligned_and_named():
    with pytest.raises(SplitError, match="has 2 values for 3 ids"):
        summarize("train", [1, 2, 3], {"patient": ["a", "b"]})
    with pytest.raises(SplitError, match="a group name"):
        summarize("train", [1, 2, 3], {"unit": [1, 2, 3]})
    with pytest.raises(SplitError, match="mapping"):
        summarize("train", [1, 2, 3], ["a", "b", "c"])


def _grouped_split(n: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(0)
    ids = rng.permutation(n)
    patients = np.array([f"P{i:07d}" for i in ids // 8])
    cut = n * 4 // 5
    log = SplitLog()
    train = log.add("train", ids[:cut], {"patient": patients[:cut]})
    test = log.add("test", ids[cut:], {"patient": patients[cut:]})
    return train, test


def test_a_million_row_split_with_a_group_is_logged_and_the_cost_grows_linearly():
    train, test = _grouped_split(1_000_000)
    assert train["presentations"] == 800_000 and test["distinct"] == 200_000
    assert test["overlap"]["train"]["unit"] == 0 and test["overlap"]["train"]["patient"] > 0
    # sorting makes it n log n: about 4.5x from 100,000 rows to 400,000; a pairwise overlap would
    # be 16x
    grows = growth(lambda n: lambda: _grouped_split(n), 100_000)
    assert grows < 8, f"4x the rows took {grows:.0f}x the time"


def test_the_split_log_counts_overlaps_with_earlier_splits_and_refuses_a_changed_set():
    log = SplitLog()
    log.add("train", [1, 2, 3, 4], {"patient": ["a", "a", "b", "c"]})
    test = log.add("test", [4, 5, 6], {"patient": ["c", "d", "d"]})
    assert test["overlap"] == {"train": {"unit": 1, "patient": 1}}
    assert (
        log.add("train", [4, 3, 2, 1, 1], {"patient": ["c", "b", "a", "a", "a"]})["presentations"]
        == 5
    )
    with pytest.raises(SplitError, match="logged again with different"):
        log.add("train", [1, 2, 3], {"patient": ["a", "a", "b"]})


# ------------------------------------------------------------------ within a trial


def _trial(splits: dict) -> dict:
    log = SplitLog()
    return {name: log.add(name, *args) for name, args in splits.items()}


def test_split_overlap_counts_units_and_groups_of_declared_pairs_only():
    splits = _trial(
        {
            "train": ([1, 2, 3], {"patient": ["a", "b", "c"]}),
            "val": ([3], {"patient": ["c"]}),
            "test": ([4, 5], {"patient": ["c", "d"]}),
        }
    )
    found, problems = overlap_violations(splits, DATA)
    assert problems == []
    assert found == [
        {
            "kind": "split_overlap",
            "splits": ["train", "test"],
            "by": "patient",
            "count": 1,
            "message": "1 patient is in both train and test",
        }
    ]  # train/val is not a declared pair
    clean = _trial({"train": ([1, 2], {"patient": ["a", "b"]}), "test": ([3], {"patient": ["c"]})})
    assert overlap_violations(clean, DATA) == ([], [])


def test_a_declared_group_a_split_did_not_log_is_a_problem():
    splits = _trial({"train": ([1, 2], None), "test": ([3], None)})
    found, problems = overlap_violations(splits, DATA)
    assert found == [] and "was logged without a 'patient' group" in problems[0]


def test_missing_required_splits():
    assert missing_required({"train": {}}, DATA) == ["test"]
    assert missing_required({"train": {}, "test": {}}, DATA) == []


# ------------------------------------------------------------------ across trials


def _record(trial_id, arm, seed, splits, phase="confirm", violations=()):
    return {
        "trial_id": trial_id,
        "arm": arm,
        "seed": seed,
        "phase": phase,
        "splits": _trial(splits),
        "violations": list(violations),
    }


def test_unmatched_data_names_the_split_and_the_arms():
    base = _record("b0", "base", 0, {"train": ([1, 2, 3], None), "test": ([9], None)})
    same = _record("t0", "treat", 0, {"train": ([3, 2, 1, 1], None), "test": ([9], None)})
    other = _record("t0", "treat", 0, {"train": ([1, 2, 4], None), "test": ([9], None)})
    assert cross_trial_violations(same, [base], DATA) == []
    [v] = cross_trial_violations(other, [base], DATA)
    assert (
        v["kind"] == "unmatched_data" and v["split"] == "train" and v["arms"] == ["base", "treat"]
    )
    assert v["message"] == (
        "split train differs between arms base and treat at seed 0: "
        "3 distinct images vs 3 distinct images, a different set"
    )
    assert cross_trial_violations(other, [base], {**DATA, "matched": False}) == []
    another_seed = _record("t1", "treat", 1, {"train": ([1, 2, 4], None), "test": ([9], None)})
    assert cross_trial_violations(another_seed, [base], DATA) == []
    lacking = _record("t0", "treat", 0, {"test": ([9], None)})
    [v] = cross_trial_violations(lacking, [base], DATA)
    assert (
        v["by"] == "split"
        and "arm base logged split train at seed 0 and arm treat did not" in v["message"]
    )


def test_split_varies_for_a_fixed_split_across_seeds():
    first = _record("b0", "base", 0, {"train": ([1, 2], None), "test": ([9, 10], None)})
    same_test = _record("b1", "base", 1, {"train": ([1, 3], None), "test": ([10, 9], None)})
    new_test = _record("b2", "base", 2, {"train": ([1, 3], None), "test": ([9, 11], None)})
    assert cross_trial_violations(same_test, [first], DATA) == []  # train may vary: it is not fixed
    [v] = cross_trial_violations(new_test, [first, same_test], DATA)
    assert v["kind"] == "split_varies" and v["split"] == "test" and v["seeds"] == [0, 2]


def test_invalid_reasons_touch_the_arm_or_every_arm_through_the_baseline():
    overlap = {"kind": "split_overlap", "message": "3 patients are in both train and test"}
    unmatched = {"kind": "unmatched_data", "arms": ["base", "a"], "message": "split train differs"}
    records = [{"trial_id": "a0", "arm": "a", "violations": [overlap]}]
    assert set(invalid_reasons(records, "base", ["a", "b"])) == {"a"}
    records = [{"trial_id": "base0", "arm": "base", "violations": [overlap]}]
    assert set(invalid_reasons(records, "base", ["a", "b"])) == {"a", "b"}
    records = [{"trial_id": "a0", "arm": "a", "violations": [unmatched]}]
    reasons = invalid_reasons(records, "base", ["a", "b"])
    assert set(reasons) == {"a"} and reasons["a"].startswith(
        "Invalid: unmatched_data in a0: split train differs"
    )
    assert (
        invalid_reasons(
            [{"trial_id": "x", "arm": "a", "violations": [{"kind": "heldout_in_tuning"}]}],
            "base",
            ["a"],
        )
        == {}
    )


def test_mark_invalid_keeps_the_measurement_and_says_why():
    rows = [
        {"arm": "a", "decision": "accept", "effect": 0.2, "reason": "Improvement..."},
        {"arm": "b", "decision": "reject", "effect": -0.1, "reason": "Worse."},
    ]
    out = mark_invalid(rows, {"a": "Invalid: leak."}, "data")
    assert out[0]["decision"] == "invalid" and out[0]["effect"] == 0.2
    assert out[0]["reason"] == "Invalid: leak. Measured: Improvement..."
    assert out[1] == rows[1] and rows[0]["decision"] == "accept"  # the input rows are not changed


def test_fingerprint_differences_for_reeval():
    logged = _record("c", "a", 0, {"train": ([1, 2], None)})
    assert fingerprint_differences(logged, _record("r", "a", 0, {"train": ([2, 1], None)})) == []
    [said] = fingerprint_differences(logged, _record("r", "a", 0, {"train": ([1, 3], None)}))
    assert said.startswith("split train differs (unit fingerprint")


# ------------------------------------------------------------------ what the run shows


def test_the_split_line_reads_like_a_sentence():
    summary, _ = summarize(
        "train", np.repeat(np.arange(3000), 4), {"patient": np.repeat(np.arange(410), 30)[:12000]}
    )
    assert (
        split_line("train", summary, {"unit": "image"})
        == "train: 12,000 presentations of 3,000 distinct images from 400 patients"
    )


def test_the_data_summary_over_trials():
    records = [
        _record(
            "b0",
            "base",
            0,
            {"train": ([1, 2, 2], {"patient": ["a", "b", "b"]}), "test": ([3], {"patient": ["b"]})},
            violations=[
                {"kind": "split_overlap", "message": "1 patient is in both train and test"}
            ],
        ),
        _record(
            "b1",
            "base",
            1,
            {"train": ([1, 4, 4], {"patient": ["a", "c", "c"]}), "test": ([3], {"patient": ["b"]})},
        ),
    ]
    summary = data_summary(records, DATA)
    assert summary["violations"] == {"split_overlap": 1} and summary["trials_with_splits"] == 2
    lines = summary_lines(summary, DATA)
    assert lines[0] == (
        "train: 3 presentations of 2 distinct images from 2 patients "
        "(2 trials, 2 different sets, varying between seeds)"
    )
    assert lines[2] == (
        "  train and test share 0 images, 1 patient (the most in one trial; declared independent "
        "by patient: split_overlap)"
    )
    assert lines[-1] == "data violations: split_overlap 1"
    assert summary_lines(data_summary([], DATA), DATA)[0].startswith("no split logged")


def test_the_data_summary_says_what_the_sets_varied_with_seeds_or_arms():
    """3 seeds, 2 arms: the test set differs between the arms (not the seeds); train differs by
    seed only."""

    def rec(arm, seed):
        return _record(
            f"{arm}{seed}",
            arm,
            seed,
            {"train": ([seed, 10 + seed], None), "test": ([100 if arm == "base" else 200], None)},
        )

    records = [rec(arm, seed) for seed in range(3) for arm in ("base", "treat")]
    lines = {line.split(":")[0]: line for line in summary_lines(data_summary(records, DATA), DATA)}
    assert lines["train"].endswith("(6 trials, 3 different sets, varying between seeds)")
    assert lines["test"].endswith(
        "(6 trials, 2 different sets, varying between arms at the same seed)"
    )
    assert "over 3 seeds" not in lines["test"]
    both = records + [
        _record("x", "treat", 0, {"train": ([7], None), "test": ([300], None)}, phase="tune")
    ]
    rows = {r["split"]: r for r in data_summary(both, DATA)["splits"]}
    assert rows["train"]["varies"] == ["seed", "arm", "trial"]
