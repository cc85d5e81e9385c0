"""Append-only JSON lines that survive a killed writer and a full disk.

- `heal(path)`: a writer killed mid-line leaves a torn last line (no newline,
  or not valid JSON). Before anything is appended again the torn tail is cut
  off, so the next record starts on a line of its own and is never glued to
  the broken one. What was cut is returned (the caller logs it).
- `append_line(handle, line)`: one whole line, flushed and fsync'd. When the
  write fails (ENOSPC, EIO), the file is truncated back to where it was, so a
  failed append never leaves half a record behind; then the error goes on.

Files are opened through planner._store.files: a link, a FIFO or a device in
the place of a JSON-lines file is refused (RunError), never followed. How the
lines are read back is the one policy of planner._store.read.iter_jsonl.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from planner._core.errors import RunError
from planner._store.files import open_inside


def torn_tail(path: Path) -> tuple[int, bytes]:
    """(offset just after the last newline, the bytes after it): a torn last line, or b"" when
    whole."""
    try:
        fd = open_inside(
            path.parent, path
        )  # a link or a FIFO as trials.jsonl is refused, never followed
    except FileNotFoundError:
        return 0, b""
    size = os.fstat(fd).st_size
    with os.fdopen(fd, "rb") as handle:
        if size == 0:
            return 0, b""
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            handle.seek(start)
            block = handle.read(end - start)
            if end == size and block.endswith(b"\n"):
                return size, b""
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        handle.seek(keep)
        return keep, handle.read()


def heal(path: Path) -> bytes:
    """Cut a torn last line off `path`; return the bytes cut (b"" when the file was whole).

    The file is opened for writing first, torn or not: one that cannot be written in place (a link,
    hard or symbolic, a FIFO) is refused here, before a resume writes anything (LinkedFileError)."""
    try:
        os.close(open_inside(path.parent, path, os.O_RDWR))
    except FileNotFoundError:
        return b""
    keep, torn = torn_tail(path)
    if torn:
        fd = open_inside(path.parent, path, os.O_RDWR)
        try:
            os.ftruncate(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
    return torn


class AppendFile:
    """An O_APPEND file written with whole lines only (no Python buffer that could replay a failed
    write)."""

    def __init__(self, path: Path):
        heal(path)
        self.path = path
        self.fd = open_inside(path.parent, path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def write_line(self, line: str, sync: bool = True) -> None:
        data = memoryview(line.encode("utf-8"))
        start = os.fstat(self.fd).st_size
        try:
            while data:
                written = os.write(self.fd, data)
                data = data[written:]
            if sync:
                os.fsync(self.fd)
        except OSError:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            raise

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_for_append(path: Path) -> AppendFile:
    return AppendFile(path)


def append_line(handle: AppendFile, line: str, sync: bool = True) -> None:
    handle.write_line(line, sync=sync)


LEDGER_LOCK_WAIT_S = (
    60.0  # a ledger append takes milliseconds; a lock held longer is held by something else
)


def _flock_within(fd: int, path: Path, wait_s: float) -> None:
    """An exclusive flock on `fd`, waited for at most `wait_s` seconds (RunError naming `path`
    after that).

    Not `filelock.FileLock(timeout=...)`: that opens the path itself, and this lock must be taken on
    the descriptor `open_inside` opened, the one that refused a link, a FIFO or a hard link with
    its precise sentence."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise RunError(
                    f"{path} has been locked by another process for {wait_s:g} s: a ledger append "
                    f"takes "
                    "milliseconds; find the process holding it (fuser) and stop it"
                ) from None
            time.sleep(0.05)


def locked_append(path: Path, line: str) -> None:
    """Append one whole line to a file that several processes write (the project ledger).

    An exclusive `flock` on `<path>.lock` is held around heal-open-write-close, so a torn
    tail left by a killed writer is cut off while nobody else writes, and each line
    goes out in one O_APPEND write: two concurrent writers never lose or interleave a line.
    """
    if not line.endswith("\n"):
        line += "\n"
    # opened as the run lock is (planner._store.lock): no link followed, a regular file of one
    # name, and O_NONBLOCK, so a FIFO in its place is refused at once instead of hanging `plan run`
    lock_fd = open_inside(
        path.parent, path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT
    )
    try:
        _flock_within(lock_fd, path.with_name(path.name + ".lock"), LEDGER_LOCK_WAIT_S)
        handle = AppendFile(path)
        try:
            handle.write_line(line)
        finally:
            handle.close()
    finally:
        os.close(lock_fd)  # closing drops the flock
