"""Files planted in a run folder (links, hard links, FIFOs, deep trees, folders in place of files),
tried on the parts that met them: ray.log's handler, a trial's output.log, a command trial's
checkpoints, the walks of a trial's folder, `plan export -o`, and a resume's files replaced whole.
Real files, real links, real FIFOs; no Ray. The same cases on real runs:
tests/e2e/test_planted_files_e2e.py."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from planner import RunError
from planner._core.errors import LinkedFileError
from planner._core.redact import Redactor
from planner._dispatch import ray_logs
from planner._store.files import TREE_DEPTH, refuse_in_place, rewrite_tree
from planner._store.resume import REWRITTEN
from planner._trial import checkpoints
from planner._trial.limits import captured_output
from tests._deep_trees import deep_tree, read_deep, remove_deep
from tests._run_folders import OUTSIDE, cli, outside

# ----------------------------------------------------------------------------- F1: ray.log


def _plant(kind: str, path: Path, victim: Path) -> None:
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "dangling":
        path.symlink_to(victim.parent / "created-by-planner.txt")
    elif kind == "hardlink":
        os.link(victim, path)
    else:
        os.mkfifo(path)


def _release(fifo: Path) -> None:
    """Free a thread waiting on the FIFO (in an open for writing, or an open or read for
    reading)."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass
    os.close(reader)


def _in_thread(call, timeout_s: float = 20.0, fifo: Path | None = None):
    """Run `call` in a thread; what it raised (or None); a call still blocked after `timeout_s`
    fails the test (the FIFO it waits on is released first, so that a regression fails this test,
    not the ones after it)."""
    out: list[BaseException | None] = []

    def body():
        try:
            call()
            out.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            out.append(error)

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(timeout_s)
    blocked = not out
    if blocked and fifo is not None:
        _release(fifo)
        worker.join(timeout_s)
    assert not blocked, f"blocked for {timeout_s} s: a planted file was waited on"
    return out[0]


@pytest.mark.parametrize("kind", ["symlink", "dangling", "hardlink", "fifo"])
def test_a_planted_ray_log_is_refused_before_ray_starts(run, kind):
    """ray.log was opened by logging.FileHandler (a plain open): Ray's lines went through a
    symbolic or hard link, a dangling link created the outside file, and the refusal came as a
    logging traceback at first emit."""
    victim = outside(run)
    (run / "ray.log").unlink(missing_ok=True)
    _plant(kind, run / "ray.log", victim)

    def enter():
        with ray_logs.ray_logs_to_run_folder(run):
            logging.getLogger("ray._private").warning("a line Ray would log")

    error = _in_thread(enter, fifo=run / "ray.log" if kind == "fifo" else None)
    assert isinstance(error, LinkedFileError) and "ray.log is a" in str(error)
    assert victim.read_text() == OUTSIDE and not (victim.parent / "created-by-planner.txt").exists()
    assert not any(
        isinstance(h, ray_logs._RunFolderLog) for h in logging.getLogger("ray._private").handlers
    )


def test_ray_log_is_written_when_it_is_a_plain_file(run):
    ray_logger = logging.getLogger("ray")
    before = list(ray_logger.handlers), ray_logger.propagate, ray_logger.level
    try:
        with ray_logs.ray_logs_to_run_folder(run):
            logging.getLogger("ray._private").warning("a line Ray would log")
        ray_logs._ray_log_handler.flush()
        assert "a line Ray would log" in (run / "ray.log").read_text()
    finally:
        ray_logger.removeHandler(ray_logs._ray_log_handler)
        ray_logs._ray_log_handler.close()
        ray_logs._ray_log_handler = None
        ray_logger.handlers[:], ray_logger.propagate = before[0], before[1]
        ray_logger.setLevel(before[2])


# ----------------------------------------------------------------------------- F2, F3: a trial's
# output.log


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_a_planted_output_log_is_neither_written_through_nor_waited_on(tmp_path, kind):
    """output.log was opened with O_NOFOLLOW only: a hard link got the trial's prints, and a FIFO
    blocked the open (for writing, before the watchdog started) forever."""
    victim = tmp_path / "outside.txt"
    victim.write_text(OUTSIDE)
    trial = tmp_path / "trials" / "t1"
    trial.mkdir(parents=True)
    _plant(kind, trial / "output.log", victim)
    printed = []

    def trial_prints():
        with captured_output(
            str(trial / "output.log"), scrub=Redactor.for_run(environ={}).text
        ) as stream:
            print("a resumed trial's print")
            printed.append(stream)

    assert _in_thread(trial_prints, fifo=trial / "output.log" if kind == "fifo" else None) is None
    (stream,) = printed
    assert (
        stream is not None and stream.path is None and stream.dropped > 0
    )  # counted, kept nowhere
    assert victim.read_text() == OUTSIDE


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_trial_whose_output_log_was_refused_says_so_in_its_record(tmp_path, kind):
    """Nothing was written to a planted output.log (right), but the record did not say the prints
    were kept nowhere: a reader took the empty log for a trial that printed nothing."""
    from planner._trial.protocol import run_trial
    from tests._trial_specs import spec

    victim = tmp_path / "outside.txt"
    victim.write_text(OUTSIDE)
    (tmp_path / "t").mkdir()
    _plant(kind, tmp_path / "t" / "output.log", victim)
    record = run_trial(spec("good", tmp_path))
    assert record["status"] == "completed" and victim.read_text() == OUTSIDE
    what = "a symbolic link" if kind == "symlink" else "a FIFO (named pipe)"
    assert record["notes"] == [
        f"{tmp_path / 't' / 'output.log'} is {what}: nothing was written there, and the "
        "trial's prints were kept nowhere"
    ]
    assert "notes" not in run_trial(
        spec("good", tmp_path, tid="plain")
    )  # a plain output.log: no note


def test_a_plain_output_log_keeps_the_prints(tmp_path):
    with captured_output(str(tmp_path / "output.log")):
        print("kept")
    assert (tmp_path / "output.log").read_text() == "kept\n"


# ----------------------------------------------------------------------------- F4: checkpoints


def test_only_regular_files_and_folders_are_checkpoint_candidates(tmp_path):
    """newest() skipped links only: a FIFO matching the glob was the newest checkpoint, and hashing
    it (describe) waited forever for a writer."""
    trial = tmp_path / "run" / "trials" / "confirm-a-s0"
    ckpt = trial / "attempt-1" / "hydra" / "ckpt"
    ckpt.mkdir(parents=True)
    old = ckpt / "epoch=0-step=1.ckpt"
    old.write_bytes(b"weights")
    os.utime(old, (1, 1))
    os.mkfifo(ckpt / "epoch=9-step=99.ckpt")
    found = checkpoints.newest(trial, "ckpt/*.ckpt")
    assert found == old
    folder = ckpt / "epoch=1-step=2.ckpt"  # a checkpoint folder holding a FIFO: hashed without it
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    os.mkfifo(folder / "pipe")
    assert checkpoints.newest(trial, "ckpt/*.ckpt") == folder
    assert _in_thread(lambda: checkpoints.describe(folder, trial), fifo=folder / "pipe") is None


def test_hashing_a_fifo_is_refused_at_once(tmp_path):
    from planner._store.identity import file_sha256

    os.mkfifo(tmp_path / "pipe")
    error = _in_thread(lambda: file_sha256(tmp_path / "pipe"), fifo=tmp_path / "pipe")
    assert isinstance(error, OSError) and "not a regular file" in str(error)


# ----------------------------------------------------------------------------- F5: deep trees


def test_a_deep_tree_in_a_trial_folder_is_measured_not_a_recursion_error(tmp_path, deep_trees):
    """disk_bytes used os.walk, which recurses a level a frame: 1500 nested folders ended the run in
    RecursionError (exit 70, state failed)."""
    trial = tmp_path / "trials" / "t1"
    deep_trees.append(trial)
    deep_tree(trial, 1500, leaf="x" * 10_000)
    assert checkpoints.disk_bytes(trial) >= 10_000
    assert [p.name for p in checkpoints._files(trial)] == ["leaf.txt"]


def test_a_deep_tree_is_not_a_recursion_error_for_the_scrub(tmp_path, deep_trees):
    """rewrite_tree (os.fwalk, recursive) met the same tree in a command trial's Hydra folder."""
    trial = tmp_path / "trials" / "t1"
    hydra = trial / "attempt-1" / "hydra"
    deep_trees.append(hydra / "planted")
    shallow = deep_tree(hydra, 3, leaf="password: hunter2-PLANTED\n")
    deep = deep_tree(hydra / "planted", 1500, leaf="password: hunter2-PLANTED\n")
    assert (
        rewrite_tree(trial, hydra, Redactor.for_run(environ={}).text) == 1
    )  # the folders within TREE_DEPTH
    assert "PLANTED" not in (shallow / "leaf.txt").read_text()
    assert "PLANTED" in read_deep(deep / "leaf.txt") and TREE_DEPTH < 1500


@pytest.fixture
def deep_trees():
    """The folders whose deep chains a test made; removed after it, before pytest's recursive
    clean-up."""
    made: list[Path] = []
    yield made
    for folder in made:
        remove_deep(folder)


# ----------------------------------------------------------------------------- F13: plan export -o


@pytest.mark.parametrize("spelling", ["default", "same", "absolute", "dotdot", "via-link"])
def test_export_refuses_a_linked_export_folder_in_every_spelling(
    run, spelling, capsys, tmp_path, monkeypatch
):
    """`-o $PWD/RUN/export` (or `RUN/../RUN/export`) was not seen as inside the run folder and
    wrote through."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "export").symlink_to(elsewhere)
    (tmp_path / "runlink").symlink_to(run)
    monkeypatch.chdir(run.parents[2])
    rel = os.path.relpath(run)
    spelled = {
        "default": None,
        "same": f"{rel}/export",
        "absolute": str(run.resolve() / "export"),
        "dotdot": f"{rel}/../{run.name}/export",
        "via-link": str(tmp_path / "runlink" / "export"),
    }[spelling]
    code, _, err = cli(
        ["export", rel, "--format", "csv", *(["-o", spelled] if spelled else [])], capsys
    )
    assert code == 3 and "export is a symbolic link" in err, err
    assert list(elsewhere.iterdir()) == []


def test_export_into_a_plain_folder_of_the_run_is_written(run, capsys, monkeypatch):
    monkeypatch.chdir(run.parents[2])
    code, _, err = cli(
        ["export", str(run), "--format", "csv", "-o", str(run.resolve() / "export")], capsys
    )
    assert code == 0, err
    assert sorted(p.name for p in (run / "export").iterdir()) == [
        "decisions.csv",
        "reports.csv",
        "trials.csv",
    ]


# ----------------------------------------------------------------------------- F15a: a folder in
# place of a file


@pytest.mark.parametrize("name", REWRITTEN)
def test_a_folder_in_place_of_a_file_a_resume_replaces_is_refused(run, name):
    """decisions.json as a folder: the resume ended `completed`, exit 0, and wrote no decision."""
    (run / name).unlink(missing_ok=True)
    (run / name).mkdir()
    with pytest.raises(RunError, match=rf"{name} is a folder"):
        refuse_in_place(run, REWRITTEN)


def test_files_in_place_are_not_refused(run):
    (run / "lineage.json").unlink(missing_ok=True)  # missing is fine, a link is replaced by rename
    (run / "selection.json").unlink(missing_ok=True)
    (run / "selection.json").symlink_to(outside(run))
    refuse_in_place(run, REWRITTEN)
