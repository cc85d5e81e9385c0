"""Issue 20's integrity cases on a real local Ray run: one arm's broken data never judges another
arm."""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import json

import pytest
import yaml

from planner import load_run, run

pytestmark = pytest.mark.ray


def test_leaky_shifted_and_same_arms_are_invalid_invalid_and_accept(ray_local, in_repo, tmp_path):
    arm = lambda name: {"name": name, "overrides": [f"data.kind={name}", "level=0.55"]}  # noqa: E731
    contract = {
        "version": 1,
        "name": "like-with-like",
        "hypothesis": "Each arm raises val_acc by 0.05.",
        "trainable": "tests.trainables.integrity:split_arms",
        "config": {"values": {"data": {"kind": "clean"}, "level": 0.5}},
        "factor": {"name": "data", "keys": ["data.kind", "level"]},
        "baseline": {"name": "clean", "overrides": ["data.kind=clean"]},
        "arms": [arm("leaky"), arm("shifted"), arm("same")],
        "metric": {"name": "val_acc", "mode": "max"},
        "acceptance": {"min_effect": 0.02},
        "seeds": [0, 1, 2],
        "budget": {"exposure": 2},
        "data": {
            "unit": "row",
            "independent": {"pairs": [["train", "test"]], "by": ["unit", "patient"]},
            "fixed": ["test"],
            "require": ["train", "test"],
        },
    }
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract))
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result
    decisions = {
        d["arm"]: d
        for d in json.loads((result.run_dir / "decisions.json").read_text())["decisions"]
    }
    assert {a: d["decision"] for a, d in decisions.items()} == {
        "leaky": "invalid",
        "shifted": "invalid",
        "same": "accept",
    }, decisions
    assert "split_overlap" in decisions["leaky"]["reason"]
    assert (
        "unmatched_data" in decisions["shifted"]["reason"]
        and "clean" in decisions["shifted"]["reason"]
    )
    records = load_run(result.run_dir).records
    unmatched = [
        v for r in records for v in r.get("violations") or [] if v["kind"] == "unmatched_data"
    ]
    assert unmatched and all("clean" in v["arms"] for v in unmatched)  # never two treatment arms
    assert not [
        v for r in records for v in r.get("violations") or [] if v["kind"] == "split_varies"
    ]


TRAIN_PY = """
import sys
import os

import planner

level = float(open("level.txt").read())  # a file beside the script, read from the working folder
for item in sys.argv[1:]:
    key, _, value = item.partition("=")
    if key == "recipe.level":
        level += float(value)
seed, budget = int(os.environ["PLANNER_SEED"]), int(os.environ["PLANNER_BUDGET"])
for step in range(1, budget + 1):
    planner.report(step, val_acc=level - 0.3 * (1 - step / budget) + 0.002 * ((seed * 7 + step) % 5))
"""


def test_a_next_control_written_in_another_folder_runs_there(ray_local, in_repo, tmp_path, capsys):
    from planner._cli.main import main

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN_PY)
    (project / "level.txt").write_text("0.5")
    contract = {
        "version": 1,
        "name": "rising",
        "hypothesis": "The treatment raises val_acc.",
        "command": "python train.py",
        "config": {"values": {"recipe": {"level": 0.0}}},
        "factor": {"name": "recipe", "keys": ["recipe.level"]},
        "baseline": {"name": "base", "overrides": ["recipe.level=0.0"]},
        "arms": [{"name": "treat", "overrides": ["recipe.level=0.1"]}],
        "metric": {"name": "val_acc", "mode": "max"},
        "acceptance": {"min_effect": 0.05},
        "seeds": [0, 1, 2],
        "budget": {"exposure": 3},
    }
    (project / "contract.yaml").write_text(yaml.safe_dump(contract))
    first = run(project / "contract.yaml", runs_dir=tmp_path / "runs", quiet=True)
    assert first.state == "completed", first
    elsewhere = tmp_path / "controls" / "next"
    elsewhere.mkdir(parents=True)
    target = elsewhere / "next.yaml"
    assert main(["audit", str(first.run_dir), "--next", str(target)]) == 0
    capsys.readouterr()
    written = yaml.safe_load(target.read_text())
    assert written["command"]["cwd"] == "../../project" and written["budget"]["exposure"] == 6
    second = run(target, runs_dir=tmp_path / "runs", quiet=True)
    records = load_run(second.run_dir).records
    assert (
        second.state == "completed" and records and all(r["status"] == "completed" for r in records)
    ), [(r["trial_id"], r["status"], r.get("errors")) for r in records]
    identity = json.loads((second.run_dir / "identity.json").read_text())
    assert identity["code"]["trainable_file"] == str((project / "train.py").resolve())
