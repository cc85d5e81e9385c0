"""The run folder's lock: one `plan run` at a time on a run folder.

The lock is the file `RUN_DIR/lock`, created atomically (`O_CREAT | O_EXCL`)
and holding `{"pid", "host", "started", "boot_id", "pid_started"}`. While the
driver lives it also holds an advisory `flock` on that file, which the kernel
drops when the process dies however it dies (SIGKILL included).

A lock is stale, and taken over with a note, when it was left on THIS host by
a process that is gone: its flock is free and its pid is dead, or the pid now
belongs to another process (another start time), or the machine rebooted since
(another boot id). A lock left by another host is never taken over
automatically (that host may still be running the run on a shared disk): the
error names the pid and host and says how to take over by hand.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import psutil

from planner._core.errors import RunLockedError
from planner._core.text import utc_now
from planner._store.files import open_inside, read_inside, unlink_inside


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def process_started(pid: int) -> float | None:
    """The start time of process `pid` (seconds since the epoch), or None when it is not running."""
    try:
        return round(psutil.Process(pid).create_time(), 2)
    except Exception:  # noqa: BLE001 - no such process, no psutil, no permission: unknown
        return None


def pid_alive(pid: Any) -> TypeGuard[int]:
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 2**31:
        return False  # no process has that id (a planted pid like 2**62 is no process either)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def read_lock(path: Path) -> dict[str, Any] | None:
    """The lock's content (None when missing or unreadable); a link or special file is refused
    (RunError)."""
    data = read_inside(
        path.parent, path, cap=1 << 20
    )  # a link, a FIFO, a huge file: RunError naming it
    try:
        value = json.loads(data) if data is not None else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def stale_reason(held: dict[str, Any] | None, host: str | None = None) -> str | None:
    """Why a lock left on this host is stale (its process is gone), or None when it may be alive."""
    host = host or socket.gethostname()
    if not held:
        return None
    if held.get("host") != host:
        return None
    if held.get("boot_id") and boot_id() and held["boot_id"] != boot_id():
        return "the machine rebooted since it was taken"
    pid = held.get("pid")
    if not pid_alive(pid):
        return f"its process (pid {pid}) is gone"
    started = held.get("pid_started")
    now = process_started(pid)
    if started is not None and now is not None and abs(now - float(started)) > 1.0:
        return f"pid {pid} now belongs to another process"
    return None


@dataclass
class RunLock:
    """A held lock; `release()` removes it."""

    path: Path
    fd: int
    info: dict[str, Any]
    took_over: dict[str, Any] | None = None  # the stale lock it replaced, with `reason`

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            held = _read_fd(
                self.fd
            )  # our own file, through our descriptor: never a link put in its place
            if (
                held
                and held.get("pid") == self.info["pid"]
                and held.get("token") == self.info["token"]
            ):
                unlink_inside(self.path.parent, self.path, inode=os.fstat(self.fd).st_ino)
        finally:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def acquire(run_dir: str | os.PathLike, command: str = "plan run") -> RunLock:
    """Take `run_dir/lock`, taking over a stale one; raise RunLockedError naming the holder
    otherwise."""
    path = Path(run_dir) / "lock"
    pid = os.getpid()
    info = {
        "pid": pid,
        "host": socket.gethostname(),
        "started": utc_now(),
        "boot_id": boot_id(),
        "pid_started": process_started(pid),
        "token": secrets.token_hex(8),
        "command": command,
    }
    payload = (json.dumps(info) + "\n").encode()
    for _ in range(5):
        try:
            fd = open_inside(path.parent, path, os.O_CREAT | os.O_EXCL | os.O_RDWR)
        except FileExistsError:
            took_over = _take_over(path, info, payload)
            if took_over is None:
                continue  # the file went away or changed under us: try again
            fd, old = took_over
            return RunLock(path, fd, info, old)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (
            OSError
        ):  # someone judged our empty new file stale in the instant before we locked it
            os.close(fd)
            _refuse(path, read_lock(path), "")
        try:
            _write_fd(fd, payload)
        except OSError:
            ino = os.fstat(fd).st_ino
            os.close(fd)
            unlink_inside(path.parent, path, inode=ino)
            raise
        return RunLock(path, fd, info)
    raise RunLockedError(
        f"could not take the lock {path}: it kept changing under us; is another `plan run` "
        f"starting?"
    )


def _take_over(path: Path, info: dict, payload: bytes) -> tuple[int, dict] | None:
    """(fd, the stale lock's content) when the existing lock is stale and is now ours; raises when
    it is held."""
    try:
        fd = open_inside(
            path.parent, path, os.O_RDWR
        )  # a link or a FIFO as `lock` is refused, never followed
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            os.close(fd)
            fd = -1
            _refuse(path, read_lock(path), "it is held by a live process")
        # the flock is ours: is this still the file at `path`, and is its holder gone?
        try:
            if os.fstat(fd).st_ino != os.stat(path, follow_symlinks=False).st_ino:
                os.close(fd)
                return None
        except FileNotFoundError:
            os.close(fd)
            return None
        held = _read_fd(fd)
        if held is None:
            if (
                time.time() - os.fstat(fd).st_mtime < 5.0
            ):  # another process may be writing it right now
                os.close(fd)
                fd = -1
                _refuse(path, None, "")
            reason: str | None = "its content was unreadable (torn) and no process holds it"
        else:
            reason = stale_reason(held, info["host"])
        if reason is None:
            os.close(fd)
            fd = -1
            _refuse(path, held, "")
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        _write_fd(fd, payload)
        return fd, {**(held or {}), "reason": reason}
    except BaseException:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        raise


def _refuse(path: Path, held: dict | None, why: str) -> None:
    held = held or {}
    pid, host = held.get("pid", "?"), held.get("host", "?")
    here = socket.gethostname()
    if host not in ("?", here):
        advice = (
            f"it was taken on another host; if no `plan run` is running there any more (or {host} "
            f"was this "
            f"machine before a restart), remove {path} and resume again"
        )
    else:
        advice = f"wait for it to end, or stop it (kill {pid}) and resume"
    raise RunLockedError(
        f"{path.parent} is in use by `{held.get('command', 'plan run')}` (pid {pid} on host "
        f"{host}, since "
        f"{held.get('started', '?')}); {advice}"
    ) from None


def _write_fd(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.fsync(fd)


def _read_fd(fd: int) -> dict | None:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    try:
        value = json.loads(b"".join(chunks).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
