"""SIGTERM is an interruption (issue #22.5): a real `plan run` subprocess on an embedded Ray, sent SIGTERM
mid-tuning, ends like Ctrl-C: state `interrupted`, exit 3, the `to resume:` line, nothing of Ray's on the
terminal. Before: Ray's own handler (installed by ray.init) won: `failed | internal error: SystemExit: 1`,
exit 1, Ray's `*** SIGTERM received` dump, no resume line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from planner._store.writer import read_jsonl
from tests._runs import synthetic_contract

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
TUNING = {"trials_per_arm": 6, "seeds": [100], "sampler": {"name": "random", "seed": 0},
          "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}}}


def test_sigterm_mid_tuning_is_an_interruption_with_the_resume_line(tmp_path):
    data = synthetic_contract(name="sigterm", trainable="tests.trainables.synthetic:slow", seeds=[0, 1],
                              budget={"exposure": 3}, tuning=TUNING)
    data["config"]["values"]["recipe"]["sleep"] = 0.5
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    runs = tmp_path / "runs"
    ray_tmp = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # Ray's socket paths must fit 107 bytes
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "planner", "run", str(path), "--runs-dir", str(runs)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        run_dir = None
        while time.monotonic() < deadline and proc.poll() is None:
            found = sorted(runs.glob("*/*/trials.jsonl"))
            if found and any(r["phase"] == "tune" for r in read_jsonl(found[0])):
                run_dir = found[0].parent
                break
            time.sleep(0.1)
        assert run_dir is not None, proc.communicate(timeout=60)
        os.kill(proc.pid, signal.SIGTERM)  # the driver alone, as `kill PID` or SLURM's first signal
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 3, (proc.returncode, out[-2000:], err[-2000:])
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "interrupted", state
    assert "to resume:  plan run" in out and "--resume" in out, out[-2000:]
    assert "SIGTERM" not in err and "SystemExit" not in err and "internal error" not in (out + err), err[-2000:]
    assert not any(line.startswith(("(raylet)", "***", "[20")) or "ray." in line for line in err.splitlines()), err
    ended = [e for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == "run_ended"]
    assert ended and ended[-1]["state"] == "interrupted"
    assert not (run_dir / "lock").exists()
