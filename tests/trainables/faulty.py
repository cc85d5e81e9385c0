"""Trainables that fail in every way a trainable can, for tests/test_faults.py.

`steady` is the well-behaved one: deterministic (a function of its config and
seed), a little slow (config `fault.sleep` s per step), it writes its pid to
trial.dir (so a test can kill its worker) and keeps a checkpoint there, which
it continues from when `trial.resumed` says an earlier attempt ran. The
others break one rule each; `by_kind` picks the behaviour from
`config["fault"]["kind"]`, so one contract can hold one arm per fault.
"""

import json
import os
import signal
import sys
import time

import numpy as np


def _value(config, seed, step):
    fault = config["fault"]
    rng = np.random.default_rng([seed, step])
    # the tuned lr moves the curve a little, as a real one does: a trainable that ignored it would
    # be `invalid` (the tuned values did not vary the run), and the faults tests compare decisions
    # that measure something
    return (
        fault["level"]
        + 0.01 * float(fault.get("lr", 0.0))
        - 0.1 / step
        + float(rng.normal(0, 0.01))
    )


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def steady(config, trial):
    fault = config["fault"]
    _write(os.path.join(trial.dir, f"pid.{trial.attempt}"), str(os.getpid()))
    _write(os.path.join(trial.dir, "pid"), str(os.getpid()))
    checkpoint = os.path.join(trial.dir, "checkpoint.json")
    first = 1
    if trial.resumed and os.path.exists(checkpoint):
        with open(checkpoint) as handle:
            first = json.load(handle)["step"] + 1
        with open(os.path.join(trial.dir, "resumed_from"), "a") as handle:
            handle.write(f"{first - 1}\n")
    for step in range(first, trial.budget + 1):
        time.sleep(fault.get("sleep", 0.0))
        value = _value(config, trial.seed, step)
        metrics = {"val_acc": value}
        if trial.phase != "tune":
            metrics["test_acc"] = value
        trial.report(step, **metrics)
        _write(checkpoint, json.dumps({"step": step}))


def waits_to_be_killed(config, trial):
    """Writes its pid, then waits (up to 20 s) for the test to kill its worker; a retry runs
    normally unless `fault.always` says every attempt waits."""
    _write(os.path.join(trial.dir, f"pid.{trial.attempt}"), str(os.getpid()))
    if trial.attempt == 1 or config["fault"].get("always"):
        trial.report(1, val_acc=0.0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.05)
        raise RuntimeError("nobody killed this worker")
    steady(config, trial)


def raises(config, trial):
    trial.report(1, val_acc=0.1)
    raise ValueError("the trainable raised on purpose")


def no_report(config, trial):
    return None


def past_budget(config, trial):
    for step in range(1, trial.budget + 2):
        trial.report(step, val_acc=0.5)


def out_of_order(config, trial):
    trial.report(2, val_acc=0.5)
    trial.report(1, val_acc=0.5)


def non_numeric(config, trial):
    trial.report(1, val_acc="very good")


def hangs_in_c(config, trial):
    trial.report(1, val_acc=0.5)
    time.sleep(
        3600
    )  # C code: an asynchronous exception cannot interrupt it; the watchdog kills the process


def hangs_in_python(config, trial):
    trial.report(1, val_acc=0.5)
    while True:
        sum(range(1000))


def allocates(config, trial):
    """Grows by 32 MiB chunks (touched, so resident) until stopped."""
    hoard = []
    trial.report(1, val_acc=0.5)
    for _ in range(2000):
        hoard.append(b"x" * (32 << 20))


def prints_megabytes(config, trial):
    line = "x" * 1023
    for _ in range(20 * 1024):  # 20 MiB
        print(line)
    print("the password is", config["fault"].get("password", ""), file=sys.stderr)
    steady(config, trial)


def exits(config, trial):
    trial.report(1, val_acc=0.5)
    sys.exit(3)


def dies(config, trial):
    """os._exit: the worker process vanishes without a signal."""
    trial.report(1, val_acc=0.5)
    os._exit(1)


def dies_after_completing(config, trial):
    """Runs like `steady`; then, on its first attempt, its worker dies (SIGKILL) once the trial has
    ended: as planner's run_trial returns the record, before Ray has delivered it (a teardown, an
    atexit hook or a daemon thread that kills the process). `died-after.<pid>` in trial.dir says
    the death was staged."""
    steady(config, trial)
    if trial.attempt != 1:
        return
    _write(os.path.join(trial.dir, f"died-after.{os.getpid()}"), str(trial.attempt))

    def profile(frame, event, arg):
        if (
            event == "return"
            and frame.f_code.co_name == "run_trial"
            and "planner" in frame.f_code.co_filename
        ):
            os.kill(os.getpid(), signal.SIGKILL)

    sys.setprofile(
        profile
    )  # this thread's: the one that runs the trial and returns its record to Ray


def fails_when(config, trial):
    """Raises when `fault.fail` is set (a tuned value: some of a grid's points fail), else runs
    like `steady`."""
    if config["fault"].get("fail"):
        trial.report(1, val_acc=0.1)
        raise ValueError("this grid point fails on purpose")
    steady(config, trial)


def leaks_secret(config, trial):
    """Raises with a password and a token of the environment in its message (a contract holds no
    credential)."""
    token = os.environ.get("API_TOKEN", "")
    password = os.environ.get("DB_PASSWORD", "")
    print("logging in as admin with", password, "and", token)
    raise RuntimeError(f"could not log in with {password} / {token}")


KINDS = {
    name: fn
    for name, fn in globals().items()
    if callable(fn)
    and not name.startswith("_")
    and name not in ("by_kind", "json", "os", "signal", "sys", "time")
}


def by_kind(config, trial):
    KINDS[config["fault"]["kind"]](config, trial)


def fills_the_disk(config, trial):
    """Runs like `steady`, then (once: a marker outside the disk remembers) fills trial.dir's
    disk."""
    steady(config, trial)
    marker = config["fault"]["marker"]
    if trial.seed == config["fault"]["fill_seed"] and not os.path.exists(marker):
        open(marker, "w").close()
        block = b"\0" * (64 << 10)
        with open(os.path.join(trial.dir, "filler"), "wb") as handle:
            try:
                while True:
                    handle.write(block)
                    handle.flush()
            except OSError:
                pass
