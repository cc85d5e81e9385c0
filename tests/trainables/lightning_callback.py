"""examples/lightning/train_fn.py with a fault: the first attempt dies after its 3rd epoch (tests/e2e/test_lightning_callback.py).

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

import lightning as L

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


def never_tests(config, trial):
    """train_fn's Trainer, with trainer.test() left out: outside tuning its last report has nothing to wait for."""
    import hydra

    import planner
    from examples.lightning.train import DigitsData, DigitsMLP

    callback = planner.LightningCallback(trial)
    trainer = L.Trainer(max_epochs=callback.max_epochs, callbacks=[callback], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    model = DigitsMLP(hidden=8, dropout=0.0, optimizer=hydra.utils.instantiate(config["optimizer"]))
    trainer.fit(model, datamodule=DigitsData(**config["data"]))


def own_epochs(config, trial):
    """A Trainer that takes its epochs from the config (6), not from the trial's budget."""
    import planner

    callback = planner.LightningCallback(trial)
    trainer = L.Trainer(max_epochs=config["trainer"]["max_epochs"], callbacks=[callback], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    from examples.lightning.train import DigitsData, DigitsMLP
    import hydra

    model = DigitsMLP(hidden=8, dropout=0.0, optimizer=hydra.utils.instantiate(config["optimizer"]))
    trainer.fit(model, datamodule=DigitsData(**config["data"]))
