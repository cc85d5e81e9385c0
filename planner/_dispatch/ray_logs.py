"""Ray's own lines kept off the terminal, in the run folder's ray.log.

Ray stays off the terminal: the workers' output is not forwarded to the driver
(`log_to_driver=False`: a trial's own prints are captured in its trial folder),
and the driver's `ray` loggers write to the run folder's `ray.log`, which also
names Ray's session folder (its raylet and worker logs). Without a handler,
Python's last-resort handler would print every Ray warning on stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from planner._core.lazy import lazy_import
from planner._store.files import open_inside

ray = lazy_import("ray")  # imported when a command starts or joins Ray
# Ray's private names, checked against the installed Ray when first used (as Ray starts)
compat = lazy_import("planner._dispatch.compat")

RAY_LOG = "ray.log"


@contextmanager
def stderr_to_ray_log(log_dir: Path | None):
    """While Ray connects, the process's stderr (file descriptor 2) is the run folder's ray.log.

    Ray's C++ core logs to fd 2, not through Python's logging: a driver whose token the cluster
    refuses prints a warning a second for about 20 s, then a traceback. With fd 2 on ray.log those
    lines stay with Ray's others, and the terminal gets only planner's sentence.
    """
    if log_dir is None:
        yield
        return
    log = open_inside(log_dir, Path(log_dir) / RAY_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    flush_stderr()
    saved = os.dup(2)
    try:
        os.dup2(log, 2)
        yield
    finally:
        flush_stderr()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def flush_stderr() -> None:
    for stream in {id(s): s for s in (sys.stderr, sys.__stderr__) if s is not None}.values():
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


class RayLinesOff:
    """While a command holds a cluster's Ray: Ray's own lines kept off the terminal, in the run
    folder's ray.log.

    Two ways reach a terminal past `log_to_driver=False` and the `ray` logger: Ray's C++ core writes
    to file descriptor 2 (a lost node's `Raylet is terminated`, state dumps, heartbeats), and the
    driver's thread that reads the cluster's error channel prints `(raylet) ...` on sys.stdout.
    Descriptor 2 becomes ray.log (sys.stderr keeps the terminal, on a copy of the old descriptor),
    and what Ray's own threads (named `ray_...`) print on sys.stdout goes to ray.log too."""

    def __init__(self, log_dir: Path):
        flush_stderr()
        self.saved = os.dup(2)
        log = open_inside(log_dir, Path(log_dir) / RAY_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(log, 2)
        os.close(log)
        self.stderr, self.stdout = sys.stderr, sys.stdout
        self.terminal = os.fdopen(os.dup(self.saved), "w", buffering=1, errors="replace")
        sys.stderr = self.terminal
        sys.stdout = _NotRaysThreads(self.stdout, logging.getLogger("ray"))

    def restore(self) -> None:
        flush_stderr()
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
def ray_logs_to_run_folder(log_dir: Path | None):
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
