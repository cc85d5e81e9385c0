"""Small trainables for the end-to-end tests: a noisy curve whose level the config sets.

`level` per arm is in the config (`recipe.level`); the learning rate (`recipe.lr`)
matters through `recipe.best_lr`: the score drops with the log-distance to it.
"""

import math
import random
import time


def train(config, trial):
    recipe = config["recipe"]
    rng = random.Random(trial.seed)
    target = recipe["level"] - 0.1 * abs(math.log10(recipe["lr"]) - math.log10(recipe["best_lr"]))
    for step in range(1, trial.budget + 1):
        time.sleep(recipe.get("sleep", 0.0))  # a run slow enough to be watched while it goes
        value = target - 0.2 / step + rng.gauss(0, recipe.get("noise", 0.01))
        metrics = {"val_acc": value}
        if trial.phase != "tune":
            metrics["test_acc"] = value + rng.gauss(0, recipe.get("noise", 0.01))
        trial.report(step, **metrics)


def crash(config, trial):
    if config["recipe"]["level"] > 0.6:
        raise RuntimeError("this arm always crashes")
    train(config, trial)


def diverge(config, trial):
    if config["recipe"]["level"] > 0.6:
        for step in range(1, trial.budget + 1):
            trial.report(
                step,
                val_acc=float("nan") if step == 2 else 0.5,
                test_acc=float("nan") if step == 2 else 0.5,
            )
        return
    train(config, trial)


def slow(config, trial):
    import time

    for step in range(1, trial.budget + 1):
        time.sleep(config["recipe"].get("sleep", 1.0))
        trial.report(step, val_acc=0.5, test_acc=0.5)


def ignores_lr(config, trial):
    """Never reads recipe.lr (like a script that hard-codes its learning rate): every tuning trial
    of a sweep reports the same curve, whatever lr it was given; the seeds still vary the run."""
    recipe = config["recipe"]
    rng = random.Random(trial.seed)
    for step in range(1, trial.budget + 1):
        value = recipe["level"] - 0.2 / step + rng.gauss(0, 0.01)
        metrics = {"val_acc": value}
        if trial.phase != "tune":
            metrics["test_acc"] = value + rng.gauss(0, 0.01)
        trial.report(step, **metrics)


def ties_at_the_end(config, trial):
    """Uses recipe.lr on the way, but its last value is quantized to the same number for every lr:
    tuning trials tie by chance on the final value with different curves."""
    recipe = config["recipe"]
    rng = random.Random(trial.seed)
    for step in range(1, trial.budget + 1):
        value = recipe["level"] - 0.1 * abs(math.log10(recipe["lr"])) / step + rng.gauss(0, 0.01)
        if step == trial.budget:  # quantized: the tuning's final value is the same for every lr
            value = round(recipe["level"], 1) + (
                rng.gauss(0, 0.01) if trial.phase != "tune" else 0.0
            )
        metrics = {"val_acc": value}
        if trial.phase != "tune":
            metrics["test_acc"] = value + rng.gauss(0, 0.01)
        trial.report(step, **metrics)
