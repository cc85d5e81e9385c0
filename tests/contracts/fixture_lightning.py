"""A Lightning trainable for the validate tests (P943); it is only imported, never run."""

import planner


def train(config, trial):
    callback = planner.LightningCallback(trial)  # counts epochs: budget.unit must be epoch
    return callback.max_epochs
