"""What the framework examples' e2e tests share: the run, its records, and what every planned trial
must show."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from planner import load_run, run

REPO = Path(__file__).resolve().parents[2]
DECIDED = {"accept", "reject", "inconclusive"}


def run_example(name: str, tmp_path: Path, *, copy: bool = True, trials_per_arm: int | None = None):
    """`plan run` on examples/<name>/contract.yaml (a copy of the folder, for a command app);
    (result, records). `trials_per_arm` tunes each arm with that many trials instead of the
    example's (in the copy): each trial of a command app starts a Python process that imports its
    framework, and what a test reads in every trial's reports does not need several per arm."""
    folder = REPO / "examples" / name
    if copy:
        folder = Path(
            shutil.copytree(
                folder, tmp_path / name, ignore=shutil.ignore_patterns("outputs", "runs")
            )
        )
    if trials_per_arm is not None:
        assert copy, "trials_per_arm changes the copy's contract, never the example's"
        contract = yaml.safe_load((folder / "contract.yaml").read_text())
        contract["tuning"]["trials_per_arm"] = trials_per_arm
        (folder / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    result = run(folder / "contract.yaml", runs_dir=tmp_path / "runs", quiet=True)
    return result, load_run(result.run_dir).records


def check_every_planned_trial_recorded(result, records: list[dict], contract_path: Path) -> None:
    """Each trial of the run's plan.json has one record, and the plan is what the contract asks
    for."""
    assert result.state == "completed", result
    plan = json.loads((result.run_dir / "plan.json").read_text())
    planned = sorted(t["trial_id"] for phase in plan["phases"] for t in phase["trials"])
    assert sorted(r["trial_id"] for r in records) == planned
    contract = yaml.safe_load(contract_path.read_text())
    arms = 1 + len(contract["arms"])
    tuning = contract["tuning"]
    assert len(planned) == arms * (
        tuning["trials_per_arm"] * len(tuning["seeds"]) + len(contract["seeds"])
    )


def heldout_never_read(records: list[dict], heldout: str) -> list[str]:
    """The confirmation trials that ended because the held-out metric was never read."""
    return [
        r["trial_id"]
        for r in records
        if r["phase"] == "confirm"
        and r["status"] == "protocol_error"
        and any(f"metric {heldout} never reported" in str(e) for e in r["errors"])
    ]


def last_hydra_folder(run_dir: Path, trial_id: str) -> Path:
    """The Hydra output folder of a command trial's last attempt (a retried trial has several)."""
    folders = sorted(
        (run_dir / "trials" / trial_id).glob("attempt-*/hydra"),
        key=lambda p: int(p.parent.name.removeprefix("attempt-")),
    )
    assert folders, f"{trial_id} has no attempt folder"
    return folders[-1]
