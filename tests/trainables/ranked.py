"""A trainable whose trials keep their rank at every step, with ranks drawn afresh per sweep.

The score of a config is a pseudo-random number fixed by (learning rate, seed,
arm), plus a curve that rises the same way for everyone: so within a sweep
the trials' order is the same at every step (ASHA's rungs see one ranking),
and two sweeps (another arm or tuning seed) rank the same sampled values
independently, even when their sampler draws the same configs.
"""

import random


def train(config, trial):
    recipe = config["recipe"]
    score = random.Random(f"{recipe['lr']!r}-{trial.seed}-{trial.arm}").random()
    for step in range(1, trial.budget + 1):
        value = recipe["level"] + 0.1 * score - 0.2 / step
        metrics = {"val_acc": value}
        if trial.phase != "tune":
            metrics["test_acc"] = value
        trial.report(step, **metrics)
