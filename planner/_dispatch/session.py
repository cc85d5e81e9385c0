"""The session a command runs in, shared by `plan run` and `plan reeval`.

`RunSession` is a command's hold on a run folder: the folder's lock, SIGTERM
and SIGINT turned into a clean stop, the Ray it started or joined, and the
bookkeeping of its end (the command's `on_end`: state.json, run_ended and the
lineage for `plan run`), then the lock released, the signals restored and Ray
shut down, whatever happened. `final_state` maps how the command's body ended
to the run state and its reason. Also: where trainables are found (the search
path), and connecting to a cluster or starting an embedded local Ray.

Ray stays off the terminal: the workers' output is not forwarded to the driver
(`log_to_driver=False`: a trial's own prints are captured in its trial folder),
and the driver's `ray` loggers write to the run folder's `ray.log`, which also
names Ray's session folder (its raylet and worker logs). Without a handler,
Python's last-resort handler would print every Ray warning on stderr.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from planner._core.errors import PlannerError, RunError
from planner._core.lazy import lazy_import
from planner._core.status import RunState, StopReason
from planner._dispatch.cluster import resolve_address, resources_for, runtime_env_for, unfit_reason
from planner._dispatch.worker import WORKER_ENV
from planner._store.files import open_inside
from planner._store.identity import trainable_search_path  # noqa: F401 - the driver's and reeval's name for it
from planner._store.resume import disk_error

ray = lazy_import("ray")  # imported when a command starts or joins Ray

RAY_LOG = "ray.log"


def start_ray(address: str | None, search_path: list[str], runs_dir: Path, log_to_driver: bool = False,
              contract=None, contract_dir: Path | None = None, log_dir: Path | None = None) -> bool:
    """Connect to `address` (or RAY_ADDRESS) or start an embedded local Ray; True when we started it.

    With `log_dir` (the run folder), Ray's own log lines go to `log_dir/ray.log`
    (`ray_logs_to`), never to the terminal.

    On a cluster the workers get the code through runtime_env (planner._dispatch.cluster):
    the contract's folder as working_dir, the trainable's package and planner
    itself as py_modules; and a trial request no node can ever hold is refused
    here instead of waiting forever.
    """
    if ray.is_initialized():
        return False
    with _ray_logs_to_run_folder(log_dir):
        address = resolve_address(address)
        if address:
            runtime_env = runtime_env_for(contract_dir or Path.cwd(), contract.trainable if contract else None,
                                          runs_dir=runs_dir, env_vars=WORKER_ENV)
            with _stderr_to_ray_log(log_dir):  # Ray's C++ core logs a refused connection on fd 2
                try:
                    ray.init(address=address, runtime_env=runtime_env, log_to_driver=log_to_driver,
                             configure_logging=False)
                except Exception as error:  # ConnectionError and friends: a sentence, not a trace
                    raise RunError(connect_failure(address, error, log_dir=log_dir)) from None
            if contract is not None:
                problem = unfit_reason(resources_for(contract.budget), ray.nodes())
                if problem is not None:
                    raise RunError(problem)
            return True
        pythonpath = os.pathsep.join(search_path + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                    if p])
        start_local_ray(runtime_env={"env_vars": {**WORKER_ENV, "PYTHONPATH": pythonpath}},
                        log_to_driver=log_to_driver)
        return True


# How Ray words a connection its GCS refused for the token: the ConnectionError ray.init raises
# carries the AuthenticationError only as text, in its cause's formatted traceback.
_REFUSED = ("InvalidAuthToken", "Authentication token is missing or incorrect")
# The driver's own token problems, raised before anything is sent (an AuthenticationError of its own).
_NO_TOKEN = "no authentication token was found"
_BAD_TOKEN_FILE = "RAY_AUTH_TOKEN_PATH is set but"


def _error_chain(error: BaseException | None):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def connect_failure(address: str, error: BaseException, environ=None, *, log_dir: Path | None = None) -> str:
    """The one sentence for a `ray.init(address=...)` that failed with `error`.

    A refusal for authentication says so and what to set. With an explicit address Ray sends a
    token only when the driver's environment has RAY_AUTH_MODE set to token (RAY_AUTH_TOKEN alone
    sends nothing); the token comes from RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names,
    else ~/.ray/auth_token. Neither the token nor its file is printed (the redactor would cut them
    anyway), and no sentence writes NAME=value for these names, which the redactor would cut too.
    """
    environ = os.environ if environ is None else environ
    chain = list(_error_chain(error))
    texts = [f"{type(e).__name__}: {e}" for e in chain]
    where = f" (Ray's own lines: {Path(log_dir) / RAY_LOG})" if log_dir is not None else ""
    refused = any(mark in text for text in texts for mark in _REFUSED)
    if not refused and not any(type(e).__name__ == "AuthenticationError" for e in chain):
        return f"cannot connect to the Ray cluster at {address}: {error}{where}"
    if not refused:  # the driver had no token to send
        if any(_BAD_TOKEN_FILE in text for text in texts):
            problem = "RAY_AUTH_TOKEN_PATH names a file that cannot be read or is empty"
        elif any(_NO_TOKEN in text for text in texts):
            problem = "no token was found in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
        else:
            problem = f"Ray says: {str(error).split('. ')[0]}"
        return (f"cannot connect to the Ray cluster at {address}: token authentication is on (RAY_AUTH_MODE is "
                f"token) but {problem}; set RAY_AUTH_TOKEN to the cluster's token, or RAY_AUTH_TOKEN_PATH to a "
                "file that holds it")
    # Ray itself sets RAY_AUTH_MODE to token in this process when it joins `auto` and finds a token.
    if environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return (f"the Ray cluster at {address} refused the connection: authentication failed, because the cluster "
                "uses token authentication and the driver sent no token (Ray sends one only when RAY_AUTH_MODE is "
                "token); set RAY_AUTH_MODE to token, and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's "
                f"token, in the environment of plan run{where}")
    if environ.get("RAY_AUTH_TOKEN", "").strip():
        source = "RAY_AUTH_TOKEN"
    elif environ.get("RAY_AUTH_TOKEN_PATH", "").strip():
        source = "the file RAY_AUTH_TOKEN_PATH names"
    else:
        source = "~/.ray/auth_token"
    return (f"the Ray cluster at {address} refused the connection: authentication failed, because the token the "
            f"driver sent (from {source}) is not the cluster's; set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the "
            f"token the cluster was started with (`ray get-auth-token` on the head prints it){where}")


@contextmanager
def _stderr_to_ray_log(log_dir: Path | None):
    """While Ray connects, the process's stderr (file descriptor 2) is the run folder's ray.log.

    Ray's C++ core logs to fd 2, not through Python's logging: a driver whose token the cluster
    refuses prints a warning a second for about 20 s, then a traceback. With fd 2 on ray.log those
    lines stay with Ray's others, and the terminal gets only planner's sentence.
    """
    if log_dir is None:
        yield
        return
    log = open_inside(log_dir, Path(log_dir) / RAY_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    _flush_stderr()
    saved = os.dup(2)
    try:
        os.dup2(log, 2)
        yield
    finally:
        _flush_stderr()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def _flush_stderr() -> None:
    for stream in {id(s): s for s in (sys.stderr, sys.__stderr__) if s is not None}.values():
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


_ray_log_handler = None  # the handler of the last run folder (a later run in this process replaces it)


@contextmanager
def _ray_logs_to_run_folder(log_dir: Path | None):
    """Ray's driver-side log lines (start-up notes, the token-authentication notice, Tune's warnings
    and errors) go to `log_dir/ray.log`, never to the terminal.

    `ray.init(configure_logging=False)` first clears the `ray` logger's handlers, and a
    record no handler takes is printed on stderr by Python's last-resort handler. So
    during start-up the file handler sits on `ray._private` (where Ray's start-up code
    logs); afterwards on `ray` itself, which does not propagate to the root logger.
    The file starts with where Ray's session folder (raylet and worker logs) is.
    """
    global _ray_log_handler
    if log_dir is None:
        yield
        return
    ray_logger, startup = logging.getLogger("ray"), logging.getLogger("ray._private")
    if _ray_log_handler is not None:
        ray_logger.removeHandler(_ray_log_handler)
        _ray_log_handler.close()
    handler = logging.FileHandler(Path(log_dir) / RAY_LOG, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _ray_log_handler = handler
    startup.addHandler(handler)
    try:
        yield
    finally:
        startup.removeHandler(handler)
        ray_logger.addHandler(handler)
        ray_logger.propagate = False
        if ray_logger.level == logging.NOTSET or ray_logger.level > logging.INFO:
            ray_logger.setLevel(logging.INFO)
        _note_session_dir(ray_logger)


def _note_session_dir(logger: logging.Logger) -> None:
    try:  # not a public API: a Ray that moved it just leaves the line out
        session = ray._private.worker._global_node.get_session_dir_path()
    except AttributeError:
        return
    logger.info("Ray's own logs (raylet, GCS, workers) are in %s/logs", session)


def start_local_ray(attempts: int = 3, **options) -> None:
    """ray.init for an embedded local Ray, retried: on a loaded machine the raylet can miss Ray's
    fixed 30-second start-up wait."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(include_dashboard=False, configure_logging=False, **options)
            return
        except Exception as error:  # Ray raises a bare Exception for a start-up timeout
            ray.shutdown()
            if attempt == attempts:
                raise RunError(f"could not start a local Ray after {attempts} attempts: {error}") from None


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
        raise KeyboardInterrupt

    return {signal.SIGTERM: signal.signal(signal.SIGTERM, handler),
            signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler)}


def restore_stop_signals(previous) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


# ------------------------------------------------------------------ the session of one command

HANDLED = "handled"  # what an end's bookkeeping returns for an error it handled: the command returns normally


def final_state(error: BaseException | None, stopped=None, *, run_dir: Path | None = None,
                budget: str | None = None) -> tuple[RunState, str, BaseException | str | None]:
    """(the run state, its reason, what becomes of `error`) for a command body that ended with `error`
    (None: it returned, stopping early for `stopped`, a StopReason, or not at all).

    What becomes of it: None, raised as it is; HANDLED, not raised (Ctrl-C and SIGTERM: `interrupted`, the
    command returns its result); or the error to raise instead (a full disk is `failed` with a sentence
    that says how to resume, a RunError in place of the OSError). Any other error is `failed`.
    """
    if error is None:
        if stopped == StopReason.BUDGET:
            return RunState.BUDGET_EXHAUSTED, f"budget.max_wall_time of {budget} reached", None
        if stopped == StopReason.INTERRUPTED:
            return RunState.INTERRUPTED, "stopped by the user", None
        return RunState.COMPLETED, "all planned trials ended", None
    if isinstance(error, KeyboardInterrupt):
        return RunState.INTERRUPTED, "stopped by the user (Ctrl-C or SIGTERM)", HANDLED
    if isinstance(error, OSError) and disk_error(error):
        reason = (f"cannot write the run folder {run_dir}: {error.strerror}; what ended is "
                  f"kept; free space and resume with --resume {run_dir}")
        return RunState.FAILED, reason, raised_from(RunError(reason))
    if isinstance(error, PlannerError):
        return RunState.FAILED, str(error), None
    return RunState.FAILED, f"internal error: {type(error).__name__}: {error}", None


def raised_from(error: BaseException, cause: BaseException | None = None) -> BaseException:
    """`error` raised `from cause` (from None when None): the trace shows the cause, or nothing before it."""
    error.__cause__, error.__suppress_context__ = cause, True
    return error


class RunSession:
    """One command's hold on a run folder and on Ray, as a context manager.

        with RunSession(store, command="plan run") as session:   # takes the lock (session.took_over)
            ...                                                  # a refusal here only unlocks
            session.stop_on_signals()
            session.on_end(bookkeeping)                          # bookkeeping(error) before the unlock
            session.start_ray(address, search_path, runs_dir, ...)
            ...

    On the way out, whatever happened: `bookkeeping(error)` (the error the body raised, or None), then the
    store closed and unlocked, the stop signals restored, and a Ray this session started shut down. What
    `bookkeeping` returns says what becomes of the error (final_state): None, it propagates as it is;
    HANDLED, it does not; an exception, raised in its place once everything above is done.
    """

    def __init__(self, store, *, command: str = "plan run"):
        self.store, self.command = store, command
        self.took_over = None
        self._signals = None
        self._claimed = False
        self._started_ray = False
        self._end: Callable[[BaseException | None], BaseException | str | None] | None = None

    def __enter__(self) -> RunSession:
        self.took_over = self.store.lock(self.command)
        return self

    def stop_on_signals(self) -> None:
        """From here on SIGTERM and SIGINT stop the command like Ctrl-C does (claim_stop_signals)."""
        self._signals, self._claimed = claim_stop_signals(), True

    def on_end(self, bookkeeping: Callable[[BaseException | None], BaseException | str | None]) -> None:
        self._end = bookkeeping

    def start_ray(self, address: str | None, search_path: list[str], runs_dir: Path, **options) -> None:
        """start_ray; a Ray started here is shut down when the session ends."""
        self._started_ray = start_ray(address, search_path, runs_dir, **options)

    def __exit__(self, exc_type, error, tb) -> bool:
        replacement = None
        try:
            if self._end is not None:
                replacement = self._end(error)
        finally:
            self.store.close()
            self.store.unlock()
            if self._claimed:
                restore_stop_signals(self._signals)
            if self._started_ray:
                ray.shutdown()
        if isinstance(replacement, BaseException):
            raise replacement  # its __cause__ (or none) is set by whoever made it
        return replacement == HANDLED and error is not None
