"""The worker's side of the data checks, in-process (no Ray): log_split on the Trial, split_overlap,
a missing required split or group, bad ids, and the splits that travel with the reports."""

from __future__ import annotations

import copy
from pathlib import Path

from planner._trial.protocol import run_trial
from planner._trial.spec import TrialSpec
from tests.trainables.splits import DEFAULTS

REPO = str(Path(__file__).resolve().parents[2])
DATA = {
    "unit": "row",
    "independent": {"pairs": [["train", "test"], ["train", "val"]], "by": ["unit", "patient"]},
    "matched": True,
    "fixed": ["test"],
    "require": ["train", "val", "test"],
}


def spec(tmp_path, *, data=DATA, fn="train", tid="t", **split):
    config = copy.deepcopy(DEFAULTS)
    config["data"].update(split)
    return TrialSpec(
        trial_id=tid,
        phase="confirm",
        arm="a",
        seed=1,
        index=0,
        params={},
        config=config,
        budget=2,
        dir=str(tmp_path / tid),
        trainable=f"tests.trainables.splits:{fn}",
        metric="val_acc",
        path=(REPO,),
        extra={"data": data},
    )


def test_a_split_by_patient_completes_with_counts_and_no_violation(tmp_path):
    record = run_trial(spec(tmp_path))
    assert record["status"] == "completed" and record["violations"] == []
    assert set(record["splits"]) == {"train", "val", "test"}
    assert record["splits"]["val"]["overlap"] == {"train": {"unit": 0, "patient": 0}}


def test_a_split_by_row_puts_patients_in_train_and_test(tmp_path):
    record = run_trial(spec(tmp_path, by="row"))
    assert record["status"] == "completed"
    kinds = {(tuple(v["splits"]), v["by"]) for v in record["violations"]}
    assert kinds == {(("train", "val"), "patient"), (("train", "test"), "patient")}
    assert all(
        v["count"] == record["splits"][v["splits"][1]]["overlap"][v["splits"][0]]["patient"]
        for v in record["violations"]
    )


def test_a_missing_required_split_is_a_protocol_error(tmp_path):
    record = run_trial(spec(tmp_path, log_test=False))
    assert record["status"] == "protocol_error"
    assert "logged no split test, which data.require needs" in record["errors"][-1]["message"]
    assert (
        run_trial(spec(tmp_path, tid="u", log_test=False, data={**DATA, "require": ["train"]}))[
            "status"
        ]
        == "completed"
    )


def test_a_declared_group_the_split_lacks_is_a_protocol_error(tmp_path):
    data = {**DATA, "independent": {"pairs": [["train", "test"]], "by": ["unit", "site"]}}
    record = run_trial(spec(tmp_path, data=data))
    assert (
        record["status"] == "protocol_error"
        and "without a 'site' group" in record["errors"][-1]["message"]
    )


def test_float_ids_are_a_protocol_error_with_a_sentence(tmp_path):
    record = run_trial(spec(tmp_path, fn="float_ids"))
    assert record["status"] == "protocol_error" and record["attempts"] == 1
    assert (
        "trial.log_split: log_split('train'): ids must be ints or strings, got floats"
        in record["errors"][-1]["message"]
    )


def test_the_splits_travel_with_every_report(tmp_path):
    seen = []
    run_trial(
        spec(tmp_path),
        forward=lambda step, metrics, t, violations, splits=None: seen.append(splits),
    )
    assert len(seen) == 2 and all(set(s) == {"train", "val", "test"} for s in seen)
