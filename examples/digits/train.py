"""The digits example: a small numpy MLP on scikit-learn's bundled digits data.

Two optimizers, written out so nothing is hidden: SGD with momentum, and
AdamW (Adam with decoupled weight decay). One epoch is one step of exposure;
`val_acc` drives tuning and early stopping, `test_acc` (the held-out split)
is reported only outside tuning.

The splits are logged (`trial.log_split`, docs/data.md) by row index: the
stratified split is by row, each of the 1,797 images is its own unit, and
this data has no grouping (no writer or session column) to split by. The
contract's `data` section asks for train, val and test to share no row and to
be the same in every trial (the split seed is in the config, not the trial's).
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def _data(split_seed: int, val_fraction: float, test_fraction: float):
    """(x, y, row index) of train, val and test: stratified by class, split by row."""
    x, y = load_digits(return_X_y=True)
    x = x.astype(np.float64) / 16.0
    rows = np.arange(len(y))
    rest, test = train_test_split(
        rows, test_size=test_fraction, random_state=split_seed, stratify=y
    )
    train, val = train_test_split(
        rest,
        test_size=val_fraction / (1 - test_fraction),
        random_state=split_seed,
        stratify=y[rest],
    )
    return tuple((x[r], y[r], r) for r in (train, val, test))


def _init(rng, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        params.append(rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_in, fan_out)))
        params.append(np.zeros(fan_out))
    return params


def _forward(params, x):
    activations = [x]
    for i in range(0, len(params) - 2, 2):
        x = np.maximum(x @ params[i] + params[i + 1], 0.0)
        activations.append(x)
    logits = x @ params[-2] + params[-1]
    return activations, logits


def _loss_and_grads(params, x, y):
    activations, logits = _forward(params, x)
    logits = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    n = len(y)
    loss = -np.log(probs[np.arange(n), y] + 1e-12).mean()
    delta = probs
    delta[np.arange(n), y] -= 1.0
    delta /= n
    grads = [None] * len(params)
    for i in range(len(params) - 2, -1, -2):
        grads[i] = activations[i // 2].T @ delta
        grads[i + 1] = delta.sum(axis=0)
        if i > 0:
            delta = (delta @ params[i].T) * (activations[i // 2] > 0)
    return loss, grads


class SGD:
    def __init__(self, params, lr, momentum=0.9, weight_decay=0.0, **_):
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.velocity = [np.zeros_like(p) for p in params]

    def step(self, params, grads):
        for p, g, v in zip(params, grads, self.velocity, strict=True):
            g = g + self.weight_decay * p
            v *= self.momentum
            v += g
            p -= self.lr * v


class AdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), weight_decay=0.01, eps=1e-8, **_):
        self.lr, self.betas, self.weight_decay, self.eps = lr, tuple(betas), weight_decay, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params, grads):
        self.t += 1
        b1, b2 = self.betas
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            m_hat = m / (1 - b1**self.t)
            v_hat = v / (1 - b2**self.t)
            p -= self.lr * (m_hat / (np.sqrt(v_hat) + self.eps) + self.weight_decay * p)


OPTIMIZERS = {"sgd": SGD, "adamw": AdamW}


def _accuracy(params, x, y) -> float:
    return float((_forward(params, x)[1].argmax(axis=1) == y).mean())


def train(config: dict, trial) -> None:
    data, model, opt = config["data"], config["model"], config["optimizer"]
    (x_train, y_train, train_rows), (x_val, y_val, val_rows), (x_test, y_test, test_rows) = _data(
        data["split_seed"], data["val_fraction"], data["test_fraction"]
    )
    for name, rows in (("train", train_rows), ("val", val_rows), ("test", test_rows)):
        trial.log_split(name, rows)
    rng = np.random.default_rng(trial.seed)
    sizes = [x_train.shape[1]] + [model["width"]] * model["depth"] + [10]
    params = _init(rng, sizes)
    options = {k: v for k, v in opt.items() if k != "name"}
    optimizer = OPTIMIZERS[opt["name"]](params, **options)
    batch = data["batch_size"]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for epoch in range(1, trial.budget + 1):
            order = rng.permutation(len(y_train))
            losses = []
            for start in range(0, len(order), batch):
                idx = order[start : start + batch]
                loss, grads = _loss_and_grads(params, x_train[idx], y_train[idx])
                optimizer.step(params, grads)
                losses.append(loss)
            metrics = {
                "val_acc": _accuracy(params, x_val, y_val),
                "train_loss": float(np.mean(losses)),
            }
            if trial.phase != "tune":
                metrics["test_acc"] = _accuracy(params, x_test, y_test)
            trial.report(epoch, **metrics)
