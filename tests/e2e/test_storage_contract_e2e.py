"""The contract's `storage:` (docs/cluster.md, "Checkpoints across nodes"): a real `plan run` on an
embedded Ray keeps each trial's files in the storage the contract names (moto's S3 server on
loopback), `--storage` overrides it, the run folder records the storage in effect, and a `--resume`
with another storage is refused before anything runs (its checkpoints would not be found)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._runs import synthetic_contract, write_contract_data
from tests._s3 import s3_server

pytestmark = pytest.mark.ray
REPO = Path(__file__).resolve().parents[2]

TRAINABLE = """import json, os


def train(config, trial):
    for step in range(1, trial.budget + 1):
        with open(os.path.join(trial.dir, "ckpt.json"), "w") as f:
            json.dump({"step": step}, f)
        value = config["recipe"]["level"] + 0.001 * trial.seed + 0.01 * step
        trial.report(step, val_acc=value, test_acc=value)
"""


def _plan(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", "run", "contract.yaml", "--runs-dir", "runs", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _storage_events(run_dir: Path) -> list[str]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e["storage"] for e in map(json.loads, lines) if e["event"] == "storage_chosen"]


@pytest.mark.timeout(900)
def test_the_contracts_storage_keeps_the_trials_files_and_a_resume_keeps_the_storage(tmp_path):
    with s3_server("checkpoints") as s3:
        uri = s3.uri("planner")
        (tmp_path / "stored_trainable.py").write_text(TRAINABLE)
        contract = synthetic_contract(
            name="stored",
            trainable="stored_trainable:train",
            seeds=[0, 1],
            budget={"exposure": 2},
            storage=uri,
        )
        write_contract_data(tmp_path, contract)
        env = {**os.environ, "PYTHONPATH": str(REPO), **s3.keys}
        done = _plan(tmp_path, env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        (run_dir,) = [p for p in (tmp_path / "runs" / "stored").iterdir() if p.is_dir()]
        assert _storage_events(run_dir) == [uri]
        trials = [json.loads(x)["trial_id"] for x in (run_dir / "trials.jsonl").open()]
        stored = s3.stored("planner/")
        assert len(trials) == 4 and all(
            f"planner/stored/{run_dir.name}/{t}/ckpt.json" in stored for t in trials
        ), stored

        # a resume with another storage: refused before anything runs, the run's storage named
        other = _plan(tmp_path, env, "--resume", str(run_dir), "--storage", s3.uri("elsewhere"))
        assert other.returncode == 2, other.stdout[-2000:] + other.stderr[-2000:]
        assert "keeps its trials' files in the storage s3://checkpoints/planner" in other.stderr
        assert "Traceback" not in other.stderr
        # with the contract's own storage it resumes (nothing is left to run)
        again = _plan(tmp_path, env, "--resume", str(run_dir))
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert _storage_events(run_dir) == [uri, uri]

        # --storage overrides the contract's: the files go to that folder, none to the bucket
        local = tmp_path / "shared-mount"
        local.mkdir()
        before = set(s3.stored())
        moved = _plan(tmp_path, env, "--storage", str(local))
        assert moved.returncode == 0, moved.stdout[-2000:] + moved.stderr[-2000:]
        assert set(s3.stored()) == before
    runs = sorted(p for p in (tmp_path / "runs" / "stored").iterdir() if p.is_dir())
    newest = [p for p in runs if p != run_dir][0]
    assert _storage_events(newest) == [str(local)]
    assert len(list(local.glob(f"stored/{newest.name}/*/ckpt.json"))) == 4
