"""Tiny trainables for the integrity checks: a failure whose message differs in every trial only by
a path."""

import os


def opens_a_missing_file(config, trial):
    """Fails on every trial, naming a file in that trial's own folder (a path that differs per
    trial)."""
    with open(os.path.join(trial.dir, "data", "train.csv")) as f:
        return f.read()


def split_arms(config, trial):
    """Logs train/test splits by `data.kind` and reports `level` plus noise of its own per arm and
    seed.

    clean and same: the baseline's split (patients kept apart); leaky: one patient's rows in train
    and test; shifted: another train set than the baseline's at the same seed.
    """
    import random

    kind = config["data"]["kind"]
    rows = list(range(40))
    train, test = rows[:32], rows[32:]
    if kind == "leaky":
        train, test = rows[:31], rows[31:]
    if kind == "shifted":
        train = [r + 100 * (trial.seed + 1) for r in train]
    patient = lambda ids: [f"p{r // 2}" for r in ids]  # noqa: E731 (two rows a patient)
    trial.log_split("train", train, groups={"patient": patient(train)})
    trial.log_split("test", test, groups={"patient": patient(test)})
    rng = random.Random(f"{config['data']['kind']}-{trial.seed}")
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=float(config["level"]) - 0.1 / step + rng.gauss(0, 0.005))
