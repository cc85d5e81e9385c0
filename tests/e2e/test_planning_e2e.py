"""Plan before spending, end to end on a real local Ray: ASHA's expected steps against a real
tuning run, and sequential confirmation stopping early (and a null effect that does not)."""

from __future__ import annotations

import json

import pytest
import yaml

from planner import load_run, run
from planner._cli.main import main
from planner._cli.run_text import format_result
from planner._contract.model import Contract
from planner._plan.estimate import asha_expected_steps, estimate
from tests._runs import contract_writer, synthetic_contract

pytestmark = pytest.mark.ray

BASE = synthetic_contract(name="planning", seeds=[0, 1, 2, 3, 4, 5])


write = contract_writer(BASE)


def test_asha_expected_steps_match_a_real_tuning_run(ray_local, in_repo, tmp_path):
    """6 sweeps (2 arms x 3 tuning seeds) of 9 trials x 9 steps, grace 1, reduction_factor 3.

    The trainable ranks each sweep's trials independently and keeps the rank at
    every step (tests/trainables/ranked.py), so the sweeps are 6 independent
    draws of what `asha_expected_steps` models.
    """
    path = write(
        tmp_path,
        trainable="tests.trainables.ranked:train",
        seeds=[0, 1],
        budget={"exposure": 9},
        tuning={
            "trials_per_arm": 9,
            "seeds": [1000, 1001, 1002],
            "sampler": {"name": "random", "seed": 0},
            "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
            "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 3},
        },
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed"
    tune = [r for r in load_run(result.run_dir).records if r["phase"] == "tune"]
    measured = sum(r["exposure"] for r in tune)
    summary = estimate(Contract.model_validate(yaml.safe_load(path.read_text())))
    phase = summary["phases"][0]
    one = asha_expected_steps(9, 9, 1, 3)
    tolerance = 3 * one.spread * 6**0.5  # 3 sd of the sum of 6 independent sweeps
    assert len(tune) == 54 and phase["steps_expected"] == pytest.approx(6 * one.expected)
    # the test can fail: the paper's synchronous figure and no early stopping are both outside the
    # tolerance
    assert abs(phase["steps_synchronous"] - phase["steps_expected"]) > tolerance
    assert abs(phase["steps_planned"] - phase["steps_expected"]) > tolerance
    assert abs(measured - phase["steps_expected"]) <= tolerance, (
        measured,
        phase["steps_expected"],
        tolerance,
    )
    print(
        f"ASHA 6 x 9 trials x 9 steps: measured {measured}, expected {phase['steps_expected']:.1f} "
        f"(+- {tolerance:.1f}), synchronous {phase['steps_synchronous']:.0f}, full "
        f"{phase['steps_planned']}"
    )


def _looks(result):
    decisions = json.loads((result.run_dir / "decisions.json").read_text())
    return decisions, decisions["decisions"][0]


def test_a_strong_effect_stops_early_and_the_skipped_seeds_are_not_needed(
    ray_local, in_repo, tmp_path, capsys
):
    path = write(
        tmp_path, confirmation={"looks": 3, "spending": "obrien_fleming", "futility": True}
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed" and result.exit_code == 0
    decisions, row = _looks(result)
    assert row["decision"] == "accept" and len(row["looks"]) in (1, 2)
    assert (
        row["looks"][-1]["action"] == "accept" and row["n_arm"] == [2, 4, 6][len(row["looks"]) - 1]
    )
    assert decisions["sequential"]["look_sizes"] == [2, 4, 6]
    confirm = [r for r in load_run(result.run_dir).records if r["phase"] == "confirm"]
    assert len(confirm) == 2 * row["n_arm"] < 12
    skipped = [e for e in load_run(result.run_dir).events if e["event"] == "trials_skipped"]
    assert (
        len(skipped) == 1
        and skipped[0]["by_design"]
        and len(skipped[0]["trial_ids"]) == 12 - len(confirm)
    )
    assert "not needed" in result.reason
    state = json.loads((result.run_dir / "state.json").read_text())
    assert state["state"] == "completed"
    capsys.readouterr()
    assert main(["status", str(result.run_dir)]) == 0
    status = capsys.readouterr().out
    assert f"{len(confirm)} of {len(confirm)} planned" in status and "not needed" in status
    assert f"at look {len(row['looks'])}" in format_result(result)  # no fixed-sample p to print
    assert main(["report", str(result.run_dir)]) == 0
    report = capsys.readouterr().out
    assert (
        "### Looks" in report
        and "| not needed | not needed |" in report
        and "| missing" not in report
    )


def test_a_null_effect_does_not_accept(ray_local, in_repo, tmp_path):
    path = write(
        tmp_path,
        arms=[{"name": "treat", "overrides": ["recipe.name=b"]}],
        confirmation={"looks": 3, "futility": True},
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed"
    _, row = _looks(result)
    assert row["decision"] in ("reject", "inconclusive")
    last = row["looks"][-1]
    assert last["action"] == "stop_futility" or len(row["looks"]) == 3
