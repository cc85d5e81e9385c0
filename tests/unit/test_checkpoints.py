"""A command trial's checkpoints (planner._trial.checkpoints): the newest, what the record says of
it, what `keep` removes, and that no link leads any of it out of the trial's folder."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from planner._trial import checkpoints


def _trial(tmp_path: Path) -> Path:
    trial = tmp_path / "run" / "trials" / "tune-a-s0-t000"
    trial.mkdir(parents=True)
    return trial


def _write(path: Path, data: bytes = b"weights", age_s: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if age_s:
        stamp = time.time() - age_s
        os.utime(path, (stamp, stamp))
    return path


def test_the_newest_match_of_any_attempt_and_what_the_record_says_of_it(tmp_path):
    trial = _trial(tmp_path)
    _write(trial / "attempt-1/hydra/ckpt/epoch=0-step=14.ckpt", age_s=30)
    newest = _write(trial / "attempt-1/hydra/ckpt/epoch=2-step=42.ckpt", b"epoch 2", age_s=10)
    _write(trial / "attempt-2/hydra/other.txt")  # no match there
    assert checkpoints.newest(trial, "ckpt/*.ckpt") == newest
    described = checkpoints.describe(newest, trial)
    assert described["path"] == "trials/tune-a-s0-t000/attempt-1/hydra/ckpt/epoch=2-step=42.ckpt"
    assert described["held"] == {"epoch": 2, "global_step": 42}
    import hashlib

    assert described["sha256"] == hashlib.sha256(b"epoch 2").hexdigest()


def test_a_trainer_checkpoint_folder_says_its_step_and_hashes_its_files(tmp_path):
    trial = _trial(tmp_path)
    folder = trial / "attempt-1/hydra/hf/checkpoint-30"
    _write(
        folder / "trainer_state.json",
        json.dumps({"global_step": 30, "epoch": 3.0, "log_history": []}).encode(),
    )
    _write(folder / "model.safetensors", b"w1")
    before = checkpoints.describe(folder, trial)
    assert before["held"] == {"epoch": 3.0, "global_step": 30}
    (folder / "model.safetensors").write_bytes(b"w2")
    assert checkpoints.describe(folder, trial)["sha256"] != before["sha256"]
    assert checkpoints.describe(trial / "attempt-1/hydra/hf", trial)["held"] == {}  # nothing known


@pytest.mark.parametrize("keep, left", [("all", 3), ("last", 1), ("none", 0)])
def test_keep_removes_what_it_need_not_keep(tmp_path, keep, left):
    trial = _trial(tmp_path)
    _write(trial / "attempt-1/hydra/hf/checkpoint-10/model.bin", age_s=30)
    _write(trial / "attempt-1/hydra/hf/checkpoint-20/model.bin", age_s=20)
    _write(trial / "attempt-2/hydra/hf/checkpoint-30/model.bin", age_s=10)
    _write(trial / "attempt-2/hydra/hf/runs/events.out")  # not a checkpoint: stays
    checkpoints.prune(trial, "hf/checkpoint-*", keep)
    remaining = sorted(
        p.relative_to(trial).as_posix() for p in trial.glob("attempt-*/hydra/hf/checkpoint-*")
    )
    assert len(remaining) == left
    if keep == "last":
        assert remaining == ["attempt-2/hydra/hf/checkpoint-30"]
    assert (trial / "attempt-2/hydra/hf/runs/events.out").exists()


def test_no_link_is_followed_out_of_the_trials_folder(tmp_path):
    trial = _trial(tmp_path)
    outside = tmp_path / "outside"
    precious = _write(outside / "ckpt" / "epoch=9.ckpt", b"someone else's")
    _write(outside / "hydra" / "ckpt" / "epoch=8.ckpt", b"someone else's too")
    (trial / "attempt-1" / "hydra").mkdir(parents=True)
    (trial / "attempt-1" / "hydra" / "ckpt").symlink_to(
        outside / "ckpt"
    )  # a folder on the way is a link
    (trial / "attempt-2").mkdir()
    (trial / "attempt-2" / "hydra").symlink_to(
        outside / "hydra"
    )  # the Hydra folder itself is a link
    link = trial / "attempt-3" / "hydra" / "ckpt" / "epoch=7.ckpt"
    link.parent.mkdir(parents=True)
    link.symlink_to(precious)  # a match that is a link
    assert checkpoints.matches(trial, "ckpt/*.ckpt") == [link]
    assert checkpoints.newest(trial, "ckpt/*.ckpt") is None  # a link is never continued from
    checkpoints.prune(trial, "ckpt/*.ckpt", "none")
    assert not link.is_symlink() and not link.exists()  # the link went, as a link
    assert precious.read_bytes() == b"someone else's"
    assert (outside / "hydra" / "ckpt" / "epoch=8.ckpt").read_bytes() == b"someone else's too"


def test_disk_bytes_counts_the_trials_own_files_not_what_links_point_to(tmp_path):
    trial = _trial(tmp_path)
    assert checkpoints.disk_bytes(tmp_path / "nowhere") is None
    _write(trial / "attempt-1/hydra/ckpt/a.ckpt", b"x" * 100_000)
    own = checkpoints.disk_bytes(trial)
    assert own >= 100_000
    big = _write(tmp_path / "outside" / "big.bin", b"y" * 1_000_000)
    (trial / "big-link").symlink_to(big)
    assert checkpoints.disk_bytes(trial) < own + 100_000


def _attempt(trial: Path, n: int, steps: list[int], torn: bool = False) -> Path:
    attempt = trial / f"attempt-{n}"
    (attempt / "hydra").mkdir(parents=True)
    lines = "".join(
        json.dumps({"step": s, "metrics": {"acc": s / 10, "loss": float("nan") if s == 2 else 1.0}})
        + "\n"
        for s in steps
    )
    (attempt / "reports.jsonl").write_text(lines + ('{"step": 9, "metr' if torn else ""))
    return attempt


def test_a_continuation_holds_what_each_earlier_attempt_reported_before_it_continued(tmp_path):
    """Attempt 1 reported steps 1-5 and its checkpoint held step 2; attempt 2 continued at 3 and
    reported 3-4 before a kill tore its log; this attempt continues at step 4: steps 1-3 are held,
    step 3 as attempt 2 reported it, non-finite values as a record stores them."""
    from planner._trial.command import _attempt_dirs, _held_reports

    trial = tmp_path / "trial"
    _attempt(trial, 1, [1, 2, 3, 4, 5])
    _attempt(trial, 2, [3, 4], torn=True)
    (trial / "attempt-10").mkdir()  # numbered past 9: after attempt 2, not between 1 and 2
    (trial / "attempt-x").mkdir()  # not an attempt
    (trial / "attempt-3").symlink_to(tmp_path)  # a link is never read as an attempt
    earlier = _attempt_dirs(trial)
    assert [p.name for p in earlier] == ["attempt-1", "attempt-2", "attempt-10"]
    held = _held_reports(earlier, None, [{"step": 4, "metrics": {"acc": 0.4}}])
    assert [(r["step"], r["metrics"]["acc"]) for r in held] == [(1, 0.1), (2, 0.2), (3, 0.3)]
    assert held[1]["metrics"]["loss"] == "nan"
    # nothing reported by this attempt (it failed at once): every step the earlier attempts hold
    assert [r["step"] for r in _held_reports(earlier, None, [])] == [1, 2, 3, 4]
