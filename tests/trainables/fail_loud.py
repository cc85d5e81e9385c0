"""Tiny trainables for issue 11 (fail loud): each shows one route to a silently void decision."""

import random


def misnamed(config, trial):
    """Reports `val_accuracy` (and train_loss) where a contract may say `val_acc`."""
    rng = random.Random(trial.seed)
    for step in range(1, trial.budget + 1):
        trial.report(step, val_accuracy=0.5 + 0.01 * step + rng.gauss(0, 0.01), train_loss=1.0 / step)
