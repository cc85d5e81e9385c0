"""A run followed from a second process while it goes: `plan run` names its folder before Ray
starts,
`runs/<name>/latest` points at it, and `plan status runs/<name>/latest --json` shows a running
trial's
latest step and value (the reports the driver appends to live/reports.jsonl as Tune hands them
over)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import planner
from tests._runs import ROOT, end_plan_run, start_plan_run, synthetic_contract

pytestmark = pytest.mark.ray

TUNING = {
    "trials_per_arm": 2,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
}


def _status(pointer) -> tuple[int, dict | None, str]:
    done = subprocess.run(
        [sys.executable, "-m", "planner", "status", str(pointer), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None, done.stderr


def test_status_of_latest_shows_a_running_trials_latest_step_and_value(tmp_path):
    data = synthetic_contract(
        name="watched",
        trainable="tests.trainables.synthetic:slow",
        seeds=[0, 1],
        budget={"exposure": 40},
        tuning=TUNING,
    )
    data["config"]["values"]["recipe"]["sleep"] = 0.25
    proc, runs, ray_tmp = start_plan_run(tmp_path, data, "rw")
    try:
        first = proc.stdout.readline()  # before Ray starts: nothing else is printed before it
        assert first.startswith("run folder: "), first
        pointer = runs / "watched" / "latest"
        run_id = pointer.read_text().strip()
        assert run_id in first and "plan status" in first and not pointer.is_symlink()

        seen = None
        deadline = time.monotonic() + 300
        while seen is None and time.monotonic() < deadline and proc.poll() is None:
            code, status, err = _status(pointer)
            assert code == 0, err
            assert status["run_id"] == run_id and status["state"] in ("unknown", "running")
            seen = next((t for t in status["running_trials"] if t["step"] is not None), None)
            time.sleep(0.5)
        assert seen is not None, "no running trial showed a step before the run ended"
        assert seen["phase"] == "tune" and seen["arm"] in ("base", "treat")
        assert seen["metric"] == "val_acc" and seen["value"] == 0.5  # what `slow` reports
        assert 1 <= seen["step"] < 40
        assert status["live"]["phase"] == "tune" and status["live"]["steps_done"] >= 1

        # the report's reader shows the running trial's curve so far, and counts no fact of it
        results = planner.load_run(runs / "watched" / run_id)
        row = results.trials[results.trials["trial_id"] == seen["trial_id"]]
        if len(row):  # still running when read (else its record superseded the live reports)
            assert set(row["status"]) <= {"running", "completed"}
            curve = results.reports[results.reports["trial_id"] == seen["trial_id"]]
            assert len(curve) >= seen["step"] and set(curve["value"]) == {0.5}
    finally:
        end_plan_run(proc, ray_tmp)


def test_a_latest_pointer_with_bad_content_is_refused_with_a_sentence(tmp_path):
    (tmp_path / "runs" / "x").mkdir(parents=True)
    pointer = tmp_path / "runs" / "x" / "latest"
    pointer.write_text("../../etc\n")
    code, _, err = _status(pointer)
    assert code == 2
    assert "should hold the id of a run beside it" in err and "Traceback" not in err
