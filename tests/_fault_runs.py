"""The fault-injection contract and what a faulted run folder is checked for: each planned trial
ended once, the decisions, the records by trial id (tests/e2e/test_faults.py and the tests of a
worker that dies after its trial)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner import load_run
from tests._runs import contract_writer

FAULT_CONTRACT: dict[str, Any] = {
    "version": 1,
    "name": "faults",
    "hypothesis": "The treatment raises val_acc.",
    "trainable": "tests.trainables.faulty:steady",
    "config": {"values": {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.0}}},
    "factor": {"name": "fault", "keys": ["fault.kind", "fault.level"]},
    "baseline": {"name": "base", "overrides": []},
    "arms": [{"name": "treat", "overrides": ["fault.level=0.7"]}],
    "metric": {"name": "val_acc", "mode": "max", "heldout": "test_acc"},
    "acceptance": {"min_effect": 0.05},
    "seeds": [0, 1, 2],
    "budget": {"exposure": 4},
}
TUNING: dict[str, Any] = {
    "trials_per_arm": 4,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 3},
    "space": {"fault.lr": {"log_uniform": [1.0e-4, 1.0]}},
}

# contract(folder, file="contract.yaml", **patch): FAULT_CONTRACT, top-level keys patched, written
contract = contract_writer(FAULT_CONTRACT)


def ids(run_dir: Path) -> list[str]:
    return [r["trial_id"] for r in load_run(run_dir).records]


def planned(run_dir: Path) -> list[str]:
    plan = json.loads((Path(run_dir) / "plan.json").read_text())
    return [t["trial_id"] for phase in plan["phases"] for t in phase["trials"]]


def assert_each_planned_trial_once(run_dir: Path) -> None:
    ended = ids(run_dir)
    assert len(ended) == len(set(ended)), f"a trial ran twice: {sorted(ended)}"
    assert sorted(ended) == sorted(planned(run_dir))


def decisions(run_dir: Path) -> list[dict]:
    """decisions.json's rows without what legitimately differs between runs (nothing, today)."""
    return json.loads((Path(run_dir) / "decisions.json").read_text())["decisions"]


def by_id(run_dir: Path) -> dict[str, dict]:
    return {r["trial_id"]: r for r in load_run(run_dir).records}
