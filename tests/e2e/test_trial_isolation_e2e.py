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
    (run,) = (tmp_path / "runs" / "inline").iterdir()
    records = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    assert len(records) == 10
    assert {r["status"] for r in records} == {"completed"}, [r.get("errors") for r in records]
    assert all(r["attempts"] == 1 for r in records)
