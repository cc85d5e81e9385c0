"""planner.LightningCallback: examples/lightning's model trained in-process (train_fn.py), with
real Lightning.

Through `plan run` (a real local Ray): ASHA stops Lightning trials in-process
(the Trainer tears down and the worker runs the next trial); a trial that dies
after epoch 3 continues from its epoch-3 checkpoint on the retry; the example's
callback contract ends with every planned trial recorded and a decision. And
through the worker's own protocol (no Ray): the held-out report, a trial whose process was
killed after epoch 3 continuing in the next session (as `--resume` runs it), a budget the
Trainer does not take.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
from pathlib import Path

import pytest
import yaml

from planner import load_run, run
from planner._trial.protocol import run_trial
from tests._lightning_trials import CALLBACK_CONTRACT, TRAINABLES, callback_spec
from tests.e2e._frameworks import (
    DECIDED,
    REPO,
    check_every_planned_trial_recorded,
    heldout_never_read,
)

# Skipped without Lightning, found without importing it: collecting this file in every xdist worker
# would otherwise import torch and Lightning there, seconds each, where none of its tests may run.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None, reason="lightning is not installed"
)


def _contract(tmp_path: Path, **changes) -> Path:
    """contract_callback.yaml with `changes` (None drops a key), written beside the example's
    conf/."""
    contract = yaml.safe_load(CALLBACK_CONTRACT.read_text())
    for key, value in changes.items():
        if value is None:
            contract.pop(key, None)
        else:
            contract[key] = value
    contract["config"]["dir"] = str(CALLBACK_CONTRACT.parent / "conf")
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def _epochs(trial_dir: Path, attempt: int) -> list[int]:
    path = trial_dir / f"epochs.{attempt}"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.mark.ray
def test_asha_stops_lightning_trials_in_process(ray_local, in_repo, tmp_path):
    tuning = {
        "trials_per_arm": 6,
        "seeds": [100],
        "sampler": {"name": "random", "seed": 0},
        "space": {"optimizer.lr": {"log_uniform": [1.0e-5, 0.5]}},
        "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 3},
    }
    path = _contract(
        tmp_path,
        trainable=f"{TRAINABLES}:counts_epochs",
        tuning=tuning,
        seeds=[0, 1],
        failures={"retries": 0},
        budget={
            "unit": "epoch",
            "exposure": 4,
            "max_trial_time": "3m",
            "resources": {"cpu": 1, "gpu": 0},
        },
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    records = load_run(result.run_dir).records
    stopped = [r for r in records if r["status"] == "early_stopped"]
    assert stopped, [(r["trial_id"], r["status"], r["exposure"]) for r in records]
    for r in stopped:  # the Trainer stopped at the report ASHA cut: it trained no epoch past it
        trial_dir = result.run_dir / "trials" / r["trial_id"]
        assert r["exposure"] < 4 and _epochs(trial_dir, 1) == list(range(1, r["exposure"] + 1)), r[
            "trial_id"
        ]
        (checkpoint,) = (trial_dir / "checkpoints").iterdir()
        assert checkpoint.name.startswith(f"epoch={r['exposure'] - 1}-")
    # stopped in-process: the worker of a stopped trial went on to train a later trial
    started = {}
    for r in records:
        pid, at = (result.run_dir / "trials" / r["trial_id"] / "started.1").read_text().split()
        started[r["trial_id"]] = (int(pid), float(at))
    assert any(
        started[o][0] == started[r["trial_id"]][0] and started[o][1] > started[r["trial_id"]][1]
        for r in stopped
        for o in started
    ), "no worker of a stopped trial trained another trial"
    assert all(r["status"] in ("completed", "early_stopped") for r in records), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in records
    ]


@pytest.mark.ray
@pytest.mark.parametrize("trainable", ["dies_after_epoch_3", "exits_after_epoch_3"])
def test_a_trial_that_dies_after_epoch_3_continues_from_its_checkpoint(
    ray_local, in_repo, tmp_path, trainable
):
    path = _contract(
        tmp_path,
        trainable=f"{TRAINABLES}:{trainable}",
        tuning=None,
        seeds=[0, 1],
        budget={
            "unit": "epoch",
            "exposure": 5,
            "max_trial_time": "3m",
            "resources": {"cpu": 1, "gpu": 0},
        },
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    records = load_run(result.run_dir).records
    assert {r["phase"] for r in records} == {"confirm"} and len(records) == 4
    for r in records:
        trial_dir = result.run_dir / "trials" / r["trial_id"]
        assert r["status"] == "completed" and r["attempts"] == 2, (
            r["trial_id"],
            r["status"],
            r["errors"],
        )
        assert _epochs(trial_dir, 1) == [1, 2, 3] and _epochs(trial_dir, 2) == [
            4,
            5,
        ]  # trained on, not again
        assert [rep["step"] for rep in r["reports"]] == [
            4,
            5,
        ]  # the second attempt's reports start at epoch 4
        assert r["resumed"] is True
        source = r["resumed_from"]
        assert re.fullmatch(
            rf"trials/{r['trial_id']}/checkpoints/epoch=2-step=\d+\.ckpt", source["path"]
        ), source
        assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
        assert source["held"]["step"] == 3 and source["held"]["epoch"] == 2
        assert [rep["step"] for rep in source["reports"]] == [
            1,
            2,
            3,
        ]  # what the first attempt reported
        assert "test_acc" in r["reports"][-1]["metrics"]
    assert result.decisions and result.decisions[0]["decision"] in DECIDED


@pytest.mark.ray
def test_the_callback_contract_runs_every_planned_trial_and_decides(ray_local, in_repo, tmp_path):
    result = run(CALLBACK_CONTRACT, runs_dir=tmp_path / "runs", quiet=True)

    records = load_run(result.run_dir).records
    check_every_planned_trial_recorded(result, records, CALLBACK_CONTRACT)
    assert not heldout_never_read(records, "test_acc")
    confirm = [r for r in records if r["phase"] == "confirm"]
    assert all(r["status"] == "completed" and r["exposure"] == 6 for r in confirm), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in confirm
    ]
    for r in (
        confirm
    ):  # every epoch reports what the LightningModule logged; trainer.test()'s joins the last
        assert all(
            {"train_loss_epoch", "val_acc", "val_loss"} <= set(rep["metrics"])
            for rep in r["reports"]
        )
        assert (
            "test_acc" in r["reports"][-1]["metrics"]
            and "test_acc" not in r["reports"][0]["metrics"]
        )
        assert not r["resumed"] and r["resumed_from"] is None
    assert not any(
        "test_acc" in rep["metrics"]
        for r in records
        if r["phase"] == "tune"
        for rep in r["reports"]
    )
    for arm in (
        "sgd",
        "adam",
    ):  # each confirmation seed trained its own way (the trial's seed reached Lightning)
        finals = [
            r["reports"][-1]["metrics"]["train_loss_epoch"] for r in confirm if r["arm"] == arm
        ]
        assert len(set(finals)) == len(finals), finals
    (decision,) = result.decisions
    assert decision["arm"] == "adam" and decision["decision"] in DECIDED, decision


# ------------------------------------------------------------------ through the worker's protocol,
# no Ray


def test_outside_tuning_the_last_report_waits_for_trainer_test(tmp_path, in_repo):
    record = run_trial(callback_spec(tmp_path, "examples.lightning.train_fn:train"))
    assert record["status"] == "completed" and [r["step"] for r in record["reports"]] == [1, 2, 3]
    assert "test_acc" in record["reports"][-1]["metrics"] and not record.get("notes")
    tuned = run_trial(
        callback_spec(tmp_path / "tune", "examples.lightning.train_fn:train", phase="tune")
    )
    assert tuned["status"] == "completed" and not any(
        "test_acc" in r["metrics"] for r in tuned["reports"]
    )


def test_a_budget_counted_in_steps_is_refused_by_the_callback_that_counts_epochs(tmp_path, in_repo):
    """budget.unit: step (the default) with exposure 3 would train 3 epochs and call them 3
    steps."""
    record = run_trial(callback_spec(tmp_path, "examples.lightning.train_fn:train", unit="step"))
    message = record["errors"][-1]["message"]
    assert record["status"] == "protocol_error" and record["reports"] == [], message
    assert "budget.unit is 'step'" in message and "budget.unit: epoch" in message, message
    assert (
        run_trial(
            callback_spec(tmp_path / "epochs", "examples.lightning.train_fn:train", unit="Epochs")
        )["status"]
        == "completed"
    )


def test_what_the_module_logs_at_its_own_epoch_end_is_in_that_epochs_report(tmp_path, in_repo):
    """Lightning calls a callback's on_train_epoch_end before the module's: the callback reported a
    value the module logs there one epoch late (step k held epoch k - 1's), and a contract metric
    logged there was 'never reported' in the first report."""
    spec = callback_spec(tmp_path, f"{TRAINABLES}:logs_at_epoch_end", phase="tune", budget=3)
    record = run_trial(dataclasses.replace(spec, metric="epoch_marker"))
    assert record["status"] == "completed", record["errors"]
    assert [(r["step"], r["metrics"].get("epoch_marker")) for r in record["reports"]] == [
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
    ]
    assert (tmp_path / "run" / "trials" / "t1" / "hook").read_text() == "restored"


def test_an_epoch_that_did_not_validate_reports_no_stale_validation_metric(tmp_path, in_repo):
    """check_val_every_n_epoch=2: Lightning keeps epoch 2's val_acc through epoch 3; the report of
    epoch 3 holds only what epoch 3 logged, and the first report waits for the first validation
    (epoch 2)."""
    record = run_trial(
        callback_spec(tmp_path, f"{TRAINABLES}:validates_every_2_epochs", phase="tune", budget=4)
    )
    assert record["status"] == "completed", record["errors"]
    reports = {r["step"]: r["metrics"] for r in record["reports"]}
    assert list(reports) == [2, 3, 4]
    assert "val_acc" in reports[2] and "val_acc" in reports[4] and "val_acc" not in reports[3], (
        reports
    )
    assert "train_loss" in reports[3]


def test_a_trainable_that_never_tests_says_why_its_last_step_is_missing(tmp_path, in_repo):
    record = run_trial(callback_spec(tmp_path, "tests.trainables.lightning_callback:never_tests"))
    assert record["status"] == "protocol_error" and [r["step"] for r in record["reports"]] == [1, 2]
    assert any("waits for trainer.test()" in note for note in record["notes"]), record.get("notes")
    message = record["errors"][-1]["message"]  # the cause, not Lightning's EarlyStopping
    assert (
        "never reached this trial's LightningCallback" in message and "EarlyStopping" not in message
    ), message


def test_a_lightning_trainable_without_the_callback_is_told_of_it(tmp_path, in_repo):
    record = run_trial(
        callback_spec(tmp_path, "tests.trainables.lightning_callback:forgets_the_callback")
    )
    message = record["errors"][-1]["message"]
    assert record["status"] == "protocol_error" and "no report at all" in message
    assert "planner.LightningCallback(trial)" in message, message


def test_a_trial_whose_process_was_killed_continues_in_the_next_session(tmp_path, in_repo):
    """The driver's process dies under the trial after epoch 3 (os._exit); `--resume`'s session
    continues it."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom pathlib import Path\nfrom planner._trial.protocol import run_trial\n"
        "from tests._lightning_trials import TRAINABLES, callback_spec\n"
        "run_trial(callback_spec(Path(sys.argv[1]), f'{TRAINABLES}:exits_after_epoch_3', "
        "budget=5, session='killed'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1, done.stderr[
        -2000:
    ]  # os._exit(1) after epoch 3: no record was made
    record = run_trial(
        callback_spec(tmp_path, f"{TRAINABLES}:exits_after_epoch_3", budget=5, session="resumed")
    )

    trial_dir = tmp_path / "run" / "trials" / "t1"
    assert (
        record["status"] == "completed" and record["resumed"] and record["errors"] == []
    )  # no retry used
    # a new session numbers its attempts afresh: the killed process started epochs 1-3, this one 4
    # and 5
    assert [r["step"] for r in record["reports"]] == [4, 5] and _epochs(trial_dir, 1) == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert record["resumed_from"]["path"].startswith("trials/t1/checkpoints/epoch=2-")
    assert record["resumed_from"]["held"]["step"] == 3
    # what the checkpoint's training reported (epochs 1-3) travels with it: mean_last_k scores the
    # trial on its last 3 epochs, as it does every other trial, not on the 2 this session reported
    held = record["resumed_from"]["reports"]
    assert [r["step"] for r in held] == [1, 2, 3] and all(
        math.isfinite(r["metrics"]["val_acc"]) for r in held
    )
    from planner._stats.select import metric_values, score

    values = metric_values(record, "val_acc")
    assert len(values) == 5 and values[:3] == [r["metrics"]["val_acc"] for r in held]
    assert score(record, "val_acc", "mean_last_k", 3) == pytest.approx(sum(values[2:]) / 3)


def test_a_trainer_that_ignores_the_budget_is_a_protocol_error(tmp_path, in_repo):
    record = run_trial(callback_spec(tmp_path, "tests.trainables.lightning_callback:own_epochs"))
    assert record["status"] == "protocol_error" and record["attempts"] == 1
    assert "max_epochs=callback.max_epochs" in record["errors"][0]["message"], record["errors"]


def test_import_planner_loads_lightning_only_when_the_callback_is_used():
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\nimport planner\nnames = dir(planner) + list(planner.__all__)\n"
        "before = [m for m in ('torch', 'lightning') if m in sys.modules]\n"
        "callback = planner.LightningCallback\n"
        "print(json.dumps([before, [m for m in ('torch', 'lightning') if m in sys.modules], "
        "callback.__module__,"
        " issubclass(callback, sys.modules['lightning'].pytorch.Callback)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [[], ["torch", "lightning"], "planner", True]
