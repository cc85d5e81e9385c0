"""A trial of examples/lightning's callback contract run through the worker's own protocol (no
Ray): its spec, and the trainables of tests/trainables/lightning_callback.py."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml

from planner._trial.spec import TrialSpec

REPO = Path(__file__).resolve().parents[1]
CALLBACK_CONTRACT = REPO / "examples" / "lightning" / "contract_callback.yaml"
TRAINABLES = "tests.trainables.lightning_callback"


def callback_spec(
    tmp_path: Path,
    trainable: str,
    *,
    phase: str = "confirm",
    budget: int = 3,
    overrides: Iterable[str] = (),
    session: str = "",
    unit: str | None = None,
) -> TrialSpec:
    """Trial t1 of the contract's arm `adam` (seed 3) in tmp_path/run/trials/t1, its config with
    `overrides` (key=value) applied."""
    from planner._contract.validate import load_contract

    config = load_contract(CALLBACK_CONTRACT).configs["adam"]
    for override in overrides:
        key, _, value = override.partition("=")
        config = {**config, key: yaml.safe_load(value)}
    trial_dir = tmp_path / "run" / "trials" / "t1"
    return TrialSpec(
        trial_id="t1",
        phase=phase,
        arm="adam",
        seed=3,
        index=0,
        params={},
        config=config,
        budget=budget,
        dir=str(trial_dir),
        trainable=trainable,
        metric="val_acc",
        heldout="test_acc",
        retries=1,
        unit=unit,
        extra={"session": session} if session else {},
    )
