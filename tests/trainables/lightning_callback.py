"""examples/lightning/train_fn.py with a fault: the first attempt dies after its 3rd epoch (tests/e2e/test_lightning_callback.py).

`config["fault"]["how"]`: `raise` (the attempt raises, and is retried in the
same worker) or `exit` (os._exit: the worker vanishes, and Ray runs the trial
again). The fault fires after planner.LightningCallback has saved and reported
epoch 3, on the first attempt only; every attempt writes the epochs it trained
to trial.dir/epochs.<attempt>.
"""

from __future__ import annotations

import os

import lightning as L

from examples.lightning.train_fn import train


class _Fault(L.Callback):
    def __init__(self, trial, how: str):
        self.trial, self.how = trial, how

    def on_train_epoch_end(self, trainer, pl_module):
        with open(os.path.join(self.trial.dir, f"epochs.{self.trial.attempt}"), "a") as handle:
            handle.write(f"{trainer.current_epoch + 1}\n")
        if self.trial.attempt == 1 and trainer.current_epoch + 1 == 3:
            if self.how == "exit":
                os._exit(1)
            raise RuntimeError("the first attempt dies after epoch 3, on purpose")


def dies_after_epoch_3(config, trial):
    train(config, trial, extra_callbacks=[_Fault(trial, config.get("fault", {}).get("how", "raise"))])
