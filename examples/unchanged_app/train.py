"""A plain Hydra app: logistic regression in numpy, with its metrics in a CSV.

    python train.py                                  # seed 0, 8 epochs, raw features
    python train.py preprocess.standardize=true seed=3 trainer.max_epochs=4

It reads its seed from `cfg.seed` and its number of epochs from
`cfg.trainer.max_epochs`, and logs to `metrics.csv` in Hydra's output folder
the way Lightning's CSVLogger does: a header of the sorted column names, train
rows and validation rows written apart (empty cells where a row has no
value), epochs counted from 0, and the file rewritten whole when a new column
appears.
"""

from __future__ import annotations

import csv
import os

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


class CsvLog:
    """metrics.csv in Lightning's CSVLogger layout."""

    def __init__(self, path: str):
        self.path, self.keys, self.rows = path, [], []

    def log(self, **row: float) -> None:
        self.rows.append(row)

    def save(self) -> None:
        new = set().union(*self.rows) - set(self.keys)
        self.keys = sorted(set(self.keys) | new)
        exists = os.path.isfile(self.path)
        if new and exists:  # a new column: rewrite the file with the wider header
            with open(self.path, newline="") as f:
                old = list(csv.DictReader(f))
            with open(self.path, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=self.keys)
                writer.writeheader()
                writer.writerows(old)
        with open(self.path, "a" if exists else "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.keys)
            if not exists:
                writer.writeheader()
            writer.writerows(self.rows)
        self.rows = []


def make_data(cfg: DictConfig):
    """A fixed dataset (its own seed): features on very different scales."""
    rng = np.random.default_rng(cfg.data.seed)
    n, d = cfg.data.n_train + cfg.data.n_val, cfg.data.n_features
    z = rng.normal(size=(n, d))
    y = (z @ rng.normal(size=d) + rng.normal(scale=0.5, size=n) > 0).astype(float)
    x = z * 10.0 ** rng.uniform(-1.0, 1.5, size=d)
    return (
        x[: cfg.data.n_train],
        y[: cfg.data.n_train],
        x[cfg.data.n_train :],
        y[cfg.data.n_train :],
    )


def loss_and_grad(w, x, y):
    p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -30, 30)))
    loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
    return float(loss), x.T @ (p - y) / len(y)


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    x_train, y_train, x_val, y_val = make_data(cfg)
    if cfg.preprocess.standardize:
        mean, sd = x_train.mean(axis=0), x_train.std(axis=0)
        x_train, x_val = (x_train - mean) / sd, (x_val - mean) / sd
    rng = np.random.default_rng(cfg.seed)
    w = rng.normal(scale=0.1, size=x_train.shape[1])
    log = CsvLog(os.path.join(HydraConfig.get().runtime.output_dir, "metrics.csv"))
    step = 0
    for epoch in range(cfg.trainer.max_epochs):
        order = rng.permutation(len(y_train))
        for start in range(0, len(order), cfg.trainer.batch_size):
            batch = order[start : start + cfg.trainer.batch_size]
            loss, grad = loss_and_grad(w, x_train[batch], y_train[batch])
            w -= cfg.optimizer.lr * grad
            step += 1
            if step % cfg.trainer.log_every_n_steps == 0:
                log.log(epoch=epoch, step=step, train_loss=loss)
                log.save()
        val_loss, _ = loss_and_grad(w, x_val, y_val)
        val_acc = float(np.mean((x_val @ w > 0) == (y_val > 0.5)))
        log.log(epoch=epoch, step=step, val_acc=val_acc, val_loss=val_loss)
        log.save()
        print(f"epoch {epoch}: val_acc={val_acc:.4f} val_loss={val_loss:.4f}")


if __name__ == "__main__":
    main()
