"""A cut-short `command:` trial continues from its checkpoint, and keeps only what `keep`
says.

A real Lightning app (tests/trainables/lightning_resume) saves a checkpoint every epoch and ends its
process after epoch 3 of a fresh start, as a lost node would; the trial's retry gets
`ckpt_path=<newest checkpoint>` and continues with epoch 3 (Lightning counts from 0), run by the
planner's own trial loop.
"""

from __future__ import annotations

import csv
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from planner import command_trainable
from planner._contract.compose import compose_arms
from planner._contract.model import Contract
from planner._trial import checkpoints
from planner._trial.protocol import run_trial
from planner._trial.spec import TrialSpec

APP = Path(__file__).resolve().parents[1] / "trainables" / "lightning_resume"


def _spec(
    tmp_path: Path,
    *,
    keep: str = "last",
    retries: int = 1,
    die_after: int = 3,
    die_how: str = "exit",
    session: str = "",
) -> TrialSpec:
    contract_data = yaml.safe_load((APP / "contract.yaml").read_text())
    contract_data["command"]["checkpoint"]["keep"] = keep
    contract = Contract.model_validate(contract_data)
    composed = compose_arms(contract, APP)
    assert composed.problems == []
    trainable = command_trainable(contract, APP, composed.configs)
    config = json.loads(json.dumps(composed.configs["base"]))
    config["die_after"], config["die_how"] = die_after, die_how
    return TrialSpec(
        trial_id="confirm-base-s0",
        phase="confirm",
        arm="base",
        seed=0,
        index=0,
        params={},
        config=config,
        budget=5,
        dir=str(tmp_path / "run" / "trials" / "confirm-base-s0"),
        trainable="",
        metric="val_acc",
        retries=retries,
        extra={"command": trainable.to_dict(), "session": session},
    )


def _epochs(metrics_csv: Path) -> list[int]:
    with open(metrics_csv, newline="") as handle:
        return sorted({int(row["epoch"]) for row in csv.DictReader(handle) if row.get("epoch")})


@pytest.mark.slow
def test_a_trial_that_dies_after_epoch_3_continues_from_epoch_3_on_its_retry(tmp_path):
    spec = _spec(tmp_path)
    record = run_trial(spec)
    trial = Path(spec.dir)

    assert record["status"] == "completed", record["errors"]
    assert record["attempts"] == 2 and record["errors"][0]["type"] == "CommandFailedError"
    assert record["resumed"] is True
    first = _epochs(next(trial.glob("attempt-1/hydra/lightning_logs/version_*/metrics.csv")))
    second = _epochs(next(trial.glob("attempt-2/hydra/lightning_logs/version_*/metrics.csv")))
    assert first == [0, 1, 2]
    assert second[0] == 3 and second == [3, 4]  # continued, not started over
    assert [r["step"] for r in record["reports"]] == [4, 5]
    # the epochs the first attempt trained are on the record, read from its own log, so that the
    # selection (mean_last_k) counts them as it counts an uninterrupted trial's
    held = record["resumed_from"]["reports"]
    assert [r["step"] for r in held] == [1, 2, 3]
    assert [r["metrics"]["val_acc"] for r in held] == _values(trial, "attempt-1", "val_acc")
    from planner._stats.select import metric_values

    assert len(metric_values(record, "val_acc")) == 5
    resumed = record["resumed_from"]
    assert resumed["path"].startswith("trials/confirm-base-s0/attempt-1/hydra/ckpt/epoch=2-")
    assert resumed["held"]["epoch"] == 2 and len(resumed["sha256"]) == 64
    composed = yaml.safe_load(
        (trial / "attempt-2" / "hydra" / ".hydra" / "config.yaml").read_text()
    )
    assert composed["ckpt_path"] == str((tmp_path / "run" / resumed["path"]).resolve())
    # keep: last: one checkpoint is left of the trial's eight, the newest
    left = sorted(
        p.relative_to(trial).as_posix() for p in trial.glob("attempt-*/hydra/ckpt/*.ckpt")
    )
    assert len(left) == 1 and left[0].startswith("attempt-2/hydra/ckpt/epoch=4-"), left
    assert record["disk_bytes"] == checkpoints.disk_bytes(trial) > 0


@pytest.mark.slow
def test_a_fresh_trial_is_not_resumed_and_keep_none_leaves_no_checkpoint(tmp_path):
    spec = _spec(tmp_path, keep="none", retries=0, die_after=99)
    record = run_trial(spec)
    trial = Path(spec.dir)
    assert record["status"] == "completed" and record["attempts"] == 1, record["errors"]
    assert record["resumed"] is False and record["resumed_from"] is None
    assert not list(trial.rglob("*.ckpt"))
    assert (
        trial / "attempt-1" / "hydra" / ".hydra" / "config.yaml"
    ).exists()  # only the checkpoints went
    assert (
        os.path.getsize(next(trial.glob("attempt-1/hydra/lightning_logs/version_*/metrics.csv")))
        > 0
    )


@pytest.mark.slow
def test_a_trial_whose_worker_was_killed_continues_in_the_next_session(tmp_path):
    """The process running the trial (a Ray worker, under a driver that is killed) dies at epoch 3:
    the supervisor ends the script, and the resumed run's attempt continues from the checkpoint of
    epoch 2."""
    first = _spec(tmp_path, die_how="hang", session="session-1", retries=0)
    (tmp_path / "spec.pkl").write_bytes(pickle.dumps(first))
    root = Path(__file__).resolve().parents[2]
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pickle, sys; from planner._trial.protocol import run_trial; "
            "run_trial(pickle.loads(open(sys.argv[1], 'rb').read()))",
            str(tmp_path / "spec.pkl"),
        ],
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        },
    )
    trial = Path(first.dir)
    try:
        deadline = time.monotonic() + 240
        while not list(trial.glob("attempt-1/hydra/ckpt/epoch=2-*.ckpt")):
            assert worker.poll() is None and time.monotonic() < deadline, (
                "the first attempt never saved epoch 2"
            )
            time.sleep(0.2)
        time.sleep(1.0)  # into the hang at the start of epoch 3
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        assert _script_ends(
            str(trial / "attempt-1"), within_s=15
        )  # the supervisor ended the hanging script
        ledger = json.loads((trial / ".planner-attempts.json").read_text())
        assert [a["ended"] for a in ledger["attempts"]] == [
            None
        ]  # cut short, as a killed driver leaves it

        record = run_trial(_spec(tmp_path, die_how="hang", session="session-2", retries=0))
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert record["status"] == "completed" and record["attempts"] == 1, record["errors"]
    assert record["resumed"] is True and record["resumed_from"]["held"]["epoch"] == 2
    assert _epochs(next(trial.glob("attempt-2/hydra/lightning_logs/version_*/metrics.csv"))) == [
        3,
        4,
    ]
    assert [r["step"] for r in record["reports"]] == [4, 5]
    assert [r["step"] for r in record["resumed_from"]["reports"]] == [
        1,
        2,
        3,
    ]  # the killed session's epochs


def _values(trial: Path, attempt: str, name: str) -> list[float]:
    """`name`'s value at each epoch of the attempt's Lightning CSV log (its validation rows)."""
    log = next(trial.glob(f"{attempt}/hydra/lightning_logs/version_*/metrics.csv"))
    with open(log, newline="") as handle:
        return [float(row[name]) for row in csv.DictReader(handle) if row.get(name)]


def _script_ends(attempt: str, within_s: float) -> bool:
    """No process has the attempt's folder on its command line (`hydra.run.dir=...`), within
    `within_s`."""
    import psutil

    deadline = time.monotonic() + within_s
    while True:
        left = []
        for process in psutil.process_iter(["cmdline"]):
            if any(attempt in part for part in process.info["cmdline"] or []):
                left.append(process)
        if not left:
            return True
        if time.monotonic() > deadline:
            for process in left:
                process.kill()
            return False
        time.sleep(0.1)
