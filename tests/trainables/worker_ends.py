"""Trainables for the worker's side of a trial's end: what it imported, how a stop or a failure ends it."""

import importlib

from tests.trainables.synthetic import train as synthetic_train


def imports_inside(config, trial):
    """The synthetic trainable, with a package imported in its body by a name no import statement spells:
    only the worker's loaded modules show it (the source analysis of identity.json cannot)."""
    importlib.import_module("mp" + "math")
    synthetic_train(config, trial)


def reports_then_raises_then_raises_at_once(config, trial):
    """Attempt 1 reports steps 1 and 2, then raises; attempt 2 raises before any report."""
    if trial.attempt == 1:
        trial.report(1, acc=0.1)
        trial.report(2, acc=0.2)
    raise RuntimeError(f"attempt {trial.attempt} broke")


def three_steps(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, acc=0.1 * step)
