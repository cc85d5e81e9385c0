"""The Lightning app of train.py as a function trainable: the same LightningModule and data, one
Trainer per trial.

planner calls `train(config, trial)` in a Ray worker (contract_callback.yaml,
`trainable: examples.lightning.train_fn:train`), so torch and Lightning are
imported once per worker instead of once per trial. `planner.LightningCallback`
connects the Trainer to the trial: it seeds everything with `trial.seed`, gives
the budget as `max_epochs`, reports each epoch's logged metrics (ASHA stops the
trial in-process), saves Lightning's full checkpoint in `trial.dir` every epoch
and, on a retry of a cut-short trial, `ckpt_path` continues from the newest.
`trainer.test()` after fit is the held-out metric (not reported while tuning).
"""

from __future__ import annotations

import hydra

import planner
from examples.lightning.train import DigitsData, DigitsMLP


def train(config: dict, trial, *, extra_callbacks=()) -> None:
    callback = planner.LightningCallback(
        trial
    )  # lightning.seed_everything(trial.seed, workers=True)
    data = DigitsData(**config["data"])
    model = DigitsMLP(
        hidden=config["model"]["hidden"],
        dropout=config["model"]["dropout"],
        optimizer=hydra.utils.instantiate(config["optimizer"]),
    )
    trainer = hydra.utils.instantiate(
        config["trainer"],
        max_epochs=callback.max_epochs,
        callbacks=[callback, *extra_callbacks],
        logger=hydra.utils.instantiate(config["logger"], save_dir=trial.dir),
        default_root_dir=trial.dir,
        enable_checkpointing=False,
    )  # the callback keeps the trial's checkpoint; no second copy
    trainer.fit(model=model, datamodule=data, ckpt_path=callback.ckpt_path)
    if trial.phase != "tune":  # the held-out split is never looked at while tuning
        trainer.test(model=model, datamodule=data, verbose=False)
