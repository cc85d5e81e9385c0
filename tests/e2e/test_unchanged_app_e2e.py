"""Apps that do not know about the planner, under `plan run` with ASHA.

examples/unchanged_app (a CSV in Lightning's CSVLogger layout), and two log
writers of tests/trainables/log_apps (JSON lines; a Trainer-style
trainer_state.json per checkpoint): the seed and the budget reach them as
Hydra overrides, their metrics are read from their own logs while they run,
early stopping cuts trials mid-run, and the decision finds the known effect.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from planner import load_run, run
from planner._store.writer import read_jsonl
from tests._runs import example_app

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
LOG_APPS = REPO / "tests" / "trainables" / "log_apps"


def _attempt(run_dir: Path, trial_id: str) -> Path:
    return run_dir / "trials" / trial_id / "attempt-1"


def _seed_in_hydra_config(run_dir: Path, trial_id: str) -> int:
    return yaml.safe_load(
        (_attempt(run_dir, trial_id) / "hydra" / ".hydra" / "config.yaml").read_text()
    )["seed"]


def _check_seeds_and_cuts(
    run_dir: Path, trials: list[dict], exposure: int, lines_per_step: str
) -> None:
    confirm = [r for r in trials if r["phase"] == "confirm"]
    # the seed reached the app through its own config: each confirmation trial ran its own seed
    assert all(_seed_in_hydra_config(run_dir, r["trial_id"]) == r["seed"] for r in confirm)
    assert len({r["seed"] for r in confirm}) == len(confirm) // 2
    for arm in {r["arm"] for r in confirm}:
        finals = [r["reports"][-1]["metrics"] for r in confirm if r["arm"] == arm]
        assert len({tuple(sorted(m.items())) for m in finals}) == len(finals), (
            f"seeds gave equal results: {finals}"
        )
    # ASHA cut tuning trials while the script ran: fewer steps reported and fewer printed than the
    # budget
    cut = [r for r in trials if r["status"] == "early_stopped"]
    assert cut, [(r["trial_id"], r["status"], r["exposure"]) for r in trials]
    printed = {}
    for r in cut:
        assert r["exposure"] < exposure
        printed[r["trial_id"]] = len(
            re.findall(
                lines_per_step, (_attempt(run_dir, r["trial_id"]) / "stdout.log").read_text()
            )
        )
    # a fast script can reach its end between the rung's report and the stop (the scheduler's
    # decision stands, the record keeps the reports up to the rung); at least one was stopped while
    # it still ran
    assert min(printed.values()) < exposure, (
        f"every cut trial ran to its end before it was stopped: {printed}"
    )
    assert all(r["status"] == "completed" and r["exposure"] == exposure for r in confirm), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in confirm
    ]


def test_the_unchanged_example_app_runs_under_asha_and_finds_the_effect(ray_local, tmp_path):
    path = example_app("unchanged_app", tmp_path, lambda contract: contract.update(seeds=[0, 1, 2]))

    result = run(path, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = load_run(result.run_dir).records
    assert sorted(r["phase"] for r in trials) == ["confirm"] * 6 + ["tune"] * 12
    _check_seeds_and_cuts(result.run_dir, trials, 8, r"(?m)^epoch \d+:")
    # the reports are the CSV's validation rows: epochs 0..7 read as steps 1..8, both named columns
    done = next(r for r in trials if r["phase"] == "confirm")
    assert [rep["step"] for rep in done["reports"]] == list(range(1, 9))
    assert set(done["reports"][0]["metrics"]) == {"val_acc", "val_loss"}
    csv_rows = (
        (_attempt(result.run_dir, done["trial_id"]) / "hydra" / "metrics.csv")
        .read_text()
        .splitlines()
    )
    val_rows = [line for line in csv_rows[1:] if not line.split(",")[3] == ""]
    assert float(val_rows[-1].split(",")[3]) == done["reports"][-1]["metrics"]["val_acc"]
    # no planner.report: the report file stayed empty
    assert (_attempt(result.run_dir, done["trial_id"]) / "reports.jsonl").stat().st_size == 0
    (decision,) = result.decisions
    assert decision["arm"] == "standardized" and decision["decision"] == "accept", decision


def _log_app_contract(folder: Path, script: str, metrics: dict) -> Path:
    shutil.copytree(LOG_APPS, folder)
    contract = {
        "version": 1,
        "name": f"log-app-{script.split('_')[0]}",
        "hypothesis": "The better model raises eval accuracy by at least 5 points.",
        "command": {
            "run": f"python {script}",
            "seed_key": "seed",
            "budget_key": "max_steps",
            "metrics": metrics,
        },
        "config": {"dir": "conf", "name": "config"},
        "factor": {"name": "model", "keys": ["model.better"]},
        "baseline": {"name": "plain", "overrides": ["model.better=false"]},
        "arms": [{"name": "better", "overrides": ["model.better=true"]}],
        "metric": {"name": "acc", "mode": "max"},
        # welch: two seeds leave the paired test one degree of freedom, where the apps' exact effect
        # needs none
        "acceptance": {"min_effect": 0.05, "test": "welch"},
        "seeds": [0, 1],
        "budget": {"unit": "step", "exposure": 4, "max_trial_time": "2m"},
        "tuning": {
            "trials_per_arm": 4,
            "seeds": [100],
            "sampler": {"name": "random", "seed": 3},
            "space": {"optimizer.lr": {"log_uniform": [0.003, 0.3]}},  # where lr moves the score
            "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 2},
        },
    }
    path = folder / "contract.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


@pytest.mark.parametrize(
    "script, metrics",
    [
        (
            "jsonl_app.py",
            {
                "file": "logs/*.jsonl",
                "format": "jsonl",
                "step": "step",
                "names": {"acc": "eval_acc"},
            },
        ),
        (
            "hf_state_app.py",
            {
                "file": "**/trainer_state.json",
                "format": "hf_trainer_state",
                "step": "step",
                "names": {"acc": "eval_accuracy"},
            },
        ),
    ],
)
def test_json_lines_and_trainer_state_writers_under_asha(ray_local, tmp_path, script, metrics):
    contract = _log_app_contract(tmp_path / "app", script, metrics)

    result = run(contract, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = load_run(result.run_dir).records
    _check_seeds_and_cuts(result.run_dir, trials, 4, r"(?m)^step \d+$")
    done = next(r for r in trials if r["phase"] == "confirm")
    assert [rep["step"] for rep in done["reports"]] == [
        1,
        2,
        3,
        4,
    ]  # the train-loss rows were skipped
    (decision,) = result.decisions
    assert decision["arm"] == "better" and decision["decision"] == "accept", decision


def test_ctrl_c_prints_the_resume_command_and_resume_counts_what_it_keeps(tmp_path):
    """`plan run` in a terminal-like subprocess: SIGINT mid-tuning, then the printed command, run
    as printed."""
    import os
    import shlex
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    def edit(contract: dict) -> None:
        contract["seeds"] = [0, 1]
        contract["tuning"]["trials_per_arm"] = 4

    example_app("unchanged_app", tmp_path, edit)
    ray_tmp = tempfile.mkdtemp(
        prefix="rc", dir="/tmp"
    )  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_TMPDIR": ray_tmp}

    def plan(*args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "planner", *args],
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    first = plan("run", "app/contract.yaml", "--runs-dir", "runs", "--quiet")
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            found = list((tmp_path / "runs").glob("*/*/trials.jsonl"))
            if found and len(read_jsonl(found[0])) >= 2:
                break
            assert first.poll() is None, first.communicate()[0]
            time.sleep(0.2)
        first.send_signal(signal.SIGINT)
        output, _ = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 3, output
    run_dir = found[0].parent
    kept = len({r["trial_id"] for r in load_run(run_dir).records})
    (line,) = [ln for ln in output.splitlines() if ln.startswith("to resume:")]
    command = shlex.split(line.removeprefix("to resume:"))
    assert command == [
        "plan",
        "run",
        "app/contract.yaml",
        "--quiet",
        "--resume",
        str(Path("runs") / run_dir.relative_to(tmp_path / "runs")),
    ], line

    second = plan(*command[1:])
    output, _ = second.communicate(timeout=600)
    assert second.returncode == 0, output
    counts = re.search(
        r"resumed: (\d+) trials? kept, (\d+) trials? run again .*?, (\d+) trials? not started yet",
        output,
    )
    assert counts, output
    assert int(counts[1]) == kept and int(counts[1]) + int(counts[2]) + int(counts[3]) == 12, output
    assert "run state:  completed" in output
    assert (
        f"run folder: {command[-1]}" in output.splitlines()
    )  # relative, as the first run printed it
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_plan_reeval_reproduces_the_unchanged_apps_confirmation(ray_local, tmp_path, capsys):
    from planner._cli.main import main

    def edit(contract: dict) -> None:
        contract["seeds"] = [0, 1]
        contract["tuning"]["trials_per_arm"] = 1
        contract["budget"]["exposure"] = 3
        contract["tuning"]["early_stop"]["grace"] = 1

    result = run(
        example_app("unchanged_app", tmp_path, edit), runs_dir=tmp_path / "runs", quiet=True
    )
    assert result.state == "completed", result

    assert main(["reeval", str(result.run_dir), "--arm", "standardized"]) == 0
    assert "verdict: reproduced: 2 of 2 logged seeds exactly" in capsys.readouterr().out
    new = [r for r in load_run(result.run_dir).records if r["phase"] == "reeval"]
    assert sorted(_seed_in_hydra_config(result.run_dir, r["trial_id"]) for r in new) == [0, 1]
