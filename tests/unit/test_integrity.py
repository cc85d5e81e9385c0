"""Issue 20/21/24, the integrity parts of _core, _data, _audit, _contract and _store: each test fails on the
code before it and passes after."""

from pathlib import Path

from planner._core.records import error_groups, error_key
from planner._trial.protocol import TrialSpec, run_trial

REPO = str(Path(__file__).resolve().parents[2])


# ---------------------------------------------------------------- #20.5: errors named once, with a count


def test_five_failures_that_differ_only_by_a_path_are_one_group_with_a_count(tmp_path):
    records = []
    for i in range(5):
        tid = f"tune-b-s100-t{i:03d}"
        spec = TrialSpec(trial_id=tid, phase="tune", arm="b", seed=100, index=i, params={}, config={}, budget=2,
                         dir=str(tmp_path / "trials" / tid), trainable="tests.trainables.integrity:opens_a_missing_file",
                         metric="acc", path=(REPO,))
        records.append(run_trial(spec))
    assert all(r["status"] == "failed" for r in records)
    messages = {r["errors"][-1]["message"] for r in records}
    assert len(messages) == 5  # each names its own trial's folder
    groups = error_groups(records)
    assert len(groups) == 1, groups
    assert groups[0]["count"] == 5 and groups[0]["first"] == "tune-b-s100-t000"
    assert groups[0]["error"].startswith("FileNotFoundError: ") and "tune-b-s100-t000" in groups[0]["error"]


def test_error_key_normalizes_trial_ids_paths_hex_ids_and_numbers_and_nothing_else():
    assert error_key("KeyError: 'lr'") == "KeyError: 'lr'"
    assert error_key("RuntimeError: tune-b-s100-t004 diverged at step 12 (lr=1.5e-3)") == \
        error_key("RuntimeError: tune-b-s100-t007 diverged at step 3 (lr=0.02)")
    assert error_key("OSError: object at 0x7f3a2b1c, run 3f2a9c1d4e5b6a7f") == \
        error_key("OSError: object at 0x55aa, run 0a1b2c3d4e5f6789")
    assert error_key("confirm-treat-arm-s3 lost") == error_key("confirm-treat-arm-s11 lost")
    assert error_key("python: can't open file '/work/a/train.py'") == error_key("python: can't open file 'b/x.py'")
    # what names the failure stays: the key, the metric, a layer name with a digit
    assert error_key("KeyError: 'lr'") != error_key("KeyError: 'wd'")
    assert error_key("metric val_acc2 never reported") != error_key("metric val_acc3 never reported")
    assert error_key("conv1 failed") != error_key("conv2 failed")


def test_grouped_errors_keep_their_type_apart_and_their_order_of_first_occurrence():
    def failed(tid, kind, message):
        return {"trial_id": tid, "status": "failed", "errors": [{"type": kind, "message": message}]}

    groups = error_groups([failed("t0", "ValueError", "bad 1"), failed("t1", "KeyError", "bad 2"),
                           failed("t2", "ValueError", "bad 3"), {"trial_id": "t3", "status": "completed"}])
    assert groups == [{"error": "ValueError: bad 1", "count": 2, "first": "t0"},
                      {"error": "KeyError: bad 2", "count": 1, "first": "t1"}]
