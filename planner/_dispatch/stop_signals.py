"""SIGTERM and SIGINT while a command runs: a clean stop like Ctrl-C's, held off while Ray starts
and restored at the end."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from planner._core.lazy import lazy_import
from planner._dispatch.ray_shutdown import note_trial_processes

# Ray's private names, checked against the installed Ray when first used (as Ray starts)
compat = lazy_import("planner._dispatch.compat")


def claim_stop_signals():
    """SIGTERM and SIGINT stop a run like Ctrl-C does (state `interrupted`, finished trials kept).

    SIGINT is claimed too because a process started in the background by a
    script inherits SIGINT *ignored*, and Python then never turns it into
    KeyboardInterrupt: `kill -INT` would be silently lost. Returns the previous
    handlers, for `restore_stop_signals`.
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        note_trial_processes()
        raise KeyboardInterrupt

    return {
        signal.SIGTERM: signal.signal(signal.SIGTERM, handler),
        signal.SIGINT: signal.signal(signal.SIGINT, handler),
    }


@contextmanager
def stops_deferred_while_ray_starts(claimed: bool):
    """While the block runs (ray.init), SIGTERM and SIGINT are noted and the stop comes once it has
    returned: a KeyboardInterrupt then, as claim_stop_signals' handler raises (state `interrupted`,
    exit 3).

    Ray installs its own SIGTERM handler in ray.init (`sys.exit(15)` wherever it is: recorded as an
    internal error), and an exception raised inside ray.init while its core worker connects left
    that core worker to abort the process at exit (exit 134); here Ray's handler is not installed
    and nothing interrupts ray.init. Nothing changes when the signals are not claimed (or off the
    main thread)."""
    if not claimed or threading.current_thread() is not threading.main_thread():
        yield
        return
    asked: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: asked.append(signum))
    try:
        with compat.ray_sigterm_handler_not_installed():
            yield
    finally:
        claim_stop_signals()  # ours again, in place of the one Ray's C++ core installs in ray.init
    if asked:
        raise KeyboardInterrupt


def restore_stop_signals(previous) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
