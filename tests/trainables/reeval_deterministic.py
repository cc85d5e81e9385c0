"""A deterministic trainable for tests/test_reeval.py: its results are a function of config and
seed.

The tests copy this file into a temporary contract folder under a module name of
their own, run a contract on it, and may edit the copy before `plan reeval`.
"""

import random

SHIFT = 0.0  # the code-change test edits this line


def train(config, trial):
    recipe = config["recipe"]
    rng = random.Random(trial.seed)
    for step in range(1, trial.budget + 1):
        value = recipe["level"] - 0.2 / step + rng.gauss(0, recipe["noise"]) + SHIFT
        metrics = {"val_acc": value}
        if trial.phase != "tune":
            metrics["test_acc"] = value + rng.gauss(0, recipe["noise"])
        trial.report(step, **metrics)
