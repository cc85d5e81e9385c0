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

import _thread
import atexit
import contextlib
import importlib
import logging
import os
import secrets
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from planner._core.errors import (
    EXIT_INCOMPLETE,
    PlannerError,
    RunError,
    disk_error,
    disk_failed,
)
from planner._core.lazy import lazy_import
from planner._core.status import RunState, StopReason
from planner._dispatch.cluster import resolve_address, resources_for, runtime_env_for, unfit_reason
from planner._dispatch.keeper import start_trial_files
from planner._dispatch.worker import WORKER_ENV
from planner._store.files import open_inside
from planner._store.identity import trainable_search_path  # noqa: F401 - the driver's and reeval's name for it

ray = lazy_import("ray")  # imported when a command starts or joins Ray
# Ray's private names, checked against the installed Ray when first used (as Ray starts)
compat = lazy_import("planner._dispatch.compat")

RAY_LOG = "ray.log"


def start_ray(
    address: str | None,
    search_path: list[str],
    runs_dir: Path,
    log_to_driver: bool = False,
    contract=None,
    contract_dir: Path | None = None,
    log_dir: Path | None = None,
) -> bool:
    """Connect to `address` (or RAY_ADDRESS) or start an embedded local Ray; True when we started
    it.

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
            runtime_env = runtime_env_for(
                contract_dir or Path.cwd(),
                contract.trainable if contract else None,
                runs_dir=runs_dir,
                env_vars=WORKER_ENV,
            )
            with _stderr_to_ray_log(log_dir):  # Ray's C++ core logs a refused connection on fd 2
                try:
                    ray.init(
                        address=address,
                        runtime_env=runtime_env,
                        log_to_driver=log_to_driver,
                        configure_logging=False,
                    )
                except Exception as error:  # ConnectionError and friends: a sentence, not a trace
                    raise RunError(connect_failure(address, error, log_dir=log_dir)) from None
            if contract is not None:
                problem = unfit_reason(resources_for(contract.budget), ray.nodes())
                if problem is not None:
                    raise RunError(problem)
            return True
        pythonpath = os.pathsep.join(
            search_path + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        # In the environment while the embedded Ray starts: its processes, and every worker the
        # raylet starts, inherit them. A job-level runtime_env would say the same, but a worker Ray
        # prestarts at its start (one per CPU) serves only jobs without one: with it, every first
        # trial waited for a worker to start.
        global _embedded_environ
        with environ({**WORKER_ENV, "PYTHONPATH": pythonpath, **token_outside_home()}):
            start_local_ray(log_to_driver=log_to_driver, _system_config=EMBEDDED_SYSTEM_CONFIG)
            _embedded_environ = dict(os.environ)
        return True


# An embedded Ray keeps an idle worker a minute, not a second, before it ends it as one too many
# (Ray ends idle workers beyond one per CPU): the workers warmed for the confirmation during the
# tuning's tail (the tuning's actors hold the CPUs meanwhile) are still there when its first trials
# are sent, instead of each first trial waiting for a new worker process to start. Idle
# workers hold memory only; Ray's shutdown ends them.
#
# Its local sockets are tried every 20 ms, not every second, as often as it takes for the same ten
# seconds Ray allows (RAY_CONNECT_WAIT_MS): the raylet connects to its object store, which it has
# just started in a thread of its own, and when the store is not yet listening Ray's client sleeps
# a whole second before it tries again, a loss common enough at an embedded Ray's start to be
# worth the tighter loop (docs/speed.md). The workers' and the driver's connections to the raylet
# go through the same client, with the same ten seconds.
RAY_CONNECT_WAIT_MS = (
    10 * 1000
)  # Ray's own: raylet_client_num_connect_attempts 10 x ..._timeout_milliseconds 1000
CONNECT_EVERY_MS = 20
EMBEDDED_SYSTEM_CONFIG = {
    "idle_worker_killing_time_threshold_ms": 60_000,
    "raylet_client_connect_timeout_milliseconds": CONNECT_EVERY_MS,
    "raylet_client_num_connect_attempts": RAY_CONNECT_WAIT_MS // CONNECT_EVERY_MS,
}


@contextmanager
def importing_meanwhile(module: str | None):
    """`module` imported in a thread while the block runs (an embedded Ray's start: the driver
    mostly waits for the GCS and the raylet to come up), joined when it ends: Ray Tune's import
    (0.6 s of the driver's CPU) no longer follows Ray's start (1 s) but runs beside it. Python's
    import locks are per module, so the two only wait for each other on a module both import; the
    ones they share today are imported here first. A failed import is left for the code that needs
    the module, which imports it again and fails as it would have without this (the error is not
    swallowed: it is raised there)."""
    if module is None:
        yield
        return
    for name in compat.SHARED_WITH_RAY_INIT:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    thread = threading.Thread(
        target=_import_quietly, args=(module,), name="planner-import", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import_quietly(module: str) -> None:
    with contextlib.suppress(BaseException):  # raised again where the module is used (above)
        importlib.import_module(module)


_embedded_environ: dict[str, str] | None = (
    None  # what the workers of the embedded Ray started here inherited
)


def embedded_worker_environ() -> dict[str, str] | None:
    """The environment every worker of the embedded Ray this process started inherits (None when
    none was started, or it joined a cluster, or that Ray was shut down)."""
    return _embedded_environ if ray.is_initialized() else None


@contextmanager
def environ(values: dict[str, str], *, override: bool = True):
    """`values` in this process's environment while the block runs, then every one of them as it was
    (unset again when it was unset). With `override=False` a variable already set keeps its
    value."""
    before = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if override or name not in os.environ:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, was in before.items():
            if was is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = was


# How Ray words a connection its GCS refused for the token: the ConnectionError ray.init raises
# carries the AuthenticationError only as text, in its cause's formatted traceback.
_REFUSED = ("InvalidAuthToken", "Authentication token is missing or incorrect")
# The driver's own token problems, raised before anything is sent (an AuthenticationError of its
# own).
_NO_TOKEN = "no authentication token was found"
_BAD_TOKEN_FILE = "RAY_AUTH_TOKEN_PATH is set but"


def _error_chain(error: BaseException | None):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def connect_failure(
    address: str, error: BaseException, environ=None, *, log_dir: Path | None = None
) -> str:
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
            problem = (
                "no token was found in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
            )
        else:
            problem = f"Ray says: {str(error).split('. ')[0]}"
        return (
            f"cannot connect to the Ray cluster at {address}: token authentication is on "
            f"(RAY_AUTH_MODE is "
            f"token) but {problem}; set RAY_AUTH_TOKEN to the cluster's token, or "
            f"RAY_AUTH_TOKEN_PATH to a "
            "file that holds it"
        )
    # Ray itself sets RAY_AUTH_MODE to token in this process when it joins `auto` and finds a token.
    if environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return (
            f"the Ray cluster at {address} refused the connection: authentication failed, because "
            f"the cluster "
            "uses token authentication and the driver sent no token (Ray sends one only when "
            "RAY_AUTH_MODE is "
            "token); set RAY_AUTH_MODE to token, and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to "
            "the cluster's "
            f"token, in the environment of plan run{where}"
        )
    if environ.get("RAY_AUTH_TOKEN", "").strip():
        source = "RAY_AUTH_TOKEN"
    elif environ.get("RAY_AUTH_TOKEN_PATH", "").strip():
        source = "the file RAY_AUTH_TOKEN_PATH names"
    else:
        source = "~/.ray/auth_token"
    return (
        f"the Ray cluster at {address} refused the connection: authentication failed, because the "
        f"token the "
        f"driver sent (from {source}) is not the cluster's; set RAY_AUTH_TOKEN (or "
        f"RAY_AUTH_TOKEN_PATH) to the "
        f"token the cluster was started with (`ray get-auth-token` on the head prints it){where}"
    )


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


class _RayLinesOff:
    """While a command holds a cluster's Ray: Ray's own lines kept off the terminal, in the run
    folder's ray.log.

    Two ways reach a terminal past `log_to_driver=False` and the `ray` logger: Ray's C++ core writes
    to file descriptor 2 (a lost node's `Raylet is terminated`, state dumps, heartbeats), and the
    driver's thread that reads the cluster's error channel prints `(raylet) ...` on sys.stdout.
    Descriptor 2 becomes ray.log (sys.stderr keeps the terminal, on a copy of the old descriptor),
    and what Ray's own threads (named `ray_...`) print on sys.stdout goes to ray.log too."""

    def __init__(self, log_dir: Path):
        _flush_stderr()
        self.saved = os.dup(2)
        log = open_inside(log_dir, Path(log_dir) / RAY_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(log, 2)
        os.close(log)
        self.stderr, self.stdout = sys.stderr, sys.stdout
        self.terminal = os.fdopen(os.dup(self.saved), "w", buffering=1, errors="replace")
        sys.stderr = self.terminal
        sys.stdout = _NotRaysThreads(self.stdout, logging.getLogger("ray"))

    def restore(self) -> None:
        _flush_stderr()
        sys.stdout, sys.stderr = self.stdout, self.stderr
        os.dup2(self.saved, 2)
        os.close(self.saved)
        with contextlib.suppress(OSError):
            self.terminal.close()


class _NotRaysThreads:
    """sys.stdout, except for what Ray's own threads print: that is logged to `logger` (ray.log)."""

    def __init__(self, stream, logger: logging.Logger):
        self._stream, self._logger = stream, logger

    def write(self, text: str) -> int:
        if threading.current_thread().name.startswith("ray_"):
            if text.strip():
                self._logger.warning("%s", text.rstrip())
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _RunFolderLog(logging.FileHandler):
    """A FileHandler on `log_dir/ray.log` opened through `open_inside`: no link followed (symbolic,
    dangling or hard), no FIFO or device opened; a planted one is a RunError naming it, raised
    here, not at the first emit."""

    def __init__(self, log_dir: Path):
        self._log_dir = Path(log_dir)
        super().__init__(self._log_dir / RAY_LOG, encoding="utf-8", delay=False)

    def _open(self):
        fd = open_inside(
            self._log_dir, self._log_dir / RAY_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND
        )
        return os.fdopen(fd, "a", encoding="utf-8")


_ray_log_handler = (
    None  # the handler of the last run folder (a later run in this process replaces it)
)


@contextmanager
def _ray_logs_to_run_folder(log_dir: Path | None):
    """Ray's driver-side log lines (start-up notes, the token-authentication notice, Tune's warnings
    and errors) go to `log_dir/ray.log`, never to the terminal.

    `ray.init(configure_logging=False)` first clears the `ray` logger's handlers, and a
    record no handler takes is printed on stderr by Python's last-resort handler. So
    during start-up the file handler sits on the logger Ray's start-up code logs on
    (`compat.RAY_STARTUP_LOGGER`); afterwards on `ray` itself, which does not propagate to the
    root logger. The file starts with where Ray's session folder (raylet and worker logs) is.
    """
    global _ray_log_handler
    if log_dir is None:
        yield
        return
    ray_logger, startup = logging.getLogger("ray"), logging.getLogger(compat.RAY_STARTUP_LOGGER)
    if _ray_log_handler is not None:
        ray_logger.removeHandler(_ray_log_handler)
        _ray_log_handler.close()
    handler = _RunFolderLog(log_dir)  # opened now: a planted ray.log is refused before Ray starts
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
    # after a failed start there is no session to name, and asking Ray for its context would start
    # one (Ray's auto-init), on the disk that just refused it
    if not ray.is_initialized():
        return
    try:  # a Ray without these (older than the public session name) just leaves the line out
        context = ray.get_runtime_context()
        session = os.path.join(context.get_temp_dir(), context.get_session_name())
    except (AttributeError, AssertionError):
        return
    logger.info("Ray's own logs (raylet, GCS, workers) are in %s/logs", session)


def token_outside_home() -> dict[str, str]:
    """The authentication token of an embedded Ray, in its environment, when Ray could not keep it
    in HOME (`~/.ray/auth_token`): a read-only or missing HOME, common in containers and clusters.

    Ray (its token authentication on by default) writes a new token there before it starts, and a
    HOME it cannot write failed every start; nothing of a run belongs in HOME. A token the user
    gives (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH`), a mode other than `token` and a token already
    in HOME are left to Ray; the token given here lives only in the environment of the embedded
    Ray's processes, never in a file (a variable of a credential's name: identity.json leaves it
    out, a worker's redactor cuts it from a trial's output)."""
    # A token of the user's is left to Ray, and so is a mode without tokens; RAY_AUTH_MODE=token
    # alone (which ray.init itself sets in its process) still has Ray write a new token to HOME.
    if "RAY_AUTH_TOKEN" in os.environ or "RAY_AUTH_TOKEN_PATH" in os.environ:
        return {}
    if os.environ.get("RAY_AUTH_MODE", "token") != "token":
        return {}
    try:
        folder = Path.home() / ".ray"
    except RuntimeError:  # no HOME and no entry in the password database
        return {"RAY_AUTH_TOKEN": secrets.token_hex(32)}
    if os.access(folder / "auth_token", os.R_OK) or _can_create_in(folder):
        return {}
    return {"RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _can_create_in(folder: Path) -> bool:
    """Whether `folder` can be written, or created in a HOME that is there and can be written (a
    HOME that is not there is not created: it is no place of the run's)."""
    if folder.is_dir():
        return os.access(folder, os.W_OK | os.X_OK)
    home = folder.parent
    return home.is_dir() and os.access(home, os.W_OK | os.X_OK)


def start_local_ray(attempts: int = 3, **options) -> None:
    """ray.init for an embedded local Ray, retried: on a loaded machine the raylet can miss Ray's
    fixed 30-second start-up wait.

    Its own Ray, always (`address="local"`): without an address, ray.init joins the cluster that
    `ray start` last started on this machine (/tmp/ray/ray_current_cluster), and refused to, with
    the embedded Ray's `_system_config` ("When connecting to an existing cluster, _system_config
    must not be provided"): a user's `plan run` without --address failed three times over while a
    cluster of theirs was up."""
    options.setdefault("address", "local")
    for attempt in range(1, attempts + 1):
        try:
            with (
                compat.node_registration_polled(),
                compat.without_idle_head_processes(bool(options.get("log_to_driver"))),
            ):
                ray.init(include_dashboard=False, configure_logging=False, **options)
            return
        except Exception as error:  # Ray raises a bare Exception for a start-up timeout
            ray.shutdown()
            # a disk that cannot be written (or may not be) fails every attempt alike: said at once
            if isinstance(error, OSError) and disk_error(error) is not None:
                raise RunError(
                    f"could not start a local Ray: {error}; Ray writes its session under "
                    f"{_ray_temp_root()} (set RAY_TMPDIR to move it): give it a disk it can write"
                ) from None
            if attempt == attempts:
                raise RunError(
                    f"could not start a local Ray after {attempts} attempts: {error}"
                ) from None


def _ray_temp_root() -> str:
    """Where an embedded Ray writes its session folders: RAY_TMPDIR, else the system's temporary
    folder (TMPDIR, /tmp), as Ray chooses it."""
    return os.environ.get("RAY_TMPDIR") or os.path.join(tempfile.gettempdir(), "ray")


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
        _note_trial_processes()
        raise KeyboardInterrupt

    return {
        signal.SIGTERM: signal.signal(signal.SIGTERM, handler),
        signal.SIGINT: signal.signal(signal.SIGINT, handler),
    }


# What the embedded Ray's workers had started when a stop signal came. Tune ends the trials'
# actors before Ray shuts down, and a command's supervisor and a trainer ignoring SIGTERM are then
# re-parented to PID 1, out of reach of the sweep at shutdown: they are taken here, while their
# workers still hold them.
_trees_at_stop: list = []


def _note_trial_processes() -> None:
    try:
        _trees_at_stop.extend(_trial_processes(compat.embedded_process_pids()))
    except Exception:  # noqa: BLE001 - the stop itself must not fail: the sweep is a courtesy
        pass


@contextmanager
def _stops_deferred_while_ray_starts(claimed: bool):
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


def _ray_gone() -> None:
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


class _Deferred:
    """The shutdowns an open ray_shutdown_deferred block was left, and the signal handlers held off
    since the first."""

    def __init__(self):
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
    _flush_stderr()
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


def _shut_ray_down() -> None:
    """Ray shut down now, or at the end of the open ray_shutdown_deferred block."""
    if _deferred is not None:
        _deferred.add(_shutdown)
    else:
        _shutdown()


def _after_shutdown(step: Callable[[], None]) -> None:
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
    global _embedded_environ
    _embedded_environ = None
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
        self._quiet: _RayLinesOff | None = None  # Ray's lines off the terminal (on a cluster)
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
        once it has returned (`_stops_deferred_while_ray_starts`): an interruption too; and the
        stack dump Ray's C++ core prints on such a signal goes, with fd 2, to the run folder's
        ray.log."""
        try:
            with (
                _stderr_to_ray_log(options.get("log_dir")),
                _stops_deferred_while_ray_starts(self._claimed),
            ):
                self._started_ray = start_ray(address, search_path, runs_dir, **options)
        finally:
            if self._claimed:
                claim_stop_signals()
        self._gcs = watch_gcs(self._lost)
        if options.get("log_dir") is not None and resolve_address(address) is not None:
            self._quiet = _RayLinesOff(Path(options["log_dir"]))
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
                _shut_ray_down()
                if self._quiet is not None:  # once Ray is down: its last lines go to ray.log too
                    quiet, self._quiet = self._quiet, None
                    _after_shutdown(quiet.restore)
            elif (
                self._started_ray
            ):  # Ray's processes are gone with its GCS; shutting down would wait for them
                _ray_gone()
                if self._quiet is not None:
                    _after_shutdown(self._quiet.restore)
                if _deferred is not None:  # the process ends, exit 3, once the result is printed
                    _deferred.lost = True
        if isinstance(replacement, BaseException):
            raise replacement  # its __cause__ (or none) is set by whoever made it
        return replacement == HANDLED and error is not None
