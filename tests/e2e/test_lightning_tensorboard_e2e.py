"""A Lightning script with Lightning's default TensorBoardLogger, trainer.fit() then
trainer.test(), run unchanged.

The most ordinary script: `logger=True` writes `lightning_logs/version_0/`,
and `trainer.test()` after fit opens a second event file there (the logger
closes its writer at the end of fit). The contract reads the folder's event
files as one log: every epoch's validation values from the first file, the
held-out `test_acc` from the second. Two epochs of a tiny MLP on made-up
data: the trial's time is the process importing torch and Lightning.
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from planner import load_run, run
from tests.e2e._frameworks import DECIDED, heldout_never_read, last_hydra_folder

pytestmark = pytest.mark.ray

SCRIPT = """
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--max_epochs", type=int, default=2)
parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--output_dir", default="outputs")
args = parser.parse_args()

import lightning as L
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


def split(seed, rows):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 8, generator=g)
    return TensorDataset(x, (x[:, 0] + 0.5 * x[:, 1] > 0).long())


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self.net(batch[0]), batch[1])
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def _evaluate(self, batch, split):
        logits = self.net(batch[0])
        self.log(f"{split}_loss", F.cross_entropy(logits, batch[1]))
        self.log(f"{split}_acc", (logits.argmax(1) == batch[1]).float().mean())

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, "test")

    def configure_optimizers(self):
        if args.optimizer == "adam":
            return torch.optim.Adam(self.parameters(), lr=args.lr)
        return torch.optim.SGD(self.parameters(), lr=args.lr, momentum=0.9)


L.seed_everything(args.seed)
model = Model()
trainer = L.Trainer(max_epochs=args.max_epochs, default_root_dir=args.output_dir, logger=True,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    log_every_n_steps=2, accelerator="cpu")
trainer.fit(model, DataLoader(split(1, 128), batch_size=32, shuffle=True), DataLoader(split(2, 64), batch_size=64))
trainer.test(model, DataLoader(split(3, 64), batch_size=64))
"""

CONTRACT = {
    "version": 1,
    "name": "lightning-tensorboard-fit-then-test",
    "hypothesis": "Adam reaches a lower validation loss than SGD with momentum at the same budget.",
    "command": {
        "run": "python train.py",
        "args": "argparse",
        "seed_key": "seed",
        "budget_key": "max_epochs",
        "metrics": {
            "file": "lightning_logs/version_*/events.out.tfevents.*",
            "format": "tensorboard",
            "step": "epoch",
            "step_base": 0,
            "names": {
                "val_loss": "val_loss",
                "val_acc": "val_acc",
                "train_loss": "train_loss_epoch",
                "test_acc": "test_acc",
            },
        },
    },
    "config": {
        "values": {
            "seed": 0,
            "max_epochs": 2,
            "optimizer": "adam",
            "lr": 0.05,
            "output_dir": "${hydra:runtime.output_dir}",
        }
    },
    "factor": {"name": "optimizer", "keys": ["optimizer"]},
    "baseline": {"name": "sgd", "overrides": ["optimizer=sgd"]},
    "arms": [{"name": "adam", "overrides": ["optimizer=adam"]}],
    "metric": {"name": "val_loss", "mode": "min", "heldout": "test_acc", "heldout_mode": "max"},
    "acceptance": {"min_effect": 0.01},
    "seeds": [0, 1],
    "budget": {
        "unit": "epoch",
        "exposure": 2,
        "max_trial_time": "3m",
        "resources": {"cpu": 1, "gpu": 0},
    },
}


def _scalars(path: Path) -> dict[str, list[float]]:
    """What TensorBoard itself reads from one event file: each tag's values, in order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(path)).Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_fit_then_test_with_the_default_tensorboard_logger_reads_every_epoch_and_the_test_values(
    ray_local, tmp_path
):
    pytest.importorskip("lightning")
    pytest.importorskip("tensorboard")
    app = tmp_path / "app"
    app.mkdir()
    (app / "train.py").write_text(textwrap.dedent(SCRIPT))
    (app / "contract.yaml").write_text(yaml.safe_dump(CONTRACT, sort_keys=False))

    result = run(app / "contract.yaml", runs_dir=tmp_path / "runs", quiet=True)

    records = load_run(result.run_dir).records
    assert len(records) == 4 and all(r["status"] == "completed" for r in records), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in records
    ]
    assert not heldout_never_read(records, "test_acc")
    for r in records:
        fit, test = sorted(
            (
                last_hydra_folder(result.run_dir, r["trial_id"]) / "lightning_logs" / "version_0"
            ).glob("events.out.tfevents.*")
        )  # trainer.test() wrote a file of its own
        logged, tested = _scalars(fit), _scalars(test)
        assert "test_acc" not in logged and "val_loss" not in tested
        assert [rep["step"] for rep in r["reports"]] == [1, 2]
        assert [rep["metrics"]["val_loss"] for rep in r["reports"]] == pytest.approx(
            logged["val_loss"]
        )
        assert [rep["metrics"]["train_loss"] for rep in r["reports"]] == pytest.approx(
            logged["train_loss_epoch"]
        )
        assert r["reports"][-1]["metrics"]["test_acc"] == pytest.approx(tested["test_acc"][-1])
        assert "test_acc" not in r["reports"][0]["metrics"]
    assert result.state == "completed" and result.decisions[0]["decision"] in DECIDED, (
        result.decisions
    )
