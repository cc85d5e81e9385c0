"""The session a command runs in, shared by `plan run` and `plan reeval`.

`RunSession` is a command's hold on a run folder: the folder's lock, SIGTERM
and SIGINT turned into a clean stop (`stop_signals`), the Ray it started or
joined (`ray_start`, its lines in the run folder's ray.log: `ray_logs`), a
watch on Ray's GCS, and the bookkeeping of its end (the command's `on_end`:
state.json, run_ended and the lineage for `plan run`), then the lock released,
the signals restored and Ray shut down (`ray_shutdown`), whatever happened.
`final_state` maps how the command's body ended to the run state and its reason.
"""

from __future__ import annotations

import _thread
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from planner._core.errors import EXIT_INCOMPLETE, PlannerError, RunError, disk_failed
from planner._core.lazy import lazy_import
from planner._core.status import RunState, StopReason
from planner._dispatch.cluster import resolve_address
from planner._dispatch.keeper import start_trial_files
from planner._dispatch.ray_logs import RayLinesOff, stderr_to_ray_log
from planner._dispatch.ray_shutdown import after_shutdown, note_head_lost, ray_gone, shut_ray_down
from planner._dispatch.ray_start import start_ray
from planner._dispatch.stop_signals import (
    claim_stop_signals,
    restore_stop_signals,
    stops_deferred_while_ray_starts,
)

ray = lazy_import("ray")  # imported when a command starts or joins Ray


def _trial_files(run_dir: Path | None, session: str) -> object:
    """The driver's TrialFiles actor for `session` (None without a run folder, or when Ray could not
    start it: the workers then keep the trials' files on their own disks, as the docs say)."""
    if run_dir is None:
        return None
    try:
        return start_trial_files(Path(run_dir), session)
    except Exception as error:  # Ray Client, or a driver's node that cannot hold it
        logging.getLogger("ray").warning("no TrialFiles actor on the driver's node: %s", error)
        return None


class GcsWatch:
    """Notices a lost Ray session while a command runs: the GCS (Ray's head process) no longer
    accepts a connection for `misses` checks in a row, `every_s` apart. Ray's own client ends the
    driver process (exit 1, its state left `running`) 60 s after losing the GCS; this sees it
    within about 5 s and interrupts the main thread, so the command ends through its own
    bookkeeping (`lost` says why)."""

    def __init__(
        self, address: str, on_lost: Callable[[], None], *, every_s: float = 1.0, misses: int = 5
    ):
        self.address, self.on_lost, self.every_s, self.misses = address, on_lost, every_s, misses
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="planner-gcs-watch", daemon=True)

    def start(self) -> GcsWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        host, _, port = self.address.rpartition(":")
        missed = 0
        while not self._stop.wait(self.every_s):
            try:
                socket.create_connection((host, int(port)), timeout=self.every_s).close()
                missed = 0
            except (OSError, ValueError):
                missed += 1
            if missed >= self.misses:
                self.lost = (
                    f"{RAY_LOST_GCS} at {self.address} stopped answering "
                    f"({self.misses} checks over {self.misses * self.every_s:g} s)"
                )
                self.on_lost()
                return


RAY_LOST_GCS = "Ray's GCS"


def watch_gcs(on_lost: Callable[[], None]) -> GcsWatch | None:
    """A GcsWatch on the connected Ray's GCS (None when Ray does not say where it is)."""
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:  # not public in every Ray: no watch, Ray's own handling stays
        return None
    return GcsWatch(address, on_lost).start() if address and ":" in address else None


MAIN_THREAD_WAIT_S = (
    5.0  # after a lost GCS: how long the main thread gets to end the command itself
)


# ------------------------------------------------------------------ the session of one command

# what an end's bookkeeping returns for an error it handled: the command returns normally
HANDLED = "handled"


def final_state(
    error: BaseException | None,
    stopped=None,
    *,
    run_dir: Path | None = None,
    budget: str | None = None,
) -> tuple[RunState, str, BaseException | str | None]:
    """(the run state, its reason, what becomes of `error`) for a command body that ended with
    `error` (None: it returned, stopping early for `stopped`, a StopReason, or not at all).

    What becomes of it: None, raised as it is; HANDLED, not raised (Ctrl-C and SIGTERM:
    `interrupted`, the command returns its result); or the error to raise instead (a full disk is
    `failed` with a sentence that says how to resume, a RunError in place of the OSError). Any
    other error is `failed`.
    """
    if error is None:
        if stopped == StopReason.BUDGET:
            return RunState.BUDGET_EXHAUSTED, f"budget.max_wall_time of {budget} reached", None
        if stopped == StopReason.INTERRUPTED:
            return RunState.INTERRUPTED, "stopped by the user", None
        return RunState.COMPLETED, "all planned trials ended", None
    if isinstance(error, KeyboardInterrupt):
        return RunState.INTERRUPTED, "stopped by the user (Ctrl-C or SIGTERM)", HANDLED
    if disk_failed(error):
        reason = (
            f"cannot write the run folder {run_dir}: {error.strerror}; what ended is "
            f"kept; free space (or mend the disk) and resume with --resume {run_dir}"
        )
        return RunState.FAILED, reason, raised_from(RunError(reason))
    if isinstance(error, PlannerError):
        return RunState.FAILED, str(error), None
    if ray_session_lost(error):  # the GCS or the embedded Ray died: not our bug, and resumable
        first = (str(error).strip().splitlines() or [""])[0][:300]
        return (
            RunState.FAILED,
            f"{RAY_LOST} ({type(error).__name__}: {first}); what ended is kept",
            HANDLED,
        )
    return RunState.FAILED, f"internal error: {type(error).__name__}: {error}", None


RAY_LOST = (
    "the Ray session was lost"  # final_state's reason for it; the run's result says how to resume
)


def ray_session_lost(error: BaseException) -> bool:
    """An error by which Ray says its session is gone (the GCS died, the cluster went away), not a
    bug: a Ray system or connection error, or any error once Ray is no longer connected."""
    if isinstance(error, ConnectionError):
        return True
    name = type(error).__module__ or ""
    if name.startswith("ray.") and type(error).__name__ in (
        "RaySystemError",
        "GetTimeoutError",
        "RpcError",
        "ActorUnavailableError",
        "NodeDiedError",
        "RayError",
        "ObjectLostError",
        "OwnerDiedError",
    ):
        return True
    try:
        return name.startswith(("ray", "pyarrow", "grpc")) and not ray.is_initialized()
    except Exception:  # ray itself unusable: the session is gone
        return True


def raised_from(error: BaseException, cause: BaseException | None = None) -> BaseException:
    """`error` raised `from cause` (from None when None): the trace shows the cause, or nothing
    before it."""
    error.__cause__, error.__suppress_context__ = cause, True
    return error


class RunSession:
    """One command's hold on a run folder and on Ray, as a context manager.

        with RunSession(store, command="plan run") as session:  # the lock (session.took_over)
            ...                                                 # a refusal here only unlocks
            session.stop_on_signals()
            session.on_end(bookkeeping)                         # bookkeeping(error), then unlock
            session.start_ray(address, search_path, runs_dir, ...)
            ...

    On the way out, whatever happened: `bookkeeping(error)` (the error the body raised, or None),
    then the store closed and unlocked, the stop signals restored, and a Ray this session started
    shut down (inside `ray_shutdown_deferred`: at the end of that block). What
    `bookkeeping` returns says what becomes of the error (final_state): None, it propagates as it
    is; HANDLED, it does not; an exception, raised in its place once everything above is done.
    """

    def __init__(self, store, *, command: str = "plan run"):
        self.store, self.command = store, command
        self.took_over = None
        self._signals = None
        self._claimed = False
        self._started_ray = False
        self._gcs: GcsWatch | None = None
        self._quiet: RayLinesOff | None = None  # Ray's lines off the terminal (on a cluster)
        self.keeper: object = (
            None  # the TrialFiles actor of a cluster run (planner._dispatch.keeper)
        )
        self._exiting = threading.Event()  # __exit__ began: the main thread ends the command
        self._end: Callable[[BaseException | None], BaseException | str | None] | None = None

    def __enter__(self) -> RunSession:
        self.took_over = self.store.lock(self.command)
        return self

    def stop_on_signals(self) -> None:
        """From here on SIGTERM and SIGINT stop the command like Ctrl-C does
        (claim_stop_signals)."""
        self._signals, self._claimed = claim_stop_signals(), True

    def on_end(
        self, bookkeeping: Callable[[BaseException | None], BaseException | str | None]
    ) -> None:
        self._end = bookkeeping

    def start_ray(
        self,
        address: str | None,
        search_path: list[str],
        runs_dir: Path,
        *,
        keeper_session: str | None = None,
        **options,
    ) -> None:
        """start_ray; a Ray started here is shut down when the session ends.

        ray.init installs Ray's own SIGTERM handler (a `sys.exit(1)` with its stack dump on the
        terminal), replacing ours: the stop signals are claimed again once Ray is up, so SIGTERM
        stays an interruption (SLURM and Kubernetes end jobs with it). What is restored at the end
        is still what the command found before its first claim. A stop while ray.init runs comes
        once it has returned (`stops_deferred_while_ray_starts`): an interruption too; and the
        stack dump Ray's C++ core prints on such a signal goes, with fd 2, to the run folder's
        ray.log."""
        try:
            with (
                stderr_to_ray_log(options.get("log_dir")),
                stops_deferred_while_ray_starts(self._claimed),
            ):
                self._started_ray = start_ray(address, search_path, runs_dir, **options)
        finally:
            if self._claimed:
                claim_stop_signals()
        self._gcs = watch_gcs(self._lost)
        if options.get("log_dir") is not None and resolve_address(address) is not None:
            self._quiet = RayLinesOff(Path(options["log_dir"]))
        if keeper_session is not None and resolve_address(address) is not None:
            self.keeper = _trial_files(options.get("log_dir"), keeper_session)

    def _lost(self) -> None:
        """The GCS went (GcsWatch's thread). The main thread is interrupted and ends the command
        through its bookkeeping; when it is stuck in a Ray call that waits on the dead GCS (Ray's
        client would end the process with exit 1 after 60 s, its state left `running`), this thread
        does the bookkeeping (the end's `emergency_note` says what to print), unlocks the folder
        and exits 3."""
        _thread.interrupt_main()
        if self._exiting.wait(MAIN_THREAD_WAIT_S):
            return
        self._exiting.set()
        note = None
        try:
            if self._end is not None:
                self._end(KeyboardInterrupt())
                note = getattr(self._end, "emergency_note", lambda: None)()
        except BaseException:  # noqa: BLE001 - whatever happens, the folder is unlocked and the process ends
            pass
        finally:
            try:
                self.store.close()
                self.store.unlock()
            except BaseException:  # noqa: BLE001
                pass
        try:
            print(note or f"{self.command}: {self.lost}", flush=True)
        finally:
            os._exit(EXIT_INCOMPLETE)

    @property
    def lost(self) -> str | None:
        """Why the Ray session was lost (GcsWatch), or None."""
        return None if self._gcs is None else self._gcs.lost

    def __exit__(self, exc_type, error, tb) -> bool:
        replacement = None
        if self._exiting.is_set():  # the GCS watch's thread is ending the command
            threading.Event().wait()
        self._exiting.set()
        if self._gcs is not None:
            self._gcs.stop()
        try:
            if self._end is not None:
                replacement = self._end(error)
        finally:
            self.store.close()
            self.store.unlock()
            if self._claimed:
                restore_stop_signals(self._signals)
            if self._started_ray and self.lost is None:
                # now, or once the command printed its result (ray_shutdown_deferred)
                shut_ray_down()
                if self._quiet is not None:  # once Ray is down: its last lines go to ray.log too
                    quiet, self._quiet = self._quiet, None
                    after_shutdown(quiet.restore)
            elif (
                self._started_ray
            ):  # Ray's processes are gone with its GCS; shutting down would wait for them
                ray_gone()
                if self._quiet is not None:
                    after_shutdown(self._quiet.restore)
                note_head_lost()  # the process ends, exit 3, once the result is printed
        if isinstance(replacement, BaseException):
            raise replacement  # its __cause__ (or none) is set by whoever made it
        return replacement == HANDLED and error is not None
