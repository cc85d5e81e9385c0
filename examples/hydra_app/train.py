"""A small, ordinary Hydra app: logistic regression in numpy on a synthetic dataset.

Run it alone:            python train.py optimizer=momentum optimizer.lr=0.1
Run it through planner:  plan run contract.yaml

The only planner-specific line is `planner.report(...)`; outside planner it does
nothing. The seed and the number of epochs come from PLANNER_SEED and
PLANNER_BUDGET when planner sets them, else from the config.
"""

from __future__ import annotations

import os

import hydra
import numpy as np
from omegaconf import DictConfig

import planner


def make_data(cfg: DictConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(cfg.data.seed)
    n, d = cfg.data.n_train + cfg.data.n_val, cfg.data.n_features
    true_w = rng.normal(size=d)
    x = rng.normal(size=(n, d))
    y = (x @ true_w + rng.normal(scale=1.0, size=n) > 0).astype(float)
    flip = rng.random(n) < cfg.data.label_noise
    y[flip] = 1.0 - y[flip]
    return (
        x[: cfg.data.n_train],
        y[: cfg.data.n_train],
        x[cfg.data.n_train :],
        y[cfg.data.n_train :],
    )


def loss_and_grad(
    w: np.ndarray, x: np.ndarray, y: np.ndarray, l2: float
) -> tuple[float, np.ndarray]:
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    eps = 1e-12
    loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)) + 0.5 * l2 * w @ w
    grad = x.T @ (p - y) / len(y) + l2 * w
    return float(loss), grad


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    seed = int(os.environ.get("PLANNER_SEED", cfg.seed))
    epochs = int(os.environ.get("PLANNER_BUDGET", cfg.epochs))
    x_train, y_train, x_val, y_val = make_data(cfg)
    rng = np.random.default_rng(seed)
    w = rng.normal(scale=1.0, size=x_train.shape[1])
    velocity = np.zeros_like(w)
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(y_train))
        for start in range(0, len(order), cfg.batch_size):
            batch = order[start : start + cfg.batch_size]
            _, grad = loss_and_grad(w, x_train[batch], y_train[batch], cfg.l2)
            velocity = cfg.optimizer.momentum * velocity - cfg.optimizer.lr * grad
            w = w + velocity
        val_loss, _ = loss_and_grad(w, x_val, y_val, cfg.l2)
        val_acc = float(np.mean(((x_val @ w) > 0) == (y_val > 0.5)))
        print(f"epoch {epoch}: val_loss={val_loss:.4f} val_acc={val_acc:.4f}")
        planner.report(epoch, val_acc=val_acc, val_loss=val_loss)


if __name__ == "__main__":
    main()
