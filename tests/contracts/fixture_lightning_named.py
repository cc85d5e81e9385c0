"""A trainable that names LightningCallback in a comment and a string only (no P943); only
imported."""

# planner.LightningCallback would count epochs; this one reports steps itself.
NOTE = "not a LightningCallback"


def train(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=0.5)
