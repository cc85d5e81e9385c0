"""An ordinary Lightning app: an MLP on sklearn's digits, configured with Hydra, logged with
CSVLogger.

    python train.py                                   # Adam, 6 epochs, seed 0
    python train.py optimizer=sgd optimizer.lr=0.1 seed=3 trainer.max_epochs=4

Nothing here knows about planner. The app reads its seed from `cfg.seed`, its
epochs from `cfg.trainer.max_epochs`, and resumes from `cfg.ckpt_path` when one
is given (lightning-hydra-template's spelling). `CSVLogger` writes
`csv/version_0/metrics.csv` in Hydra's output folder: `train_loss` per step and
per epoch, `val_loss` and `val_acc` per epoch, then `trainer.test()` writes its
own row with `test_acc`, the held-out split's accuracy.
"""

from __future__ import annotations

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class DigitsData(L.LightningDataModule):
    """The 8x8 digits, split by row into train, val and test with a fixed seed (stratified)."""

    def __init__(
        self,
        split_seed: int,
        val_fraction: float,
        test_fraction: float,
        batch_size: int,
        num_workers: int = 0,
    ):
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str | None = None) -> None:
        x, y = load_digits(return_X_y=True)
        x = torch.tensor(x / 16.0, dtype=torch.float32)
        y = torch.tensor(y, dtype=torch.long)
        hp = self.hparams
        rest, test = train_test_split(
            range(len(y)), test_size=hp.test_fraction, random_state=hp.split_seed, stratify=y
        )
        train, val = train_test_split(
            rest,
            test_size=hp.val_fraction / (1 - hp.test_fraction),
            random_state=hp.split_seed,
            stratify=y[rest],
        )
        self.train_set, self.val_set, self.test_set = (
            TensorDataset(x[rows], y[rows]) for rows in (train, val, test)
        )

    def _loader(self, data: TensorDataset, shuffle: bool) -> DataLoader:
        return DataLoader(
            data,
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, shuffle=False)


class DigitsMLP(L.LightningModule):
    """64 pixels -> hidden -> 10 classes; the optimizer comes from the config, partially applied."""

    def __init__(self, hidden: int, dropout: float, optimizer):
        super().__init__()
        self.save_hyperparameters(ignore=["optimizer"])
        self.optimizer = optimizer
        self.net = nn.Sequential(
            nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def _evaluate(self, batch, split: str) -> None:
        x, y = batch
        logits = self(x)
        self.log(f"{split}_loss", F.cross_entropy(logits, y), on_epoch=True)
        self.log(f"{split}_acc", (logits.argmax(dim=1) == y).float().mean(), on_epoch=True)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, "test")

    def configure_optimizers(self):
        return self.optimizer(params=self.parameters())


@hydra.main(config_path="conf", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    L.seed_everything(cfg.seed, workers=True)
    data = DigitsData(**cfg.data)
    model = DigitsMLP(
        hidden=cfg.model.hidden,
        dropout=cfg.model.dropout,
        optimizer=hydra.utils.instantiate(cfg.optimizer),
    )
    logger = hydra.utils.instantiate(cfg.logger, save_dir=HydraConfig.get().runtime.output_dir)
    trainer = hydra.utils.instantiate(
        cfg.trainer, logger=logger, default_root_dir=HydraConfig.get().runtime.output_dir
    )
    trainer.fit(model=model, datamodule=data, ckpt_path=cfg.ckpt_path)
    if cfg.test:
        trainer.test(model=model, datamodule=data)  # the held-out split, once, after fit


if __name__ == "__main__":
    main()
