"""The processes of one run of a `command:` trainable, supervised from the worker.

- start: the command leads a session and process group of its own, stdin
  closed, stdout and stderr piped.
- output: the pipes are pumped into two `BoundedLog`s (`stdout.log`,
  `stderr.log`): the first `max_log_bytes` and the last `TAIL_BYTES` of each
  stream are kept, secrets cut as they are written.
- memory: the resident memory of the command and every child it started.
- stop: SIGTERM to the whole group, SIGKILL to what is left after a grace, the
  leader reaped; `describe_exit` says how it ended ("status 1", "SIGKILL ...").

`CommandLimits` is what bounds one run: its time, its memory, the grace before
SIGKILL, the size of its logs, how often it is looked at. The run itself (what
is watched when) is `planner._trial.command.run_command`.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypedDict

import psutil

from planner._core.redact import Redactor

DEFAULT_MAX_LOG_BYTES = 8 * 1024 * 1024  # per stream, kept from the head of the output
TAIL_BYTES = 64 * 1024  # per stream, the end of the output, always kept


@dataclass(frozen=True)
class CommandLimits:
    """What bounds one run of a command. None: no limit."""

    timeout_s: float | None = None  # budget.max_trial_time
    max_memory_bytes: int | None = None  # budget.max_trial_memory, the command and its children together
    kill_grace_s: float = 5.0  # from SIGTERM to SIGKILL
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES  # per stream, kept from the head of stdout.log / stderr.log
    poll_interval_s: float = 0.05  # how often the pipes and the report file are read
    memory_check_s: float = 0.5  # how often the memory is measured

    def over_time(self, elapsed_s: float) -> bool:
        return self.timeout_s is not None and elapsed_s > self.timeout_s


class LimitFields(TypedDict, total=False):
    """`CommandLimits`' fields, as keyword arguments (`run_command(..., timeout_s=60)`)."""

    timeout_s: float | None
    max_memory_bytes: int | None
    kill_grace_s: float
    max_log_bytes: int
    poll_interval_s: float
    memory_check_s: float


class Sink(Protocol):
    def write(self, data: bytes) -> None: ...


class CommandProcesses:
    """The command's process group: started, its pipes pumped into two sinks, measured, stopped."""

    def __init__(self, proc: subprocess.Popen, stdout: Sink, stderr: Sink):
        self.proc = proc
        self._selector = selectors.DefaultSelector()
        self._selector.register(proc.stdout, selectors.EVENT_READ, stdout)
        self._selector.register(proc.stderr, selectors.EVENT_READ, stderr)

    @classmethod
    def start(cls, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
              stdout: Sink, stderr: Sink) -> CommandProcesses:
        """Start `argv` in a session of its own; OSError when it cannot start."""
        proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        return cls(proc, stdout, stderr)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def running(self) -> bool:
        return self.proc.poll() is None

    def pump(self, timeout_s: float) -> None:
        """Move what the pipes hold into the sinks, waiting at most `timeout_s` for it."""
        if not self._selector.get_map():
            time.sleep(timeout_s)
            return
        for key, _ in self._selector.select(timeout_s):
            data = os.read(key.fd, 65536)
            if data:
                key.data.write(data)
            else:
                self._selector.unregister(key.fileobj)

    def drain(self, limit_s: float) -> None:
        """Read the pipes to their end, for at most `limit_s` (a child left behind may hold them open)."""
        deadline = time.monotonic() + limit_s
        while self._selector.get_map() and time.monotonic() < deadline:
            self.pump(0.05)

    def memory_bytes(self) -> int:
        """Resident memory of the command and every child it started; 0 when it is gone."""
        try:
            leader = psutil.Process(self.proc.pid)
            processes = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            return 0
        total = 0
        for process in processes:
            try:
                total += process.memory_info().rss
            except psutil.Error:
                pass
        return total

    def stop(self, grace_s: float) -> None:
        """SIGTERM the process group, SIGKILL what is left after `grace_s`, reap the leader."""
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            if wait_s is None:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and self._group_alive():
                time.sleep(0.02)
            if not self._group_alive():
                break
        self.proc.wait()

    def _group_alive(self) -> bool:
        self.proc.poll()  # reap the leader if it exited
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def close(self, grace_s: float) -> None:
        """Stop what still runs and close the pipes."""
        if self.running():
            self.stop(grace_s)
        self._selector.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


def describe_exit(returncode: int) -> str:
    """`status 1`, or the signal that ended the process (`SIGKILL` with the OOM killer's hint)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (the kernel's out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else ""
        return f"{name}{hint}"
    return f"status {returncode}"


@dataclass
class BoundedLog:
    """A log file that keeps the first `max_bytes` and the last TAIL_BYTES of a stream."""

    path: Path
    max_bytes: int
    written: int = 0
    dropped: int = 0
    tail: bytearray = field(default_factory=bytearray)
    redactor: Redactor | None = None

    def __post_init__(self):
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stream = self.redactor.stream() if self.redactor is not None else None

    def write(self, data: bytes) -> None:
        if self._stream is not None:  # scrubbed line by line: a secret split across reads is still cut
            data = self._stream.feed(self._decoder.decode(data)).encode("utf-8")
        self._keep(data)

    def _keep(self, data: bytes) -> None:
        room = max(self.max_bytes - self.written, 0)
        if room:
            self._file.write(data[:room])
            self.written += min(room, len(data))
        self.dropped += max(len(data) - room, 0)
        self.tail += data
        if len(self.tail) > TAIL_BYTES:
            del self.tail[: len(self.tail) - TAIL_BYTES]

    def tail_text(self, lines: int) -> str:
        text = self.tail.decode("utf-8", errors="replace")
        if self._stream is not None and self._stream.pending:  # a last line still held: scrubbed too
            text += self._stream.redactor.text(self._stream.pending)
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        if self._file.closed:
            return
        if self._stream is not None:
            self._keep(self._stream.feed(self._decoder.decode(b"", final=True)).encode("utf-8"))
            self._keep(self._stream.flush().encode("utf-8"))
        if self.dropped:
            kept = bytes(self.tail[-min(self.dropped, len(self.tail)):])
            omitted = self.dropped - len(kept)
            self._file.write(f"\n[planner: {omitted} bytes of output omitted here; the last {len(kept)} follow]\n".encode())
            self._file.write(kept)
        self._file.close()
