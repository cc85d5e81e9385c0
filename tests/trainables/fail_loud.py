"""Tiny trainables that fail loud: each shows one route to a silently void decision."""

import random


def misnamed(config, trial):
    """Reports `val_accuracy` (and train_loss) where a contract may say `val_acc`."""
    rng = random.Random(trial.seed)
    for step in range(1, trial.budget + 1):
        trial.report(
            step, val_accuracy=0.5 + 0.01 * step + rng.gauss(0, 0.01), train_loss=1.0 / step
        )


def interpolated(config, trial):
    """Scores by the key that interpolates the tuned one (`sched.peak_lr: ${optim.lr}`); reports
    what it got."""
    rng = random.Random(trial.seed)
    peak = config["sched"]["peak_lr"]
    for step in range(1, trial.budget + 1):
        trial.report(
            step,
            val_acc=config["level"] + peak + rng.gauss(0, 0.001),
            peak_lr=peak,
            lr=config["optim"]["lr"],
        )


def ignores_seed(config, trial):
    """A run the seed does not vary: the same curve on every seed (never reads trial.seed)."""
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=config["level"] + 0.01 * step)


def key_error(config, trial):
    """Fails on every trial, as a trainable reading a key the config does not have."""
    return config["lr"]


def heldout_everywhere(config, trial):
    """Reports the held-out metric while tuning too (test exposure); the level sets which trials
    ASHA stops."""
    rng = random.Random(trial.seed)
    x = float(config.get("x", 0.5))
    for step in range(1, trial.budget + 1):
        value = config["level"] + x * step / 10 + rng.gauss(0, 0.001)
        trial.report(step, val_acc=value, test_acc=value)
