"""`plan run` with a `command:` trainable: the example Hydra app, unchanged but for
its planner.report line, run once per trial as a subprocess inside Ray workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner._dispatch.driver import run
from planner._store.writer import read_jsonl
from tests._runs import hydra_app

pytestmark = pytest.mark.ray


def test_a_command_contract_runs_tunes_and_decides_through_ray(ray_local, tmp_path):
    contract = hydra_app(tmp_path, seeds=[0, 1], exposure=3, trials_per_arm=2)

    result = run(contract, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = read_jsonl(result.run_dir / "trials.jsonl")
    assert sorted(r["phase"] for r in trials) == ["confirm"] * 4 + ["tune"] * 4
    assert all(r["status"] == "completed" and r["exposure"] == 3 for r in trials), trials
    # the arm's group choice reached the app: sgd and momentum give different curves at one seed
    final = {(r["arm"], r["seed"]): r["reports"][-1]["metrics"]["val_acc"] for r in trials if r["phase"] == "confirm"}
    assert final[("sgd", 0)] != final[("momentum", 0)]
    # sampled learning rates reached the app: the tuning trials of one arm differ
    tuned = [r["reports"][-1]["metrics"]["val_acc"] for r in trials if r["phase"] == "tune" and r["arm"] == "sgd"]
    assert len(set(tuned)) == 2
    # every attempt kept the app's own output under the trial's folder
    assert all(any(Path(r_dir).rglob("stdout.log")) for r_dir in
               (result.run_dir / "trials" / r["trial_id"] for r in trials))
    assert {d["arm"] for d in result.decisions} == {"momentum"}
