"""A large journal read again: load_run gives the same tables and facts from the user's cache as
from the journal, misses when one byte of the journal changed, and treats a planted, damaged or
foreign entry, or a cache folder others may write, as a miss, never as data or an error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import planner
from bench.synthetic_run import make_run
from planner import RunError
from planner._store import cache


@pytest.fixture
def run(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(cache, "MIN_BYTES", 0)  # the small test journal counts as large
    monkeypatch.setenv("PLANNER_CACHE_DIR", str(tmp_path / "cache"))
    return make_run(
        tmp_path / "runs" / "demo" / "20261130-120000-abcd",
        tune_trials=6,
        with_failures=True,
        torn=True,
    )


def entries(run: Path) -> list[Path]:
    folder = run.parents[2] / "cache"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def same(a: planner.RunResults, b: planner.RunResults) -> None:
    pd.testing.assert_frame_equal(a.trials, b.trials)
    pd.testing.assert_frame_equal(a.reports, b.reports)
    assert a.notes == b.notes
    assert (a.failures, a.violations, a.heldout, a.budget, a.cost, a.data) == (
        b.failures,
        b.violations,
        b.heldout,
        b.budget,
        b.cost,
        b.data,
    )


def uncached(run: Path, monkeypatch, **kwargs) -> planner.RunResults:
    with monkeypatch.context() as m:
        m.setenv("PLANNER_CACHE_DIR", "off")
        return planner.load_run(run, **kwargs)


def test_a_journal_read_again_gives_what_reading_it_gives(run, monkeypatch):
    first = planner.load_run(run)
    assert len(entries(run)) == 1
    assert any("incomplete" in note for note in first.notes)  # the torn last line, kept
    again = planner.load_run(run)
    same(again, uncached(run, monkeypatch))
    same(first, again)
    for kwargs in ({"metrics": ["loss"]}, {"metrics": ["nope"]}, {"reports": False}):
        same(planner.load_run(run, **kwargs), uncached(run, monkeypatch, **kwargs))


def test_a_changed_journal_misses_and_its_change_is_read(run, monkeypatch):
    planner.load_run(run)
    journal = run / "trials.jsonl"
    text = journal.read_text()
    first = text.index('"val_acc": ') + len('"val_acc": ')
    journal.write_text(text[:first] + "0.999999" + text[first + 8 :])
    changed = planner.load_run(run)
    assert (changed.reports["value"] == 0.999999).sum() == 1
    same(changed, uncached(run, monkeypatch))
    assert len(entries(run)) == 2


def test_a_planted_or_damaged_entry_is_a_miss(run, monkeypatch):
    planner.load_run(run)
    (entry,) = entries(run)
    for planted in (b"", b"\x93\x01\x02", entry.read_bytes()[:-40]):
        entry.write_bytes(planted)
        same(planner.load_run(run), uncached(run, monkeypatch))


def test_an_entry_that_does_not_hold_together_is_a_miss(run, monkeypatch):
    planner.load_run(run)
    (entry,) = entries(run)
    gathered = cache.load(entry.name)
    assert gathered is not None
    gathered.n_reports = gathered.n_reports[:-1]  # one record short of its counts
    cache.store(entry.name, gathered)
    same(planner.load_run(run), uncached(run, monkeypatch))


def test_a_cache_folder_others_may_write_is_not_used(run, monkeypatch):
    folder = run.parents[2] / "cache"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o777)
    planner.load_run(run)
    assert entries(run) == []
    os.chmod(folder, 0o700)
    link = run.parents[2] / "link"
    link.symlink_to(folder)
    monkeypatch.setenv("PLANNER_CACHE_DIR", str(link))
    planner.load_run(run)
    assert entries(run) == []


def test_the_cache_can_be_turned_off(run, monkeypatch):
    monkeypatch.setenv("PLANNER_CACHE_DIR", "off")
    planner.load_run(run)
    assert entries(run) == []


def test_a_running_run_is_read_from_its_journal(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv("PLANNER_CACHE_DIR", str(tmp_path / "cache"))
    run = make_run(tmp_path / "runs" / "demo" / "20261130-120000-abcd", state="running")
    planner.load_run(run)
    assert not (tmp_path / "cache").exists()


def test_a_damaged_journal_is_refused_every_time_and_never_kept(run):
    journal = run / "trials.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"status": "', '"status": 5, "x": "', 1)
    journal.write_text("".join(lines))
    for _ in range(2):
        with pytest.raises(RunError, match="status"):
            planner.load_run(run)
    assert entries(run) == []


def test_the_records_are_the_journals_own_whether_the_tables_came_from_the_cache_or_not(
    run, monkeypatch
):
    """`RunResults.records` reads the journal itself, every report included: the cache holds the
    tables, never the records."""
    journal = [
        json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()[:-1]
    ]  # the last line is torn
    for results in (planner.load_run(run), planner.load_run(run), uncached(run, monkeypatch)):
        assert [r["trial_id"] for r in results.records] == [r["trial_id"] for r in journal]
        assert [len(r["reports"]) for r in results.records] == [len(r["reports"]) for r in journal]
        assert set(results.trials["trial_id"]) == {r["trial_id"] for r in journal}
    assert len(entries(run)) == 1


def test_a_damaged_record_is_refused_when_the_records_are_asked_for(run, monkeypatch):
    journal = run / "trials.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    results = uncached(run, monkeypatch)
    lines[1] = lines[1].replace('"status": "', '"status": 5, "x": "', 1)
    journal.write_text("".join(lines))
    with pytest.raises(RunError, match="status"):
        _ = results.records
