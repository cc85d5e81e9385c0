"""Trainables that log their splits (docs/data.md), for the data-check tests.

`data` in the config says how the rows are split: `by: patient` keeps each
patient's rows in one split, `by: row` scatters them (a leak when the contract
declares the patient grouping); `shuffle` offsets the train/val shuffle (an arm
with another value sees other data at the same seed); `test_varies` draws the
test split from the trial's seed (a test set that is not fixed); `log_test: false`
leaves the test split unlogged; `reeval_shift` moves one test row when re-evaluated
(`plan reeval` on data that changed). `split_script.py` is the same as a `command:` script.
"""

from __future__ import annotations

import random

import numpy as np

DEFAULTS = {
    "recipe": {"name": "a", "level": 0.5, "noise": 0.01},
    "data": {
        "rows": 400,
        "rows_per_patient": 4,
        "by": "patient",
        "shuffle": 0,
        "test_varies": False,
        "log_test": True,
        "reeval_shift": False,
    },
}


def split_ids(d: dict, seed: int):
    """(train presentations, val ids, test ids, patient of every row) for one seed."""
    n = int(d["rows"])
    ids = np.arange(n)
    patient = np.array([f"p{i // int(d['rows_per_patient']):04d}" for i in ids])
    rng_test = np.random.default_rng(seed if d["test_varies"] else 12345)
    if d["by"] == "patient":
        patients = np.unique(patient)
        chosen = rng_test.choice(patients, size=len(patients) // 5, replace=False)
        is_test = np.isin(patient, chosen)
    else:
        is_test = np.zeros(n, dtype=bool)
        is_test[rng_test.choice(n, size=n // 5, replace=False)] = True
    rest = ids[~is_test]
    if d["by"] == "patient":  # val by patient too
        rest_patients = np.unique(patient[rest])
        val_p = np.random.default_rng(seed * 1000 + int(d["shuffle"])).choice(
            rest_patients, size=len(rest_patients) // 5, replace=False
        )
        is_val = np.isin(patient[rest], val_p)
        val, train = rest[is_val], rest[~is_val]
    else:
        rest = rest.copy()
        np.random.default_rng(seed * 1000 + int(d["shuffle"])).shuffle(rest)
        val, train = rest[: len(rest) // 5], rest[len(rest) // 5 :]
    presented = np.concatenate(
        [train, train[: len(train) // 2]]
    )  # half the train rows oversampled once
    return presented, val, ids[is_test], patient


def curve(config: dict, seed: int, budget: int):
    rng = random.Random(seed)
    level = float(config["recipe"]["level"])
    return [(step, level - 0.1 / step + rng.gauss(0, 0.01)) for step in range(1, budget + 1)]


def train(config, trial):
    d = config["data"]
    presented, val, test, patient = split_ids(d, trial.seed)
    if d["reeval_shift"] and trial.phase == "reeval":
        test = np.r_[test[1:], [n for n in range(len(patient)) if n not in set(test)][:1]]
    trial.log_split("train", presented, groups={"patient": patient[presented]})
    trial.log_split("val", list(val), groups={"patient": list(patient[val])})
    if d["log_test"]:
        trial.log_split("test", test, groups={"patient": patient[test]})
    for step, value in curve(config, trial.seed, trial.budget):
        trial.report(step, val_acc=value)


def float_ids(config, trial):
    trial.log_split("train", [0.5, 1.5])
    trial.report(trial.budget, val_acc=0.5)
