"""Files planted in a finished run folder, then `plan run --resume` reruns one trial (real Ray,
`plan` in a subprocess): ray.log as a symbolic link, output.log as a hard link and as a FIFO, a
1500-deep tree in the trial's folder, a folder in place of decisions.json. The parts one at a time:
tests/unit/test_planted_files.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests._deep_trees import deep_tree, remove_deep
from tests._plan_process import plan
from tests._runs import cut_short

ROOT = Path(__file__).resolve().parents[2]
TRAINABLE = """
import random


def train(config, trial):
    print("a print of", trial.seed)
    rng = random.Random(trial.seed)
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=config["recipe"]["level"] + rng.gauss(0, 0.01))
"""
CONTRACT = {
    "version": 1,
    "name": "planted",
    "hypothesis": "b raises val_acc",
    "trainable": "planted:train",
    "config": {"values": {"recipe": {"name": "a", "level": 0.5}}},
    "factor": {"name": "recipe", "keys": ["recipe.name", "recipe.level"]},
    "baseline": {"name": "base", "overrides": ["recipe.name=a"]},
    "arms": [{"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.7"]}],
    "metric": {"name": "val_acc", "mode": "max"},
    "acceptance": {"min_effect": 0.05},
    "seeds": [0, 1],
    "budget": {"exposure": 1, "max_trial_time": "60s"},
}
AGAIN = "confirm-base-s0"
OUTSIDE = "precious: outside the run folder\n"


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    home = tmp_path_factory.mktemp("planted")
    (home / "planted.py").write_text(TRAINABLE)
    (home / "contract.yaml").write_text(yaml.safe_dump(CONTRACT, sort_keys=False))
    done = plan("run", "contract.yaml", "--quiet", cwd=home, env=environment(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (home / "runs" / "planted").glob("*/")
    return home, run_dir


@pytest.fixture
def resumable(finished, tmp_path):
    """A copy of the finished run whose confirm-base-s0 was cut short (a resume runs it again), an
    outside file."""
    home, run_dir = finished
    run = tmp_path / "runs" / "planted" / run_dir.name
    shutil.copytree(run_dir, run)
    cut_short(run, [AGAIN])
    victim = tmp_path / "outside.txt"
    victim.write_text(OUTSIDE)
    return home, run, victim


def _resume(home: Path, run: Path):
    return plan(
        "run",
        "contract.yaml",
        "--resume",
        str(run),
        "--quiet",
        cwd=home,
        env=environment(),
        timeout=240,
    )


def _record(run: Path) -> dict:
    (record,) = [
        json.loads(line)
        for line in (run / "trials.jsonl").read_text().splitlines()
        if json.loads(line)["trial_id"] == AGAIN
    ]
    return record


def test_a_symlinked_ray_log_is_refused_before_ray_starts(resumable):
    """Ray's log lines were appended to the link's target."""
    home, run, victim = resumable
    (run / "ray.log").unlink()
    (run / "ray.log").symlink_to(victim)
    done = _resume(home, run)
    assert done.returncode == 3 and "ray.log is a symbolic link" in done.stderr, (
        done.stdout + done.stderr
    )
    assert (
        "Traceback" not in done.stderr
        and victim.read_text() == OUTSIDE
        and not (run / "lock").exists()
    )


@pytest.mark.parametrize("kind", ["hardlink", "fifo"])
def test_a_planted_output_log_is_not_written_and_the_trial_runs(resumable, kind):
    """A hard link's other name got the trial's prints; a FIFO hung the resume forever (the trial,
    with max_trial_time, was recorded `timeout`)."""
    home, run, victim = resumable
    log = run / "trials" / AGAIN / "output.log"
    log.unlink()
    if kind == "hardlink":
        os.link(victim, log)
    else:
        os.mkfifo(log)
    done = _resume(home, run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _record(run)["status"] == "completed" and victim.read_text() == OUTSIDE
    what = "a file with 2 hard links" if kind == "hardlink" else "a FIFO (named pipe)"
    (note,) = _record(run)[
        "notes"
    ]  # the record says the prints were kept nowhere, and plan run said it too
    assert note.startswith(f"{log} is {what}") and note.endswith(
        "the trial's prints were kept nowhere"
    )
    assert "output.log is " + what in done.stdout + done.stderr


def test_a_deep_tree_in_the_trial_folder_does_not_end_the_run(resumable):
    """1500 nested folders: `internal error: RecursionError`, exit 70, state failed, no record."""
    home, run, _ = resumable
    deep_tree(run / "trials" / AGAIN, 1500)
    try:
        done = _resume(home, run)
        assert done.returncode == 0, done.stdout + done.stderr
        assert _record(run)["status"] == "completed"
        assert json.loads((run / "state.json").read_text())["state"] == "completed"
    finally:
        remove_deep(
            run / "trials" / AGAIN
        )  # shutil.rmtree (pytest's clean-up) recurses a level a frame


def test_a_folder_in_place_of_decisions_json_is_refused(resumable):
    """The resume ended `completed`, exit 0, with no decision written or printed."""
    home, run, _ = resumable
    (run / "decisions.json").unlink()
    (run / "decisions.json").mkdir()
    done = _resume(home, run)
    assert done.returncode == 3 and "decisions.json is a folder" in done.stderr, (
        done.stdout + done.stderr
    )
    assert "Traceback" not in done.stderr and not (run / "lock").exists()
