"""The live side of a run folder: the `latest` pointer, the live reports a running trial leaves,
the ETA."""

from __future__ import annotations

import os
import sys

import pytest

from planner import RunError, UsageError
from planner._dispatch.progress import Progress
from planner._store.live import (
    LiveWriter,
    follow_latest,
    new_progress,
    read_live_progress,
    read_live_reports,
    write_latest,
)


def test_latest_names_the_run_beside_it_and_a_folder_is_returned_as_given(tmp_path):
    run = tmp_path / "runs" / "exp" / "20260101-000000-abcd"
    run.mkdir(parents=True)
    write_latest(tmp_path / "runs", "exp", run.name)
    pointer = tmp_path / "runs" / "exp" / "latest"
    assert pointer.is_file() and not pointer.is_symlink()
    assert follow_latest(pointer) == run
    assert follow_latest(run) == run


@pytest.mark.parametrize("content", ["", "../../etc", "a/b", "\x1b[31m"])
def test_a_latest_with_bad_content_is_a_sentence(tmp_path, content):
    pointer = tmp_path / "latest"
    pointer.write_text(content)
    with pytest.raises(UsageError, match="should hold the id of a run"):
        follow_latest(pointer)


def test_a_latest_naming_a_run_that_is_gone_says_so(tmp_path):
    (tmp_path / "latest").write_text("20260101-000000-abcd\n")
    with pytest.raises(UsageError, match="moved or removed"):
        follow_latest(tmp_path / "latest")


def test_live_reports_read_back_by_trial_a_torn_last_line_left_out(tmp_path):
    writer = LiveWriter(tmp_path)
    writer.report("t0", 1, 0.5, {"loss": 1.0, "acc": float("nan")})
    writer.report("t1", 1, 0.4, {"loss": 2.0})
    writer.report("t0", 2, 1.0, {"loss": 0.5})
    writer.progress(new_progress("tune", 3.0, 4, 10.0, 6.0))
    writer.close()
    with open(tmp_path / "live" / "reports.jsonl", "ab") as handle:
        handle.write(b'{"trial_id": "t0", "st')
    live = read_live_reports(tmp_path)
    assert [r.step for r in live["t0"]] == [1, 2] and live["t0"][0].metrics["acc"] is None
    assert live["t1"][0].metrics == {"loss": 2.0}
    progress = read_live_progress(tmp_path)
    assert progress is not None and (progress.phase, progress.eta_s) == ("tune", 6.0)


def test_a_live_file_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "live").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "live" / "reports.jsonl")
    with pytest.raises(RunError, match="symbolic link"):
        read_live_reports(tmp_path)


def test_the_eta_is_the_expected_steps_left_at_the_measured_seconds_per_step():
    p = Progress(
        ["a"], {("tune", "a"): 4}, metric="m", mode="max", decision_metric="m", max_wall_time_s=None
    )
    assert p.eta_s() is None  # no estimate, nothing done
    p.steps_expected = 100.0
    p.started("tune", "a")
    assert p.eta_s() is None  # no step done yet: no rate to measure
    p.reported("t0", 10)
    p.first_started -= 20.0  # twenty seconds for those ten steps
    eta = p.eta_s()
    assert eta is not None and 179.0 <= eta <= 181.0  # 90 steps left at 2 s a step
    p.ended({"trial_id": "t0", "phase": "tune", "arm": "a", "status": "completed", "exposure": 10})
    assert p.steps_done == 10 and "left" in p.header()


def test_follow_redraws_until_the_run_is_no_longer_running(capsys, monkeypatch):
    from planner._dispatch.progress import follow

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # a terminal: rich's Live redraws

    states = iter([("running 1", True), ("running 2", True), ("completed", False)])
    calls = []

    def snapshot() -> tuple[str, bool]:
        calls.append(1)
        return next(states)

    follow(snapshot, 0.01)
    assert len(calls) == 3  # read until the state said the run ended, and no more
    assert "completed" in capsys.readouterr().out


def test_follow_into_a_file_appends_each_new_snapshot_as_it_comes(capsys):
    """`plan status --watch > file` (or `| tee`): rich's Live cannot redraw there and printed
    nothing until the run ended; each snapshot that changed is appended at once instead."""
    from planner._dispatch.progress import follow

    states = iter(
        [("running 1\n", True), ("running 1\n", True), ("running 2\n", True), ("done\n", False)]
    )
    seen = []

    def snapshot() -> tuple[str, bool]:
        seen.append(capsys.readouterr().out)  # what was written before this read
        return next(states)

    follow(snapshot, 0.01)
    seen.append(capsys.readouterr().out)
    assert seen == ["", "running 1\n", "", "\nrunning 2\n", "\ndone\n"]
