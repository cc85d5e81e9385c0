"""The end of a command's Ray: shut down now or once its result is printed (with the stop signals
held off meanwhile), what a trial started that outlived Ray ended, and a lost head's Ray left
behind."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager

from planner._core.errors import EXIT_INCOMPLETE
from planner._core.lazy import lazy_import
from planner._dispatch.ray_logs import flush_stderr
from planner._dispatch.ray_start import forget_embedded_environ

ray = lazy_import("ray")  # imported when a command starts or joins Ray
# Ray's private names, checked against the installed Ray when first used (as Ray starts)
compat = lazy_import("planner._dispatch.compat")


# What the embedded Ray's workers had started when a stop signal came. Tune ends the trials'
# actors before Ray shuts down, and a command's supervisor and a trainer ignoring SIGTERM are then
# re-parented to PID 1, out of reach of the sweep at shutdown: they are taken here, while their
# workers still hold them.
_trees_at_stop: list = []


def note_trial_processes() -> None:
    try:
        _trees_at_stop.extend(_trial_processes(compat.embedded_process_pids()))
    except Exception:  # noqa: BLE001 - the stop itself must not fail: the sweep is a courtesy
        pass


def ray_gone() -> None:
    """After a lost GCS: drop Ray's exit hook (it would wait on the dead GCS until Ray's client
    ends the process with exit 1) and end what is left of the embedded Ray's processes."""
    try:
        atexit.unregister(ray.shutdown)
    except Exception:
        pass
    try:
        compat.kill_ray_processes()
    except Exception:  # whatever is left of Ray's processes ends with this process
        pass


class _Deferred:
    """The shutdowns an open ray_shutdown_deferred block was left, and the signal handlers held off
    since the first."""

    def __init__(self) -> None:
        self.shutdowns: list[Callable[[], None]] = []
        self.previous: dict | None = None
        self.lost = False  # a session in the block lost its Ray (the head died)

    def add(self, shutdown: Callable[[], None]) -> None:
        if self.previous is None:  # from the run's end on, its result stands
            self.previous = _hold_signals()
        self.shutdowns.append(shutdown)


_deferred: _Deferred | None = None  # the open ray_shutdown_deferred block's


@contextmanager
def ray_shutdown_deferred(*, hold_signals_to_exit: bool = False):
    """Inside this block a RunSession that started Ray leaves it running on its way out (the end's
    bookkeeping, the close and the unlock are all done); Ray is shut down when the block ends,
    whatever happened in it. `plan run` prints its result inside, so the user reads the decision
    without waiting for Ray's processes to stop (about 1.8 s); the process still exits only once
    they have.

    From the session's end (the run's state written) until Ray is down, SIGINT and SIGTERM are held
    off: the result stands, so a Ctrl-C then neither interrupts the shutdown half-way (Ray's
    processes left behind, its trace on the terminal) nor changes the exit code. With
    `hold_signals_to_exit` (a command whose process ends right after: the interpreter's own exit
    takes up to a second more) they stay held off after it."""
    global _deferred
    outer, _deferred = _deferred, _Deferred()
    try:
        yield
    finally:
        deferred, _deferred = _deferred, outer
        if deferred.lost and hold_signals_to_exit:
            _exit_after_lost_head()
        try:
            for shutdown in deferred.shutdowns:
                shutdown()
        finally:
            if deferred.previous is not None and not hold_signals_to_exit:
                _release_signals(deferred.previous)


def _exit_after_lost_head() -> None:
    """End the process now, exit 3: its run is closed (state `interrupted`, the folder unlocked) and
    its result printed. Left to itself, Ray's core worker keeps the process until its own timeout on
    the dead GCS, then ends it with exit 1 (a minute later); nothing of Ray's is left to stop
    here."""
    flush_stderr()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(EXIT_INCOMPLETE)


def _hold_signals() -> dict:
    """SIGINT and SIGTERM ignored from now on (the main thread only; elsewhere nothing changes);
    the handlers they had. A handler that does nothing, not SIG_IGN: the processes started from
    here on do not inherit them ignored."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {
        signum: signal.signal(signum, lambda signum, frame: None)
        for signum in (signal.SIGINT, signal.SIGTERM)
    }


def _release_signals(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def note_head_lost() -> None:
    """A session in the open ray_shutdown_deferred block lost its Ray (the head died): the process
    ends, exit 3, once the result is printed."""
    if _deferred is not None:
        _deferred.lost = True


def shut_ray_down() -> None:
    """Ray shut down now, or at the end of the open ray_shutdown_deferred block."""
    if _deferred is not None:
        _deferred.add(_shutdown)
    else:
        _shutdown()


def after_shutdown(step: Callable[[], None]) -> None:
    """`step` once Ray is shut down: now, or after the open ray_shutdown_deferred block's."""
    if _deferred is not None:
        _deferred.shutdowns.append(step)
    else:
        step()


def _shutdown() -> None:
    """ray.shutdown, without its one-second wait on the autoscaler's monitor: ray.shutdown stops
    Ray's processes one after another, each given a second after SIGTERM, and the monitor of an
    embedded head does not exit on SIGTERM, so it is killed after that second whatever happens. It
    holds nothing of a run's (it reports the cluster's load to the autoscaler), so it is killed
    first; the raylet, the GCS and the rest are then stopped by ray.shutdown as before."""
    trees: list = []
    try:
        compat.kill_autoscaler_monitor()
        trees = _trial_processes(compat.embedded_process_pids())
    except Exception:  # ray.shutdown alone then
        pass
    forget_embedded_environ()
    ray.shutdown()
    trees += _trees_at_stop
    _trees_at_stop.clear()
    _end_left_behind(trees)


# After ray.shutdown, how long what a trial started may take to end on SIGTERM before it is killed
LEFT_BEHIND_GRACE_S = 2.0


def _trial_processes(ray_pids: list[int]) -> list:
    """Every process under the embedded Ray's own (its workers, a command's supervisor and what it
    runs), as psutil sees them now: only what this session's Ray started, never another process of
    the driver's (a test's server) nor another user's Ray."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for pid in ray_pids:
        try:
            for proc in psutil.Process(pid).children(recursive=True):
                found[proc.pid] = proc
        except psutil.Error:
            continue
    return list(found.values())


def _end_left_behind(procs: list) -> None:
    """What a trial started that outlived Ray's shutdown (a supervisor in its grace, a trainer
    ignoring SIGTERM, re-parented to PID 1 once its worker was killed) ended before the command
    exits: SIGTERM, then SIGKILL after LEFT_BEHIND_GRACE_S. psutil's Process knows its own start
    time, so a pid used again by another process meanwhile is never signalled."""
    import psutil

    alive = [p for p in procs if p.is_running()]
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(alive, timeout=LEFT_BEHIND_GRACE_S)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=LEFT_BEHIND_GRACE_S)
