"""The lines `plan run` ends with (format_result): what an `invalid` decision broke, the resume
line last."""

from __future__ import annotations

import json

from planner import RunResult
from planner._cli.run_text import format_result
from planner._stats.decide import mark_invalid


def _row(arm: str, why: str, rule: str) -> dict:
    (row,) = mark_invalid(
        [
            {
                "arm": arm,
                "decision": "reject",
                "effect": 0.01,
                "ci_low": -0.01,
                "ci_high": 0.03,
                "p_value": 0.4,
                "n_arm": 3,
                "n_baseline": 3,
                "reason": "...",
            }
        ],
        {arm: why},
        rule,
    )
    return row


SEEDS = (
    "Invalid: the seeds did not vary the run: 3 seeds of base and 3 seeds of adam reported "
    "identical curves "
    "of val_acc. The trainable ignores its seed."
)
DATA = (
    "Invalid: split_overlap in confirm-adam-s1: train and val share 4 units. The data the arms "
    "saw break the "
    "contract's data section."
)
BUDGET = "tuning budget not matched: lion 5 of 6 trials."
TUNED = (
    "Invalid: the tuned values did not vary the run: 4 tuning trials of arm cos with different "
    "params reported "
    "the same curves; check that the trainable uses them."
)


def test_the_invalid_line_says_which_rule_was_broken(tmp_path):
    result = RunResult(
        tmp_path,
        "completed",
        "all planned trials ended",
        [
            _row("adam", SEEDS, "seeds"),
            _row("sgdw", DATA, "data"),
            _row("lion", BUDGET, "budget"),
            _row("cos", TUNED, "tuned_values"),
        ],
        1.0,
        12,
    )
    line = next(x for x in format_result(result).splitlines() if x.startswith("invalid:"))
    assert "arm adam: the run completed, but the seeds did not vary the run" in line, line
    assert "arm sgdw: the run completed, but the data broke the contract's data section" in line, (
        line
    )
    assert "arm lion: the run completed, but the tuning budget was not matched" in line, line
    assert "arm cos: the run completed, but the tuned values did not vary the run" in line, line
    assert "the data or the budget" not in line, line


def test_an_arm_that_broke_two_rules_names_both(tmp_path):
    (row,) = mark_invalid([_row("adam", SEEDS, "seeds")], {"adam": TUNED}, "tuned_values")
    assert row["invalid_rules"] == ["tuned_values", "seeds"]
    result = RunResult(tmp_path, "completed", "all planned trials ended", [row], 1.0, 12)
    line = next(x for x in format_result(result).splitlines() if x.startswith("invalid:"))
    assert "the tuned values did not vary the run and the seeds did not vary the run" in line, line


def test_the_resume_line_is_the_last_line_with_lineage_history(tmp_path):
    (tmp_path / "lineage.json").write_text(
        json.dumps(
            {
                "line": "demo",
                "baseline": {"arm": "base", "from": None},
                "repetition": {
                    "sentence": "factor optim was tested 2 times against this baseline (this test "
                    "included)"
                },
            }
        )
    )
    result = RunResult(
        tmp_path,
        "interrupted",
        "stopped by the user",
        [],
        1.0,
        3,
        resume_command=f"plan run contract.yaml --resume {tmp_path}",
    )
    lines = format_result(result).splitlines()
    assert any(x.startswith("lineage:") for x in lines), lines
    assert lines[-1] == f"to resume:  plan run contract.yaml --resume {tmp_path}", lines


def test_an_incomplete_decision_has_its_line_and_exit_4(tmp_path):
    row = {
        "arm": "adam",
        "decision": "incomplete",
        "effect": None,
        "reason": "Incomplete: in the baseline sgd, seed 0 broke the reporting protocol.",
    }
    result = RunResult(tmp_path, "completed", "all planned trials ended", [row], 1.0, 12)
    assert result.exit_code == 4
    line = next(x for x in format_result(result).splitlines() if x.startswith("incomplete:"))
    assert "arm adam:" in line and "(exit 4)" in line, line
    # an arm already said to have no value gets no second line
    said = RunResult(
        tmp_path, "completed", "all planned trials ended", [row], 1.0, 12, no_value_arms=["adam"]
    )
    assert not any(x.startswith("incomplete:") for x in format_result(said).splitlines())


def test_the_studies_line_names_the_optuna_dashboard_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = RunResult(tmp_path / "run", "completed", "all planned trials ended", [], 1.0, 12)
    (tmp_path / "run").mkdir()
    assert not any(x.startswith("studies:") for x in format_result(result).splitlines())
    (tmp_path / "run" / "studies.log").write_text("")
    lines = format_result(result).splitlines()
    assert "studies:    optuna-dashboard run/studies.log" in lines
