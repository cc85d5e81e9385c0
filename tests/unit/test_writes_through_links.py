"""planner never writes through a link a run folder holds (docs/reliability.md, "Hostile and
careless run folders"): a hard-linked journal, lock or ledger is refused for writing, a FIFO as a
lock is refused at once, and the scrub of a trial's Hydra folder follows no link and refuses a
linked folder."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from planner import RunError
from planner._core.errors import LinkedFileError
from planner._core.redact import Redactor
from planner._store.files import rewrite_tree
from planner._store.jsonl import AppendFile, heal
from planner._store.lock import acquire
from tests._run_folders import OUTSIDE, outside


@pytest.mark.parametrize("name", ["trials.jsonl", "events.jsonl"])
def test_a_hardlinked_jsonl_file_is_refused_for_writing(run, name):
    """`cp -al` snapshots: --resume appended 6 records to a hard link's other name and cut its last
    line."""
    target = outside(run)
    target.write_text(OUTSIDE + "half a line")
    (run / name).unlink(missing_ok=True)
    os.link(target, run / name)
    with pytest.raises(LinkedFileError, match="hard links"):
        AppendFile(run / name)
    with pytest.raises(LinkedFileError, match="hard links"):
        heal(run / name)
    assert target.read_text() == OUTSIDE + "half a line"


def test_a_hardlinked_lock_is_refused(run):
    """A stale lock hardlinked to a file outside: taking it over wrote the lock's JSON into that
    file."""
    target = outside(run)
    target.write_text(json.dumps({"pid": 2**30, "host": os.uname().nodename, "started": "x"}))
    before = target.read_text()
    os.link(target, run / "lock")
    with pytest.raises(LinkedFileError):
        acquire(run)
    assert target.read_text() == before


def test_the_ledger_and_its_lock_are_opened_as_the_run_lock(tmp_path):
    """A link as runs/ledger.jsonl.lock created a file outside; a hardlinked ledger took the
    appends."""
    from planner._lineage.ledger import append

    runs = tmp_path / "runs"
    runs.mkdir()
    target = tmp_path / "elsewhere.txt"
    (runs / "ledger.jsonl.lock").symlink_to(target)
    with pytest.raises(RunError, match="symbolic link"):
        append(runs, "run_started", run="a/b")
    assert not target.exists()
    (runs / "ledger.jsonl.lock").unlink()
    target.write_text(OUTSIDE)
    os.link(target, runs / "ledger.jsonl")
    with pytest.raises(LinkedFileError):
        append(runs, "run_started", run="a/b")
    assert target.read_text() == OUTSIDE


def test_a_fifo_as_the_ledger_lock_is_refused_at_once(tmp_path):
    """A FIFO as the ledger lock hung `plan run` with no output."""
    from planner._lineage.ledger import append

    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkfifo(runs / "ledger.jsonl.lock")
    raised: list[BaseException] = []

    def attempt():
        try:
            append(runs, "run_started", run="a/b")
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            raised.append(error)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the hung open so the thread can end
        fd = os.open(runs / "ledger.jsonl.lock", os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
    assert (
        not worker.is_alive()
        and raised
        and isinstance(raised[0], RunError)
        and "FIFO" in str(raised[0])
    )


def _hydra_outputs(trial: Path) -> Path:
    hydra = trial / "attempt-1" / "hydra"
    (hydra / ".hydra").mkdir(parents=True)
    (hydra / ".hydra" / "config.yaml").write_text("password: hunter2-PLANTED\n")
    return hydra


def test_the_tree_rewrite_follows_no_link(tmp_path):
    """The scrub of a trial's Hydra folder rewrote an outside .pypirc and a docker config.json
    through a link."""
    trial = tmp_path / "trials" / "t1"
    hydra = _hydra_outputs(trial)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".pypirc").write_text("password = hunter2-PLANTED\n")
    (hydra / "linked_dir").symlink_to(elsewhere)
    (hydra / "linked_file.txt").symlink_to(elsewhere / ".pypirc")
    os.link(elsewhere / ".pypirc", hydra / "hardlinked.txt")
    redact = Redactor.for_run(environ={}).text
    assert rewrite_tree(trial, hydra, redact) == 2  # config.yaml and the hard link's own name
    assert "PLANTED" not in (hydra / ".hydra" / "config.yaml").read_text()
    assert "PLANTED" not in (hydra / "hardlinked.txt").read_text()
    assert (elsewhere / ".pypirc").read_text() == "password = hunter2-PLANTED\n"


def test_the_tree_rewrite_refuses_a_linked_folder(tmp_path):
    trial = tmp_path / "trials" / "t1"
    (trial / "attempt-1").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text('{"auths": {"ghcr.io": {"auth": "PLANTEDxyz"}}}')
    (trial / "attempt-1" / "hydra").symlink_to(elsewhere)
    with pytest.raises(RunError, match="link"):
        rewrite_tree(trial, trial / "attempt-1" / "hydra", Redactor.for_run(environ={}).text)
    assert "PLANTEDxyz" in (elsewhere / "config.json").read_text()


def test_a_command_attempts_scrub_writes_nothing_through_a_linked_hydra_folder(tmp_path):
    """trials/<id>/attempt-1/hydra replaced by a link to an outside folder: the scrub that
    --resume runs (a killed attempt's Hydra files) rewrote the outside .pypirc and docker
    config.json."""
    from planner._trial.command import scrub_files

    trial = tmp_path / "trials" / "t1"
    (trial / "attempt-1").mkdir(parents=True)
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / ".pypirc").write_text("[pypi]\npassword = hunter2-PLANTED\n")
    (outside / "config.json").write_text(
        '{"auths": {"ghcr.io": {"auth": "aHVudGVyMi1QTEFOVEVE"}}}\n'
    )
    (trial / "attempt-1" / "hydra").symlink_to(outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    with pytest.raises(RunError):
        scrub_files(trial / "attempt-1" / "hydra", Redactor.for_run(environ={}))
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
