"""Trainables for the worker's side of a trial's end: what it imported, how a stop or a failure
ends it."""

import importlib

from tests.trainables.synthetic import train as synthetic_train


def imports_inside(config, trial):
    """The synthetic trainable, with a package imported in its body by a name no import statement
    spells: only the worker's loaded modules show it (the source analysis of identity.json
    cannot)."""
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


class Unreachable(BaseException):  # noqa: N818 - a user's BaseException subclass, not an Exception
    """What some libraries raise for a fatal condition: not an Exception, so `except Exception`
    misses it."""


def raises_a_base_exception(config, trial):
    """Reports step 1, then raises a BaseException subclass whose message holds $DB_PASSWORD."""
    import os

    trial.report(1, acc=0.1)
    raise Unreachable("cannot reach the store with " + os.environ["DB_PASSWORD"])


def raises_keyboard_interrupt(config, trial):
    """As Ray's cancellation of a task does in its thread."""
    raise KeyboardInterrupt


def leaves_daemons(config, trial):
    """The synthetic trainable, after starting a `setsid` child, a plain child, and a double-forked
    grandchild that ignores SIGTERM, none of which it waits for; their pids in the trial's folder
    (`<name>.pid`)."""
    import os
    import subprocess

    def write_pid(name, pid):
        with open(os.path.join(trial.dir, name + ".tmp"), "w") as f:
            f.write(str(pid))
        os.replace(os.path.join(trial.dir, name + ".tmp"), os.path.join(trial.dir, name + ".pid"))

    write_pid("setsid", subprocess.Popen(["sleep", "607"], start_new_session=True).pid)
    write_pid("plain", subprocess.Popen(["sleep", "608"]).pid)
    if os.fork() == 0:
        os.setsid()
        pid = os.fork()
        if pid == 0:
            os.execv("/bin/sh", ["sh", "-c", "trap '' TERM; exec sleep 609"])
        write_pid("fork", pid)
        os._exit(0)
    os.wait()
    synthetic_train(config, trial)
