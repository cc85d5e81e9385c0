"""The Lightning example's model as a plain PyTorch loop: a function trainable (`trainable:` in the
contract).

planner calls `train(config, trial)` once per trial, in a Ray worker, with the
arm's composed config (tuned values applied). The function takes its seed and
its number of epochs from the trial, and reports once per epoch:
`trial.report(epoch, val_acc=..., val_loss=..., train_loss=...)`. `test_acc`
(the held-out split) is computed and reported only outside tuning, so the
selection of hyperparameters never sees it. Nothing is downloaded: the data
is sklearn's bundled digits.
"""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn import functional as F


def splits(data: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor, list[int]]]:
    """(x, y, row ids) of train, val and test: stratified, by row, with the config's fixed seed."""
    x, y = load_digits(return_X_y=True)
    rows = list(range(len(y)))
    rest, test = train_test_split(
        rows, test_size=data["test_fraction"], random_state=data["split_seed"], stratify=y
    )
    train, val = train_test_split(
        rest,
        test_size=data["val_fraction"] / (1 - data["test_fraction"]),
        random_state=data["split_seed"],
        stratify=y[rest],
    )
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    return {name: (x[r], y[r], r) for name, r in (("train", train), ("val", val), ("test", test))}


def make_optimizer(params, opt: dict) -> torch.optim.Optimizer:
    if opt["name"] == "adam":
        return torch.optim.Adam(params, lr=opt["lr"], weight_decay=opt["weight_decay"])
    if opt["name"] == "sgd":
        return torch.optim.SGD(
            params, lr=opt["lr"], momentum=opt["momentum"], weight_decay=opt["weight_decay"]
        )
    raise ValueError(f"unknown optimizer {opt['name']!r}: adam or sgd")


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model.eval()
    logits = model(x)
    return F.cross_entropy(logits, y).item(), (logits.argmax(dim=1) == y).float().mean().item()


def train(config: dict, trial) -> None:
    data, model_cfg = config["data"], config["model"]
    sets = splits(data)
    for name, (_, _, rows) in sets.items():
        trial.log_split(name, rows)  # ids only become counts and fingerprints (docs/data.md)
    (x_train, y_train, _), (x_val, y_val, _), (x_test, y_test, _) = (
        sets["train"],
        sets["val"],
        sets["test"],
    )
    torch.manual_seed(trial.seed)
    model = nn.Sequential(
        nn.Linear(64, model_cfg["hidden"]),
        nn.ReLU(),
        nn.Dropout(model_cfg["dropout"]),
        nn.Linear(model_cfg["hidden"], 10),
    )
    optimizer = make_optimizer(model.parameters(), config["optimizer"])
    order = torch.Generator().manual_seed(trial.seed)
    batch = data["batch_size"]
    for epoch in range(1, trial.budget + 1):
        model.train()
        total, seen = 0.0, 0
        for idx in torch.randperm(len(y_train), generator=order).split(batch):
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, seen = total + loss.item() * len(idx), seen + len(idx)
        val_loss, val_acc = evaluate(model, x_val, y_val)
        metrics = {"val_acc": val_acc, "val_loss": val_loss, "train_loss": total / seen}
        if trial.phase != "tune":
            metrics["test_acc"] = evaluate(model, x_test, y_test)[1]
        trial.report(epoch, **metrics)
