"""plan status on synthetic runs: completed, running (locked), torn."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from bench.synthetic_run import make_run
from planner._cli.main import main
from planner._results.run_status import format_status, read_status

ARMS = ("sgd", "adam")


@pytest.fixture(scope="module")
def completed(tmp_path_factory) -> Path:
    return make_run(
        tmp_path_factory.mktemp("runs") / "done",
        arms=ARMS,
        seeds=4,
        tune_trials=6,
        reports_per_trial=9,
    )


@pytest.fixture(scope="module")
def running(tmp_path_factory) -> Path:
    return make_run(
        tmp_path_factory.mktemp("runs") / "live",
        arms=ARMS,
        seeds=4,
        tune_trials=6,
        reports_per_trial=9,
        state="running",
        torn=True,
    )


def test_status_of_a_completed_run(completed):
    s = read_status(completed)
    assert s["state"] == "completed" and s["trials_ended"] == s["trials_planned"] == 2 * 6 + 2 * 4
    rows = {(t["phase"], t["arm"]): t for t in s["trials"]}
    assert (
        rows[("tune", "adam")]["ended"] == 6 and rows[("tune", "adam")]["statuses"]["failed"] == 1
    )
    sgd = rows[("confirm", "sgd")]
    assert {k: sgd[k] for k in ("phase", "arm", "planned", "ended", "statuses")} == {
        "phase": "confirm",
        "arm": "sgd",
        "planned": 4,
        "ended": 4,
        "statuses": {"completed": 4},
    }
    # the mean of what the confirmation trials reported last, as the decision compares them
    lasts = [
        r["reports"][-1]["metrics"]["val_acc"]
        for r in map(json.loads, (completed / "trials.jsonl").read_text().splitlines())
        if (r["phase"], r["arm"]) == ("confirm", "sgd")
    ]
    assert sgd["metric"] == "val_acc" and sgd["mean"] == pytest.approx(sum(lasts) / len(lasts))
    assert sgd["best"] is None and rows[("tune", "adam")]["best"] is not None
    text = format_status(s)
    lines = text.splitlines()
    assert lines[0].startswith("run optimizer-compare / done: completed (all planned trials ended)")
    assert "trials ended: 20 of 20 planned" in lines
    assert any(
        line.split()[:7] == ["confirm", "adam", "4", "/", "4", "completed", "4;"]
        and line.endswith(f"mean val_acc {rows[('confirm', 'adam')]['mean']:.4g}")
        for line in lines
    )
    assert (
        "failures: 3 (diverged 1, failed 1, protocol_error 1); 1 trial(s) succeeded after a retry"
        in lines
    )
    assert (
        "held-out ledger: test_acc evaluated 8 time(s) of at most 32 (confirm 8, reeval 0); "
        "1 tuning trial(s) reported it: test exposure" in lines
    )
    assert "protocol violations: 2 (heldout_in_tuning 1, report_past_budget 1)" in lines
    assert lines[-1].startswith("decisions: adam ")
    assert "locked" not in text


def test_status_of_a_running_run_shows_the_lock_and_what_is_in_flight(running):
    s = read_status(running)
    assert s["state"] == "running" and s["lock"]["pid"] == 31337
    assert s["trials_ended"] == 7 and s["trials_planned"] == 20
    assert len(s["running"]) == 1 and s["heldout"]["evaluations"] == 0
    text = format_status(s)
    assert "locked by pid 31337 on gpu-box-01 since 2026-11-29T18:17:00.000000Z" in text
    assert "trials ended: 7 of 20 planned" in text
    assert f"started, not ended: {s['running'][0]}" in text
    assert "decisions: none yet" in text
    assert "note: the last line of trials.jsonl (line 8) is incomplete" in text


def test_a_stale_lock_on_this_host_is_called_stale(tmp_path, running):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(running, copy)
    (copy / "lock").write_text(
        json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname(), "started": "x"})
    )
    assert "(that process is gone: a stale lock)" in format_status(read_status(copy))


def test_cli_status_prints_the_formatted_status(completed, capsys):
    assert main(["status", str(completed)]) == 0
    assert capsys.readouterr().out == format_status(read_status(completed))


def test_status_tells_a_live_lock_by_the_lock_s_own_rule():
    """One rule with the lock: a reused pid or a dead one is not a live holder; another host cannot
    be told."""
    import os

    from planner._results.run_status import _lock_alive
    from planner._store.lock import process_started

    here = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started": process_started(os.getpid()),
    }
    assert _lock_alive(here) is True
    if here["pid_started"] is not None:
        assert _lock_alive({**here, "pid_started": here["pid_started"] - 3600}) is False
    assert _lock_alive({**here, "pid": 2**22 + 12345, "pid_started": None}) is False
    assert _lock_alive({**here, "host": "another-host"}) is None


def test_status_names_the_optuna_dashboard_command_once_the_run_has_studies(tmp_path, monkeypatch):
    run = make_run(tmp_path / "runs", arms=ARMS, seeds=2, tune_trials=2, reports_per_trial=3)
    monkeypatch.chdir(tmp_path)
    assert read_status(run)["dashboard"] is None
    assert "tuning studies" not in format_status(read_status(run))
    (run / "studies.log").write_text("")
    shown = f"optuna-dashboard {(run / 'studies.log').relative_to(tmp_path)}"
    status = read_status(run)
    assert status["dashboard"] == shown
    assert f"\ntuning studies: {shown}\n" in format_status(status)
