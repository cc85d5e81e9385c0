"""Lineage end to end: real `plan run`s (real Ray, real Optuna) write the project ledger; a promoted
arm's logged config is the next contract's baseline, exactly; concurrent writers lose no line."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from planner import load_run, run
from planner._cli.main import main
from planner._lineage.ledger import read
from tests._runs import interrupt_joined_run, lineage_contract, write_yaml

REPO = Path(__file__).resolve().parents[2]

TINY = lineage_contract()


write = functools.partial(write_yaml, sort_keys=False)  # write(path, data)


APPEND = """
import sys
from planner._lineage.ledger import append
for i in range(int(sys.argv[3])):
    append(sys.argv[1], "promoted", run="x/" + sys.argv[2], arm=str(i), line="l", note="n" * 2000)
"""


def test_two_processes_appending_to_the_ledger_lose_no_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPEND, str(tmp_path), who, "300"], cwd=REPO, env=env
        )
        for who in ("a", "b")
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line whole: none interleaved or torn
    assert len(records) == 600
    for who in ("a", "b"):
        assert [r["arm"] for r in records if r["run"] == f"x/{who}"] == [str(i) for i in range(300)]


@pytest.mark.ray
def test_two_concurrent_plan_runs_both_reach_the_ledger(tmp_path):
    runs = tmp_path / "runs"
    procs = []
    for name in ("one", "two"):
        path = write(tmp_path / f"{name}.yaml", dict(TINY, name=name, seeds=[0, 1]))
        ray_tmp = tempfile.mkdtemp(
            prefix="rl", dir="/tmp"
        )  # short: Ray's socket paths must fit 107 bytes
        env = {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONPATH": str(REPO)}
        procs.append(
            (
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "planner",
                        "run",
                        str(path),
                        "--runs-dir",
                        str(runs),
                        "--quiet",
                    ],
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
                ray_tmp,
            )
        )
    for proc, ray_tmp in procs:
        out, _ = proc.communicate(timeout=600)
        shutil.rmtree(ray_tmp, ignore_errors=True)
        assert proc.returncode == 0, out
    ledger = read(runs)
    assert not ledger.notes
    runs_seen = ledger.runs()
    assert sorted(e.started["name"] for e in runs_seen.values()) == ["one", "two"]
    assert all(
        e.ended and e.ended["state"] == "completed" and e.ended["decisions"]
        for e in runs_seen.values()
    )


@pytest.mark.ray
def test_run_promote_and_start_from_the_promoted_arm(ray_local, in_repo, tmp_path, capsys):
    runs = tmp_path / "runs"
    first = dict(
        TINY,
        tuning={
            "trials_per_arm": 2,
            "seeds": [1000],
            "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
        },
    )
    result = run(write(tmp_path / "first.yaml", first), runs_dir=runs, quiet=True)
    assert result.state == "completed" and result.decisions[0]["decision"] == "accept"
    assert main(["promote", str(result.run_dir), "--arm", "high", "--note", "e2e"]) == 0
    assert "is the baseline of line 'tiny'" in capsys.readouterr().out

    second = {k: v for k, v in TINY.items() if k != "config"}
    second.update(
        name="wider",
        hypothesis="A wider recipe raises val_acc.",
        factor={"name": "width", "keys": ["recipe.width"]},
        baseline={"from_run": f"runs/tiny/{result.run_dir.name}", "arm": "high"},
        arms=[{"name": "wide", "overrides": ["recipe.width=2"]}],
    )
    path = write(tmp_path / "second.yaml", second)
    assert main(["validate", str(path), "--runs-dir", str(runs), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["baseline_from"]["promoted"] and summary["baseline_from"]["decision"] == "accept"
    # the baseline is exactly what the promoted arm's confirmation trials received, tuned lr
    # included
    confirmed = [
        r["config"]
        for r in load_run(result.run_dir).records
        if r["phase"] == "confirm" and r["arm"] == "high"
    ]
    tuned = json.loads((result.run_dir / "selection.json").read_text())["arms"]["high"]["params"][
        "recipe.lr"
    ]
    assert confirmed[0]["recipe"]["lr"] == tuned != 0.01

    later = run(path, runs_dir=runs, quiet=True)
    assert later.state == "completed" and later.decisions[0]["decision"] == "accept"
    assert yaml.safe_load((later.run_dir / "configs" / "high.yaml").read_text()) == confirmed[0]
    given = {r["config"]["recipe"]["lr"] for r in load_run(later.run_dir).records}
    assert given == {tuned}

    capsys.readouterr()  # the runs' own lines (their folders)
    assert main(["log", "--json", "--runs-dir", str(runs)]) == 0
    (line,) = json.loads(capsys.readouterr().out)["lines"]
    assert [b["arm"] for b in line["baselines"]] == ["base", "high"]
    assert line["baselines"][1]["from"]["run"] == f"tiny/{result.run_dir.name}"
    assert line["baselines"][1]["experiments"][0]["decisions"][0]["decision"] == "accept"
    assert (line["in_force"]["arm"], line["in_force"]["note"]) == ("high", "e2e")


@pytest.mark.ray
def test_an_interrupted_run_resumed_to_completion_counts_its_test_again(
    ray_local, in_repo, tmp_path, capsys
):
    """Before: the interrupt rewrote lineage.json to "this run tested nothing (state interrupted;
    ...)" and the resumed run that completed kept saying so (lineage.json, the final `lineage:`
    line, the report)."""

    runs = tmp_path / "runs"
    slow = {"values": {"recipe": {"name": "a", "level": 0.5, "lr": 0.01, "width": 1, "sleep": 0.4}}}
    earlier = run(
        write(tmp_path / "one.yaml", dict(TINY, name="one", config=slow)), runs_dir=runs, quiet=True
    )
    assert earlier.state == "completed" and earlier.decisions[0]["decision"] == "accept"
    path = write(tmp_path / "two.yaml", dict(TINY, name="two", config=slow, seeds=[0, 1, 2, 3]))
    run_dir, _, _ = interrupt_joined_run(
        path, runs, ray_local.get_runtime_context().gcs_address, "two/*/trials.jsonl", 1, poll_s=0.1
    )
    stopped = json.loads((run_dir / "lineage.json").read_text())["repetition"]
    assert (
        stopped["this_run_tested"] is False and stopped["count"] == 1
    )  # the interrupted run tested nothing

    assert main(["run", str(path), "--runs-dir", str(runs), "--resume", str(run_dir)]) == 0
    out = capsys.readouterr().out
    rep = json.loads((run_dir / "lineage.json").read_text())["repetition"]
    assert rep["this_run_tested"] is True and rep["count"] == 2 and rep["family_alpha"] > 0.05
    assert "tested nothing" not in rep["sentence"] and "this test included" in rep["sentence"]
    lineage = [line for line in out.splitlines() if line.startswith("lineage:")]
    assert lineage and "tested 2 times" in lineage[0] and "tested nothing" not in out, out
    assert main(["report", str(run_dir)]) == 0
    report = capsys.readouterr().out
    assert "this test included" in report and "tested nothing" not in report
