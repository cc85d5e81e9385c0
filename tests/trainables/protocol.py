"""Trainables that keep or break the reporting protocol, for tests/test_trial.py."""

import random

import numpy as np

CALLS = 0  # a module global a careless trainable mutates


def good(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, acc=0.1 * step)


def leaky(config, trial):
    """Mutates a module global and draws from the global RNGs: must still be a function of the
    seed."""
    global CALLS
    CALLS += 1
    for step in range(1, trial.budget + 1):
        trial.report(step, acc=CALLS + random.random() + float(np.random.rand()))


def noisy_neighbour(config, trial):
    """Leaves the process's global RNGs and the module global in another state."""
    global CALLS
    CALLS += 100
    random.seed(12345)
    np.random.seed(54321)
    random.random()
    good(config, trial)


def past_budget(config, trial):
    for step in range(1, trial.budget + 2):
        trial.report(step, acc=0.5)


def out_of_order(config, trial):
    trial.report(2, acc=0.5)
    trial.report(2, acc=0.6)


def not_a_number(config, trial):
    trial.report(1, acc="high")


def stops_short(config, trial):
    trial.report(1, acc=0.5)


def no_report(config, trial):
    return None


def swallows(config, trial):
    """Catches Exception around report: the protocol error must still end the trial."""
    try:
        trial.report(trial.budget + 5, acc=1.0)
    except Exception:
        pass
    for step in range(1, trial.budget + 1):
        trial.report(step, acc=0.5)


def diverges(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, acc=float("inf") if step == 2 else 0.5, loss=1.0)


def raises(config, trial):
    trial.report(1, acc=0.5)
    raise ValueError("boom in the trainable")


def os_error(config, trial):
    """Writes a checkpoint the machine refuses with `config["errno"]` (an OSError, as open() and
    write() raise one), or raises a ValueError that only quotes an errno in its message."""
    import os

    trial.report(1, acc=0.5)
    code = config["errno"]
    if config.get("quoted"):
        raise ValueError(f"[Errno {code}] {os.strerror(code)}")
    raise OSError(code, os.strerror(code), os.path.join(trial.dir, "checkpoint.bin"))


FLAKY = {"left": 0}


def flaky(config, trial):
    """Raises on its first attempt in a trial, then runs: the marker file lives in trial.dir."""
    import os

    marker = os.path.join(trial.dir, "attempted")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("first attempt fails")
    good(config, trial)


def heldout_in_tuning(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, acc=0.5, test_acc=0.4)


def sees(config, trial):
    """Reports what it was given, so a test can check the trial's fields."""
    assert trial.budget == 3 and trial.phase in ("tune", "confirm", "reeval")
    for step in range(1, trial.budget + 1):
        trial.report(step, seed=trial.seed, lr=config["lr"])
