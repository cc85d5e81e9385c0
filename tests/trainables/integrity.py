"""Tiny trainables for issue 20 (integrity): a failure whose message differs in every trial only by a path."""

import os


def opens_a_missing_file(config, trial):
    """Fails on every trial, naming a file in that trial's own folder (a path that differs per trial)."""
    with open(os.path.join(trial.dir, "data", "train.csv")) as f:
        return f.read()
