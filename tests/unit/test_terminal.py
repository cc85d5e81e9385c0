"""The terminal for people who run this all day: --version, the resume command, resume counts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from planner import RunResult
from planner._cli.main import _resume_argv, main
from planner._cli.run_text import format_result
from planner._core.version import VERSION
from planner._dispatch.run_folder import resume_counts


def test_plan_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"plan (planner) {VERSION}"


def test_the_resume_command_repeats_the_options_that_matter():
    args = SimpleNamespace(contract="exp/contract.yaml", address="10.0.0.5:6379", quiet=True)
    assert _resume_argv(args) == ["exp/contract.yaml", "--address", "10.0.0.5:6379", "--quiet"]
    assert _resume_argv(SimpleNamespace(contract="c.yaml", address=None, quiet=False)) == ["c.yaml"]


def test_an_interrupted_run_prints_how_to_resume_and_a_resumed_one_what_it_kept():
    result = RunResult(
        Path("runs/x/1"),
        "interrupted",
        "stopped by the user",
        [],
        3.0,
        2,
        resume_command="plan run c.yaml --resume runs/x/1",
        resumed={"kept": 5, "rerun": 1, "not_started": 6},
    )
    text = format_result(result)
    assert text.splitlines()[-1] == "to resume:  plan run c.yaml --resume runs/x/1"
    assert (
        "resumed: 5 trials kept, 1 trial run again (cut short when the run stopped), 6 trials not "
        "started yet" in text
    )


def test_resume_counts_only_count_planned_trials():
    plan = SimpleNamespace(trials=[SimpleNamespace(trial_id=f"t{i}") for i in range(6)])
    records = {"t0": {}, "t1": {}, "reeval-x": {}}
    assert resume_counts(plan, records, ["t2", "gone"]) == {"kept": 2, "rerun": 1, "not_started": 3}


def test_the_closing_summary_counts_in_words_one_trial_or_several():
    one = format_result(
        RunResult(
            Path("runs/x/1"),
            "completed",
            "all planned trials ended",
            [],
            1.0,
            1,
            failures=[{"trial_id": "confirm-a-s0", "status": "failed"}],
            errors=[{"error": "KeyError: 'lr'", "count": 1, "first": "confirm-a-s0"}],
        )
    )
    assert "1 trial ended in" in one and "1 trials" not in one
    assert "failures:   1 trial: confirm-a-s0 failed" in one
    assert "error:      KeyError: 'lr' (in 1 trial, first confirm-a-s0)" in one
    many = format_result(
        RunResult(Path("runs/x/1"), "completed", "all planned trials ended", [], 1.0, 1200)
    )
    assert "1,200 trials ended in" in many


def test_the_run_folder_prints_the_same_way_for_a_first_run_and_a_resume(tmp_path, monkeypatch):
    """A first run's folder is relative (runs/...), a resumed one resolved: both print relative to
    the cwd."""
    from planner._core.text import shown_path

    monkeypatch.chdir(tmp_path)
    first = format_result(RunResult(Path("runs/x/1"), "completed", "", [], 1.0, 2))
    resumed = format_result(
        RunResult((tmp_path / "runs/x/1").resolve(), "completed", "", [], 1.0, 2)
    )
    assert first.splitlines()[0] == resumed.splitlines()[0] == "run folder: runs/x/1"
    assert shown_path("/elsewhere/runs/x/1") == "/elsewhere/runs/x/1"  # outside the cwd: absolute
