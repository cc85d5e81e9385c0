"""Append-only JSON lines that survive a killed writer and a full disk.

- `heal(path)`: a writer killed mid-line leaves a torn last line (no newline,
  or not valid JSON). Before anything is appended again the torn tail is cut
  off, so the next record starts on a line of its own and is never glued to
  the broken one. What was cut is returned (the caller logs it).
- `append_line(handle, line)`: one whole line, flushed and fsync'd. When the
  write fails (ENOSPC, EIO), the file is truncated back to where it was, so a
  failed append never leaves half a record behind; then the error goes on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def torn_tail(path: Path) -> tuple[int, bytes]:
    """(offset just after the last newline, the bytes after it): a torn last line, or b"" when whole."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0, b""
    if size == 0:
        return 0, b""
    with open(path, "rb") as handle:
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
    """Cut a torn last line off `path`; return the bytes cut (b"" when the file was whole)."""
    keep, torn = torn_tail(path)
    if torn:
        with open(path, "r+b") as handle:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    return torn


class AppendFile:
    """An O_APPEND file written with whole lines only (no Python buffer that could replay a failed write)."""

    def __init__(self, path: Path):
        heal(path)
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

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


def whole_records(path: Path) -> tuple[list[dict], int]:
    """Every line that parses as a JSON object, and how many lines did not."""
    out, bad = [], 0
    if not path.exists():
        return out, bad
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(value, dict):
                out.append(value)
            else:
                bad += 1
    return out, bad


def locked_append(path: Path, line: str) -> None:
    """Append one whole line to a file that several processes write (the project ledger).

    An exclusive `flock` on `<path>.lock` is held around heal-open-write-close, so a torn
    tail left by a killed writer is cut off while nobody else writes, and each line
    goes out in one O_APPEND write: two concurrent writers never lose or interleave a line.
    """
    import fcntl

    if not line.endswith("\n"):
        line += "\n"
    lock_fd = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        handle = AppendFile(path)
        try:
            handle.write_line(line)
        finally:
            handle.close()
    finally:
        os.close(lock_fd)  # closing drops the flock
