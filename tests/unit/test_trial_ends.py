"""The worker's side of a trial's end (issue #24): the attempt ledger closed when Tune stops a trial,
the exposure a failed trial spent."""

import json
import sys
from pathlib import Path

import pytest

from planner._store import facts
from planner._trial.attempts import LEDGER, Ledger
from planner._trial.protocol import TrialSpec, run_trial

REPO = str(Path(__file__).resolve().parents[2])


def spec(tmp_path, trainable, *, retries=0, budget=3, path=(REPO,), session="s1", tid="t"):
    return TrialSpec(trial_id=tid, phase="tune", arm="a", seed=3, index=0, params={}, config={"lr": 0.1},
                     budget=budget, dir=str(tmp_path / tid), trainable=trainable, metric="acc", retries=retries,
                     path=tuple(path), extra={"session": session})


def ledger(tmp_path, tid="t"):
    return json.loads((tmp_path / tid / LEDGER).read_text())["attempts"]


def test_a_trial_tune_stops_at_a_report_closes_its_attempt_as_early_stopped(tmp_path):
    def forward(step, metrics, elapsed, violations, **extra):
        if step == 2:
            sys.exit(0)  # what Ray Tune's session does in tune.report when the scheduler stopped the trial

    with pytest.raises(SystemExit):
        run_trial(spec(tmp_path, "tests.trainables.worker_ends:three_steps"), forward)
    (attempt,) = ledger(tmp_path)
    assert attempt["ended"] == "early_stopped" and attempt["step"] == 2 and attempt["ended_at"]
    # such a trial runs again only when it was left without a record (the phase's time budget): it continues
    rerun = Ledger.load(tmp_path / "t", "s2")
    rerun.start(1)
    assert rerun.cut_short_before()


def test_a_failed_trial_keeps_the_exposure_an_earlier_attempt_spent(tmp_path):
    record = run_trial(spec(tmp_path, "tests.trainables.worker_ends:reports_then_raises_then_raises_at_once",
                            retries=1))
    assert record["status"] == "failed" and record["attempts"] == 2 and record["reports"] == []
    assert record["exposure"] == 2
    assert [(a["ended"], a["step"]) for a in ledger(tmp_path)] == [("raised", 2), ("raised", None)]
    used = facts.budget_used([record], {"budget": {"exposure": 3, "unit": "epoch"}}, None, None)
    assert used["steps"] == 2


def test_a_trial_a_watchdog_killed_records_the_steps_it_reported_before_the_kill(tmp_path):
    book = Ledger.load(tmp_path / "t", "s1")
    book.start(1)
    book.end(1, "oom", {"attempt": 1, "type": "OutOfMemory", "message": "over 1 MiB", "traceback": ""}, 2)
    record = run_trial(spec(tmp_path, "tests.trainables.worker_ends:three_steps"))
    assert record["status"] == "oom" and record["exposure"] == 2
