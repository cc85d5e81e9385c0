"""examples/lightning (an ordinary Lightning app: CSVLogger, trainer.test()), run unchanged through
`plan run`.

Real torch and Lightning train it; its metrics come from CSVLogger's own
metrics.csv, where Lightning writes train, validation and test rows apart.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from tests.e2e._frameworks import (
    DECIDED,
    check_every_planned_trial_recorded,
    heldout_never_read,
    last_hydra_folder,
    run_example,
)

pytestmark = pytest.mark.ray


def _metrics_csv(run_dir: Path, trial_id: str) -> list[dict]:
    (path,) = last_hydra_folder(run_dir, trial_id).glob("csv/version_*/metrics.csv")
    return list(csv.DictReader(path.open(newline="")))


def test_the_lightning_app_runs_unchanged_with_every_logged_name_read(ray_local, tmp_path):
    pytest.importorskip("lightning")
    result, records = run_example("lightning", tmp_path, trials_per_arm=1)

    check_every_planned_trial_recorded(result, records, tmp_path / "lightning" / "contract.yaml")
    # train_loss comes from Lightning's own epoch-end train rows: in every report of every trial
    for r in records:
        assert r["reports"], (r["trial_id"], r["status"], r["errors"][:1])
        assert all(
            {"train_loss", "val_acc", "val_loss"} <= set(rep["metrics"]) for rep in r["reports"]
        ), r["trial_id"]
        rows = _metrics_csv(result.run_dir, r["trial_id"])
        logged = [float(row["train_loss_epoch"]) for row in rows if row["train_loss_epoch"]]
        assert [rep["metrics"]["train_loss"] for rep in r["reports"]] == logged[: len(r["reports"])]
    confirm = [r for r in records if r["phase"] == "confirm"]
    for r in confirm:  # the seed reached the app through its config
        hydra_config = last_hydra_folder(result.run_dir, r["trial_id"]) / ".hydra" / "config.yaml"
        assert yaml.safe_load(hydra_config.read_text())["seed"] == r["seed"]
    assert len(result.decisions) == 1 and result.decisions[0]["arm"] == "adam"

    assert not heldout_never_read(
        records, "test_acc"
    )  # trainer.test()'s row is read in every confirmation trial
    for r in confirm:  # trainer.test()'s own row (after fit, no val_acc) is the held-out metric
        test_rows = [row for row in _metrics_csv(result.run_dir, r["trial_id"]) if row["test_acc"]]
        assert r["status"] == "completed" and r["reports"][-1]["metrics"]["test_acc"] == float(
            test_rows[-1]["test_acc"]
        )
    assert result.decisions[0]["decision"] in DECIDED, result.decisions[0]
