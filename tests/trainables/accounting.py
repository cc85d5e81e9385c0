"""A trainable whose stop outlasts Ray Tune's wait for a reused actor: Tune then drops the next
trial.

Ray's reset_config waits TUNE_FUNCTION_THREAD_TIMEOUT_S for the stopped trial's thread; this
trainable sets it to 1 s in its own worker process and takes 2.5 s to stop, so every reuse of its
actor fails with `Could not re-use actor` and the trial Tune meant to start there ends with no
record. The driver must account for each one: run it again, or record it with Ray's
reason.
"""

import os
import random
import time


def slow_stop(config, trial):
    os.environ["TUNE_FUNCTION_THREAD_TIMEOUT_S"] = (
        "1"  # this worker process only (read by reset_config)
    )
    try:
        for step in range(1, trial.budget + 1):
            time.sleep(0.2)
            train_step(config, trial, step)
    except BaseException:  # stopped early by ASHA: a slow teardown
        time.sleep(2.5)
        raise


def train_step(config, trial, step):
    recipe = config["recipe"]
    noise = random.Random(trial.seed * 1000 + step).gauss(0, 0.01)
    value = recipe["level"] - 0.2 / step - 0.1 * abs(recipe["lr"] - recipe["best_lr"]) + noise
    trial.report(step, val_acc=value, **({"test_acc": value} if trial.phase != "tune" else {}))


def missing_file(config, trial):
    """Fails on every trial with one error that differs only in a path and a number."""
    time.sleep(0.3)
    raise FileNotFoundError(
        f"[Errno 2] No such file or directory: '/data/run-{random.randrange(10**6)}/train.csv'"
    )


def misnamed_metric(config, trial):
    """Reports val_accuracy where the contract declares val_acc."""
    for step in range(1, trial.budget + 1):
        time.sleep(0.3)
        trial.report(step, val_accuracy=0.5 + 0.01 * step)
