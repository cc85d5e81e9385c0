"""examples/pytorch (a plain PyTorch loop as a function trainable), really trained through `plan
run`."""

from __future__ import annotations

import pytest

from tests.e2e._frameworks import DECIDED, REPO, check_every_planned_trial_recorded, run_example

pytestmark = pytest.mark.ray

CONTRACT = REPO / "examples" / "pytorch" / "contract.yaml"


def test_the_pytorch_example_trains_and_decides(ray_local, in_repo, tmp_path):
    pytest.importorskip("torch")
    result, records = run_example("pytorch", tmp_path, copy=False)

    check_every_planned_trial_recorded(result, records, CONTRACT)
    confirm = [r for r in records if r["phase"] == "confirm"]
    assert all(r["status"] == "completed" for r in confirm), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in confirm
    ]
    for r in (
        confirm
    ):  # every epoch reports the training loss; the held-out accuracy is there outside tuning
        assert all(
            {"train_loss", "val_acc", "val_loss", "test_acc"} <= set(rep["metrics"])
            for rep in r["reports"]
        )
        assert set(r["splits"]) == {"train", "val", "test"}
    assert not any(
        "test_acc" in rep["metrics"]
        for r in records
        if r["phase"] == "tune"
        for rep in r["reports"]
    )
    # the trial's seed reached torch: no two confirmation seeds of one arm trained alike
    for arm in {r["arm"] for r in confirm}:
        finals = [r["reports"][-1]["metrics"]["train_loss"] for r in confirm if r["arm"] == arm]
        assert len(set(finals)) == len(finals), finals
    (decision,) = result.decisions
    assert decision["arm"] == "adam" and decision["decision"] in DECIDED, decision
