"""A Lightning app that continues from its checkpoint: a linear model on sklearn's digits, Hydra,
CSVLogger.

Unchanged Lightning idiom: `ModelCheckpoint` saves every epoch in the Hydra output folder and
`trainer.fit(..., ckpt_path=cfg.ckpt_path)` continues from the checkpoint it is given. To play a
lost node, a fresh start (`ckpt_path` null) ends its process without a word once `die_after` epochs
are done.
"""

import os
import time

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from sklearn.datasets import load_digits
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class Linear(L.LightningModule):
    def __init__(self, lr: float):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(64, 10)

    def training_step(self, batch, index):
        x, y = batch
        loss = F.cross_entropy(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, index):
        x, y = batch
        logits = self.layer(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


class LostNode(Callback):
    """At the start of epoch `after` of a fresh start (its checkpoints saved), the process ends
    (`how: exit`), or hangs until it is killed (`how: hang`: the test kills the worker under it)."""

    def __init__(self, after: int, how: str):
        self.after, self.how = after, how

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == self.after:
            if self.how == "hang":
                time.sleep(600)
            os._exit(1)


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg):
    L.seed_everything(cfg.seed, verbose=False)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    train = DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=100, shuffle=True)
    val = DataLoader(TensorDataset(x[1400:], y[1400:]), batch_size=400)
    out = HydraConfig.get().runtime.output_dir
    callbacks = [
        ModelCheckpoint(dirpath=os.path.join(out, "ckpt"), save_top_k=-1, every_n_epochs=1)
    ]
    if cfg.ckpt_path is None:
        callbacks.append(LostNode(cfg.die_after, cfg.die_how))
    trainer = L.Trainer(
        max_epochs=cfg.trainer.max_epochs,
        logger=CSVLogger(out, flush_logs_every_n_steps=1),
        callbacks=callbacks,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        num_sanity_val_steps=0,
    )
    trainer.fit(Linear(cfg.lr), train, val, ckpt_path=cfg.ckpt_path)


if __name__ == "__main__":
    main()
