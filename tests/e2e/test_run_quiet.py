"""`plan run` on the terminal shows planner's lines only: Ray's own go to the run folder's ray.log.

Before: every run ended with Ray's "Token authentication is enabled for this Ray
cluster..." notice, one "This method is only available when the process is a
worker. Current mode: 0" per tuning trial (the driver asking Ray for a task id),
and sometimes a Tune worker's SystemExit traceback forwarded from the worker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from tests._runs import synthetic_contract

pytestmark = pytest.mark.ray

CONTRACT = synthetic_contract(
    name="quiet",
    seeds=[0, 1],
    tuning={
        "trials_per_arm": 2,
        "seeds": [100],
        "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
    },
)
# planner's own lines: the progress display ("[0:00:12] ..."), the final summary
PLANNER_LINE = re.compile(
    r"^(\[\d+:\d\d:\d\d\] |run folder: |run state: |studies: +optuna-dashboard |tuning: +tuned "
    r"|decisions:$|  \w+: "
    r"(accept|reject|inconclusive|incomplete) )"
)
RAY_WORDS = re.compile(
    r"[Tt]oken authentication|only available when the process is a worker|raylet|pid=\d+\)|"
    r"Traceback|SystemExit|\bray\.[a-z_]|\bTune\b|WARNING|INFO"
)


def test_plan_run_prints_no_line_of_rays(in_repo, tmp_path):
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(CONTRACT))
    env = {**os.environ, "PYTHONPATH": str(in_repo)}
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "planner", "run", str(path), "--runs-dir", str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stderr == "", f"stderr is not empty:\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert any(line.startswith("run state:  completed") for line in lines), done.stdout
    foreign = [line for line in lines if line and not PLANNER_LINE.match(line)]
    assert not foreign, "lines that are not planner's:\n" + "\n".join(foreign)
    noisy = [line for line in lines if RAY_WORDS.search(line)]
    assert not noisy, "Ray's words on the terminal:\n" + "\n".join(noisy)

    (run_dir,) = (tmp_path / "runs" / "quiet").glob("*/")
    ray_log = (run_dir / "ray.log").read_text()
    assert "Ray's own logs (raylet, GCS, workers) are in " in ray_log
    session_logs = re.search(r"are in (\S+)", ray_log).group(1)
    assert os.path.isdir(session_logs), ray_log
