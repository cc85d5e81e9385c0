"""Issue 20's integrity cases on a real local Ray run: one arm's broken data never judges another arm."""

from __future__ import annotations

import json

import pytest
import yaml

from planner._dispatch.driver import run
from planner._store.writer import read_jsonl

pytestmark = pytest.mark.ray


def test_leaky_shifted_and_same_arms_are_invalid_invalid_and_accept(ray_local, in_repo, tmp_path):
    arm = lambda name: {"name": name, "overrides": [f"data.kind={name}", "level=0.55"]}  # noqa: E731
    contract = {
        "version": 1, "name": "like-with-like", "hypothesis": "Each arm raises val_acc by 0.05.",
        "trainable": "tests.trainables.integrity:split_arms",
        "config": {"values": {"data": {"kind": "clean"}, "level": 0.5}},
        "factor": {"name": "data", "keys": ["data.kind", "level"]},
        "baseline": {"name": "clean", "overrides": ["data.kind=clean"]},
        "arms": [arm("leaky"), arm("shifted"), arm("same")],
        "metric": {"name": "val_acc", "mode": "max"}, "acceptance": {"min_effect": 0.02},
        "seeds": [0, 1, 2], "budget": {"exposure": 2},
        "data": {"unit": "row", "independent": {"pairs": [["train", "test"]], "by": ["unit", "patient"]},
                 "fixed": ["test"], "require": ["train", "test"]},
    }
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract))
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result
    decisions = {d["arm"]: d for d in json.loads((result.run_dir / "decisions.json").read_text())["decisions"]}
    assert {a: d["decision"] for a, d in decisions.items()} == {"leaky": "invalid", "shifted": "invalid",
                                                                "same": "accept"}, decisions
    assert "split_overlap" in decisions["leaky"]["reason"]
    assert "unmatched_data" in decisions["shifted"]["reason"] and "clean" in decisions["shifted"]["reason"]
    records = read_jsonl(result.run_dir / "trials.jsonl")
    unmatched = [v for r in records for v in r.get("violations") or [] if v["kind"] == "unmatched_data"]
    assert unmatched and all("clean" in v["arms"] for v in unmatched)  # never two treatment arms
    assert not [v for r in records for v in r.get("violations") or [] if v["kind"] == "split_varies"]
