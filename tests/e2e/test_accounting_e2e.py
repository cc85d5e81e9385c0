"""Every planned trial is accounted for: a `command:` script that takes 3 s to exit on
SIGTERM, tuned under ASHA with reused Tune actors, ends with a record for every planned trial.

Before: Tune waits TUNE_FUNCTION_THREAD_TIMEOUT_S (2 s) for the stopped trial of a reused actor,
then `Could not re-use actor ... requires reset_config()`, and the next trial vanished without a
record.
"""

from __future__ import annotations

import json

import pytest
import yaml

from planner import load_run, run
from planner._cli.main import main
from planner._core.text import shown_path
from planner._store.facts import plan_entries
from tests._runs import contract_writer, hydra_app, synthetic_contract, write_contract_data

pytestmark = pytest.mark.ray

SLOW_EXIT = """
import signal as _signal
import time as _time


def _slow_exit(signum, frame):  # a Lightning-like teardown: 3 s between SIGTERM and the exit
    _time.sleep(3.0)
    raise SystemExit(0)


_signal.signal(_signal.SIGTERM, _slow_exit)
"""


def slow_exit_app(tmp_path, *, trials_per_arm: int, exposure: int = 6):
    """examples/hydra_app, each epoch 0.3 s, 3 s to exit on SIGTERM, tuned under ASHA."""
    path = hydra_app(tmp_path, seeds=[0, 1], exposure=exposure, trials_per_arm=trials_per_arm)
    script = path.parent / "train.py"
    text = script.read_text().replace("import planner\n", "import planner\n" + SLOW_EXIT, 1)
    text = text.replace(
        "        planner.report(epoch,",
        "        _time.sleep(0.3)\n        planner.report(epoch,",
        1,
    )
    assert "_time.sleep(0.3)" in text and "_slow_exit" in text
    script.write_text(text)
    contract = yaml.safe_load(path.read_text())
    contract["tuning"]["early_stop"] = {"rule": "asha", "grace": 1, "reduction_factor": 3}
    return write_contract_data(path.parent, contract)


def test_a_slow_exiting_command_under_asha_loses_no_tuning_trial(ray_local, tmp_path):
    # each arm's trials run one after another in one reused actor, and ASHA stops most of them at
    # their first rung: the trial after a stopped one meets the slow exit in its actor
    path = slow_exit_app(tmp_path, trials_per_arm=4)
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    records = load_run(result.run_dir).records
    planned = {
        t["trial_id"] for t in plan_entries(json.loads((result.run_dir / "plan.json").read_text()))
    }
    recorded = {r["trial_id"] for r in records}
    assert planned == recorded, f"planned trials with no record: {sorted(planned - recorded)}"
    tuned = [r for r in records if r["phase"] == "tune"]
    assert len(tuned) == 8
    assert any(r["status"] == "early_stopped" for r in tuned), (
        "ASHA stopped no trial: the repro did not run"
    )
    assert all(r["status"] in ("completed", "early_stopped") for r in tuned), [
        (r["trial_id"], r["status"], r["errors"])
        for r in tuned
        if r["status"] not in ("completed", "early_stopped")
    ]
    assert result.state == "completed", result.reason
    assert "did not run" not in result.reason
    ray_log = (
        (result.run_dir / "ray.log").read_text() if (result.run_dir / "ray.log").exists() else ""
    )
    assert "Could not re-use actor" not in ray_log


TUNING = {
    "trials_per_arm": 6,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
    "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 3},
}
write = contract_writer(
    synthetic_contract(
        name="accounting",
        trainable="tests.trainables.accounting:slow_stop",
        seeds=[0, 1],
        budget={"exposure": 6},
        tuning=TUNING,
    )
)


def test_a_trial_ray_drops_runs_again_or_is_recorded_with_rays_reason_and_the_arm_is_not_matched(
    ray_local, in_repo, tmp_path
):
    """Whatever the cause: the driver compares the plan with the records after each phase."""
    result = run(write(tmp_path), runs_dir=tmp_path / "runs", quiet=True)
    records = load_run(result.run_dir).records
    planned = {
        t["trial_id"] for t in plan_entries(json.loads((result.run_dir / "plan.json").read_text()))
    }
    assert planned == {r["trial_id"] for r in records}, "a planned trial has no record"
    events = load_run(result.run_dir).events
    rerun = [e for e in events if e["event"] == "trials_rerun"]
    assert rerun, "Tune dropped no trial: the repro did not reproduce"
    assert "Could not re-use actor" not in result.reason and "did not run" not in result.reason
    never = [r for r in records if any(e["type"] == "NotRun" for e in r["errors"])]
    for r in never:  # still not run: failed, with Ray's reason
        assert r["status"] == "failed" and "reset_config" in r["errors"][0]["message"], r["errors"]
    for d in result.decisions:
        short = {r["arm"] for r in never if r["phase"] == "tune"}
        if short & {d["arm"], "base"}:
            assert d["decision"] == "invalid" and "tuning budget not matched" in d["reason"], d
            arm = sorted(short)[0]
            n = sum(1 for r in never if r["arm"] == arm and r["phase"] == "tune")
            assert f"tuning budget not matched: {arm} {6 - n} of 6 trials" in d["reason"]
        else:
            assert "tuning budget not matched" not in d["reason"]


# ------------------------------------------------------------------ fail fast

FAST = {
    "trials_per_arm": 6,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
}


def fail_fast_contract(tmp_path, trainable: str, **patch):
    data = {
        "name": "failfast",
        "trainable": f"tests.trainables.accounting:{trainable}",
        "seeds": [0, 1],
        "budget": {"exposure": 10},
        "tuning": FAST,
        **patch,
    }
    return contract_writer(synthetic_contract(**data))(tmp_path)


def test_a_trainable_that_fails_every_trial_stops_after_the_first_few_with_the_error_named_once(
    ray_local, in_repo, tmp_path, capsys
):
    path = fail_fast_contract(tmp_path, "missing_file")
    code = main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--quiet"])
    captured = capsys.readouterr()
    err = captured.out + captured.err
    assert code == 3, err
    run_dir = next((tmp_path / "runs" / "failfast").glob("*/"))
    records = load_run(run_dir).records
    assert 3 <= len(records) < 12, len(records)  # stopped early; what ended is kept
    # it ends as every run ends (the folder, the state), not as an error of the command
    assert (
        f"run folder: {shown_path(run_dir)}" in captured.out
        and "run state:  failed (the first" in captured.out
    )
    assert "plan run:" not in captured.err, captured.err
    assert all(r["status"] == "failed" for r in records)
    assert "all failed with one error and none succeeded: FileNotFoundError" in err
    assert err.count("No such file or directory") == 1 and "--keep-going" in err, err
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "failed" and "none succeeded" in state["reason"]


def test_keep_going_runs_every_trial_of_a_trainable_that_fails_every_trial(
    ray_local, in_repo, tmp_path, capsys
):
    path = fail_fast_contract(tmp_path, "missing_file", tuning={**FAST, "trials_per_arm": 3})
    code = main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--quiet", "--keep-going"])
    out = capsys.readouterr().out
    assert code == 4, out  # completed, nothing to decide on
    run_dir = next((tmp_path / "runs" / "failfast").glob("*/"))
    assert sum(1 for r in load_run(run_dir).records if r["phase"] == "tune") == 6
    assert "error:      FileNotFoundError" in out and "(in 6 trials" in out, out


def test_a_metric_reported_under_another_name_stops_the_run_early(
    ray_local, in_repo, tmp_path, capsys
):
    path = fail_fast_contract(
        tmp_path, "misnamed_metric", metric={"name": "val_acc", "mode": "max"}
    )
    code = main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--quiet"])
    captured = capsys.readouterr()
    err = captured.out + captured.err
    assert code == 3, err
    # Either rule of fail fast may see it first: the first report without the metric ends each
    # trial at once (a protocol error with the near name), so the same error in the first 3 trials
    # usually stops the run.
    assert (
        "never reported the metric 'val_acc' in their first 2 reports (they report val_accuracy)"
        in err
        or (
            "the first 3 trials all failed with one error" in err
            and "did you mean `val_accuracy`?" in err
        )
    ), err
    run_dir = next((tmp_path / "runs" / "failfast").glob("*/"))
    records = load_run(run_dir).records
    # each trial ended at its first reports, and the run before its 12 tuning trials had all run
    assert all(r["exposure"] < 10 for r in records), [
        (r["trial_id"], r["exposure"]) for r in records
    ]
    assert len(records) < 12, len(records)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "failed"
