"""The grouped example: scans of patients, where the rows of one patient look alike.

`make_dataset` makes the data itself (no download): 160 patients, 2 to 8 scans
each, one `patient` column. A patient's label (ill or not) is shared by all of
their scans, and every patient has their own strong look (an offset in
feature space), so a scan's nearest neighbour is usually another scan of the
same patient. Split by row, the test set holds patients the model has already
seen: a 1-nearest-neighbour classifier then "recognises the patient" and
looks excellent. Split by patient, that advantage is gone.

`config.split.by` says which: `row` (the grouping forgotten) or `patient`.
The test split is fixed (`split.seed`); train and val are redrawn from the
trial's seed. Every split is logged with its patient column
(`trial.log_split`, docs/data.md), so planner sees what the arms really saw.
"""

from __future__ import annotations

import numpy as np


def make_dataset(seed: int = 0, patients: int = 160) -> dict[str, np.ndarray]:
    """Columns `scan` (str id), `patient` (str id), `x` (features) and `y` (label, per patient)."""
    rng = np.random.default_rng(seed)
    per_patient = rng.integers(2, 9, size=patients)
    label = rng.integers(0, 2, size=patients)
    look = rng.normal(0.0, 1.5, size=(patients, 8))  # each patient's own look
    owner = np.repeat(np.arange(patients), per_patient)
    x = look[owner] + rng.normal(0.0, 0.3, size=(len(owner), 8))
    x[:, 0] += 2.0 * label[owner]  # the disease signal: weak next to a patient's look
    return {
        "scan": np.array([f"scan{i:05d}" for i in range(len(owner))]),
        "patient": np.array([f"P{p:04d}" for p in owner]),
        "x": x,
        "y": label[owner],
    }


def split(data: dict[str, np.ndarray], by: str, test_fraction: float, split_seed: int, seed: int):
    """(train, val, test) row indices: grouped by `by` (`row` or `patient`); test fixed, train/val
    by seed."""
    rows = np.arange(len(data["y"]))
    unit = rows if by == "row" else data["patient"]
    keys = np.unique(unit)
    test_keys = np.random.default_rng(split_seed).choice(
        keys, size=int(len(keys) * test_fraction), replace=False
    )
    is_test = np.isin(unit, test_keys)
    rest_keys = np.setdiff1d(keys, test_keys)
    val_keys = np.random.default_rng(seed).choice(
        rest_keys, size=len(rest_keys) // 5, replace=False
    )
    is_val = np.isin(unit, val_keys) & ~is_test
    return rows[~is_test & ~is_val], rows[is_val], rows[is_test]


def nearest_neighbour_accuracy(x_train, y_train, x_eval, y_eval, k: int) -> float:
    distances = ((x_eval[:, None, :] - x_train[None, :, :]) ** 2).sum(axis=2)
    nearest = np.argsort(distances, axis=1)[:, :k]
    votes = y_train[nearest].mean(axis=1)
    return float(((votes > 0.5).astype(int) == y_eval).mean())


def train(config: dict, trial) -> None:
    data = make_dataset(config["data"]["seed"])
    s = config["split"]
    train_rows, val_rows, test_rows = split(
        data, s["by"], s["test_fraction"], s["seed"], trial.seed
    )
    for name, rows in (("train", train_rows), ("val", val_rows), ("test", test_rows)):
        trial.log_split(name, data["scan"][rows], groups={"patient": data["patient"][rows]})
    k = config["model"]["k"]
    x, y = data["x"], data["y"]
    metrics = {
        "val_acc": nearest_neighbour_accuracy(
            x[train_rows], y[train_rows], x[val_rows], y[val_rows], k
        )
    }
    if trial.phase != "tune":
        metrics["test_acc"] = nearest_neighbour_accuracy(
            x[train_rows], y[train_rows], x[test_rows], y[test_rows], k
        )
    trial.report(1, **metrics)
