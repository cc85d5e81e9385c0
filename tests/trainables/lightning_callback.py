"""examples/lightning/train_fn.py with a fault: the first attempt dies after its 3rd epoch
(tests/e2e/test_lightning_callback.py).

`dies_after_epoch_3` raises (the attempt is retried in the same worker),
`exits_after_epoch_3` calls os._exit (the worker vanishes, and Ray runs the
trial again); `counts_epochs` has no fault. The fault fires after
planner.LightningCallback has saved and reported epoch 3, on the first attempt
only. Every attempt writes each epoch it starts to trial.dir/epochs.<attempt>,
and its worker's pid and start time to trial.dir/started.<attempt>.
"""

from __future__ import annotations

import os
import time

import hydra
import lightning as L

import planner
from examples.lightning.train import DigitsData, DigitsMLP
from examples.lightning.train_fn import train


class _Fault(L.Callback):
    def __init__(self, trial, how: str):
        self.trial, self.how = trial, how

    def on_fit_start(self, trainer, pl_module):
        with open(os.path.join(self.trial.dir, f"started.{self.trial.attempt}"), "w") as handle:
            handle.write(f"{os.getpid()} {time.time()}\n")

    def on_train_epoch_start(self, trainer, pl_module):
        with open(os.path.join(self.trial.dir, f"epochs.{self.trial.attempt}"), "a") as handle:
            handle.write(f"{trainer.current_epoch + 1}\n")

    def on_train_epoch_end(self, trainer, pl_module):
        if self.how != "none" and self.trial.attempt == 1 and trainer.current_epoch + 1 == 3:
            if self.how == "exit":
                os._exit(1)
            raise RuntimeError("the first attempt dies after epoch 3, on purpose")


def dies_after_epoch_3(config, trial):
    train(config, trial, extra_callbacks=[_Fault(trial, "raise")])


def exits_after_epoch_3(config, trial):
    train(config, trial, extra_callbacks=[_Fault(trial, "exit")])


def counts_epochs(config, trial):
    train(config, trial, extra_callbacks=[_Fault(trial, "none")])


def _fit_alone(
    config, trial, max_epochs: int, model_class=DigitsMLP, **trainer_options
) -> L.LightningModule:
    """A small Trainer with the callback and no trainer.test() after fit; the model it trained."""
    callback = planner.LightningCallback(trial)
    trainer = L.Trainer(
        max_epochs=max_epochs,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer_options,
    )
    model = model_class(
        hidden=8, dropout=0.0, optimizer=hydra.utils.instantiate(config["optimizer"])
    )
    trainer.fit(model, datamodule=DigitsData(**config["data"]), ckpt_path=callback.ckpt_path)
    return model


class _EpochMarker(DigitsMLP):
    """Logs a value at its own epoch end, as a torchmetrics `compute()` there does: the epoch,
    counted from 1."""

    def on_train_epoch_end(self):
        self.log("epoch_marker", float(self.current_epoch + 1))


def logs_at_epoch_end(config, trial):
    """The module's on_train_epoch_end logs `epoch_marker`; trial.dir/hook says whether the
    module's own hook was back as it was after fit."""
    model = _fit_alone(config, trial, trial.budget, _EpochMarker)
    with open(os.path.join(trial.dir, "hook"), "w") as handle:
        handle.write("restored" if "on_train_epoch_end" not in vars(model) else "still wrapped")


def validates_every_2_epochs(config, trial):
    """check_val_every_n_epoch=2: epochs 1 and 3 do not validate."""
    _fit_alone(config, trial, trial.budget, check_val_every_n_epoch=2)


def never_tests(config, trial):
    """Outside tuning its last report waits for a trainer.test() that never comes."""
    _fit_alone(config, trial, trial.budget)


def own_epochs(config, trial):
    """A Trainer that takes its epochs from the config (6), not from the trial's budget."""
    _fit_alone(config, trial, config["trainer"]["max_epochs"])


def forgets_the_callback(config, trial):
    """A Trainer without planner.LightningCallback: it trains and reports nothing."""
    trainer = L.Trainer(
        max_epochs=trial.budget,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = DigitsMLP(hidden=8, dropout=0.0, optimizer=hydra.utils.instantiate(config["optimizer"]))
    trainer.fit(model, datamodule=DigitsData(**config["data"]))
