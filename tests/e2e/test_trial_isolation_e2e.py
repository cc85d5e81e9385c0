"""A trial's folder, file descriptors and working folder are its own: what one trainable does to
them does not break the next trial in the same Ray worker, nor Ray's worker itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests._contract_helpers import FIXTURES, write_contract

REPO = Path(__file__).resolve().parents[2]

UNRULY = """
import os, shutil

def train(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=0.5 + config["model"]["width"] / 12800 + trial.seed / 1000)
    if trial.seed == 1:  # into its own folder, then the folder removed under it
        os.chdir(trial.dir)
        shutil.rmtree(trial.dir)
    elif trial.seed == 3:  # the worker's standard output and error closed
        os.close(1)
        os.close(2)
    elif trial.seed == 4:  # standard input replaced
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
"""


def test_what_a_trainable_does_to_its_folder_and_fds_is_undone(tmp_path):
    """Before: the trial after one that removed its own folder from inside it died (`WorkerDied`,
    charged to another arm); one that closed fds 1 and 2 failed inside Ray (`Bad file
    descriptor`)."""
    (tmp_path / "unruly.py").write_text(UNRULY)
    text = (FIXTURES / "inline.yaml").read_text()
    text = text.replace("fixture_trainable:train", "unruly:train").replace(
        "metric: {name: loss, mode: min}", "metric: {name: val_acc, mode: max}"
    )
    contract = write_contract(tmp_path, text)
    out = subprocess.run(
        [sys.executable, "-m", "planner", "run", str(contract), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = [p for p in (tmp_path / "runs" / "inline").iterdir() if p.is_dir()]
    records = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    assert len(records) == 10
    assert {r["status"] for r in records} == {"completed"}, [r.get("errors") for r in records]
    assert all(r["attempts"] == 1 for r in records)


STUBBORN = """
import argparse, json, os, signal, time

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--width", type=int, default=64)
parser.add_argument("--output_dir", default=".")
args = parser.parse_args()
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a trainer that does not stop when asked
for epoch in range(1, args.epochs + 1):
    time.sleep(3)
    with open(os.path.join(args.output_dir, "metrics.jsonl"), "a") as f:
        f.write(json.dumps({"epoch": epoch, "val_acc": 0.5 + args.width / 12800}) + "\\n")
"""


def _trainers(marker: str) -> list:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if marker in " ".join(proc.info["cmdline"] or []) and (
                proc.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_no_process_of_a_trial_outlives_plan_run_stopped_by_sigterm(tmp_path):
    """Before: a command's supervisor and its trainer (which ignores SIGTERM) were still running,
    re-parented to PID 1, after `plan run` had exited."""
    import signal
    import time

    from tests._runs import end_plan_run, start_plan_run

    (tmp_path / "stubborn.py").write_text(STUBBORN)
    data = {
        "version": 1,
        "name": "stubborn",
        "hypothesis": "A wider model is better.",
        "command": {
            "run": "python stubborn.py",
            "args": "argparse",
            "seed_key": "seed",
            "budget_key": "epochs",
            "metrics": {
                "file": "metrics.jsonl",
                "format": "jsonl",
                "step": "epoch",
                "names": {"val_acc": "val_acc"},
            },
        },
        "config": {
            "values": {
                "seed": 0,
                "epochs": 3,
                "width": 64,
                "output_dir": "${hydra:runtime.output_dir}",
            }
        },
        "factor": {"name": "width", "keys": ["width"]},
        "baseline": {"name": "narrow", "overrides": ["width=64"]},
        "arms": [{"name": "wide", "overrides": ["width=128"]}],
        "metric": {"name": "val_acc", "mode": "max"},
        "acceptance": {"min_effect": 0.001},
        "seeds": [0, 1, 2, 3, 4],
        "budget": {"unit": "epoch", "exposure": 3},
    }
    marker = f"--output_dir={tmp_path}"
    proc, runs, ray_tmp = start_plan_run(tmp_path, data, "st")
    try:
        deadline = time.monotonic() + 300
        while not _trainers(marker) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _trainers(marker), proc.communicate(timeout=60)
        time.sleep(1)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=180)
        left = _trainers(marker) + _trainers("supervisor.py")
        left = [p for p in left if marker in " ".join(p.cmdline())]
    finally:
        end_plan_run(proc, ray_tmp)
    assert proc.returncode == 3, (out[-2000:], err[-2000:])
    assert left == [], [p.cmdline() for p in left]
