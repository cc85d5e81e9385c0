"""A trial's spec for tests that run the trainable protocol in-process (no Ray)."""

from __future__ import annotations

from pathlib import Path

from planner._trial.spec import TrialSpec

REPO = str(Path(__file__).resolve().parents[1])


def spec(
    fn,
    tmp_path,
    *,
    phase="confirm",
    retries=0,
    seed=3,
    budget=3,
    heldout=None,
    config=None,
    tid="t",
    metric="acc",
):
    return TrialSpec(
        trial_id=tid,
        phase=phase,
        arm="a",
        seed=seed,
        index=0,
        params={},
        config=config or {"lr": 0.1},
        budget=budget,
        dir=str(tmp_path / tid),
        trainable=f"tests.trainables.protocol:{fn}",
        metric=metric,
        heldout=heldout,
        retries=retries,
        path=(REPO,),
    )
