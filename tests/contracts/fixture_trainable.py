"""A trainable for the validate tests; it is only imported, never run."""

CONSTANT = 3


def train(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=0.5)
