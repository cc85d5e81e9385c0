"""examples/hf_trainer (a Hugging Face Trainer script, a tiny BERT built from a config), run
unchanged.

Real transformers trains it on the CPU; its metrics come from the Trainer's
own trainer_state.json (the newest of each checkpoint's and save_state()'s),
its held-out metric from `trainer.evaluate(test_ds, metric_key_prefix="test")`.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e._frameworks import (
    DECIDED,
    check_every_planned_trial_recorded,
    heldout_never_read,
    last_hydra_folder,
    run_example,
)

pytestmark = pytest.mark.ray


def test_the_trainer_script_runs_unchanged_and_its_test_evaluation_is_the_held_out_metric(
    ray_local, tmp_path
):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")  # the Trainer needs it with PyTorch
    result, records = run_example("hf_trainer", tmp_path, trials_per_arm=1)

    check_every_planned_trial_recorded(result, records, tmp_path / "hf_trainer" / "contract.yaml")
    for (
        r
    ) in records:  # the training entries of log_history: train_loss and grad_norm in every report
        assert r["reports"], (r["trial_id"], r["status"], r["errors"][:1])
        assert all(
            {"train_loss", "grad_norm", "val_acc", "val_loss"} <= set(rep["metrics"])
            for rep in r["reports"]
        )
    confirm = [r for r in records if r["phase"] == "confirm"]
    for r in confirm:
        hydra = last_hydra_folder(result.run_dir, r["trial_id"])
        assert yaml.safe_load((hydra / ".hydra" / "config.yaml").read_text())["seed"] == r["seed"]
    assert not any(
        "test_acc" in rep["metrics"]
        for r in records
        if r["phase"] == "tune"
        for rep in r["reports"]
    )

    assert not heldout_never_read(records, "test_acc")
    for r in confirm:  # the value evaluate(test_ds) returned, as save_metrics wrote it
        hydra = last_hydra_folder(result.run_dir, r["trial_id"])
        saved = json.loads((hydra / "hf" / "test_results.json").read_text())
        assert (
            r["status"] == "completed"
            and r["reports"][-1]["metrics"]["test_acc"] == saved["test_accuracy"]
        )
    (decision,) = result.decisions
    assert decision["arm"] == "linear" and decision["decision"] in DECIDED, decision
