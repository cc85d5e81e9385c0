"""A tiny trainable for the lineage tests: val_acc is `recipe.level` (plus a bonus for
`recipe.width`), with noise."""

import random


def train(config, trial):
    recipe = config["recipe"]
    rng = random.Random(trial.seed * 7919 + 17)
    target = recipe["level"] + 0.1 * (recipe.get("width", 1) - 1) - 0.5 * abs(recipe["lr"] - 0.01)
    for step in range(1, trial.budget + 1):
        if recipe.get("sleep"):  # slow enough to be interrupted mid-run
            import time

            time.sleep(recipe["sleep"])
        value = target + rng.gauss(0, 0.01)
        trial.report(step, val_acc=value)
