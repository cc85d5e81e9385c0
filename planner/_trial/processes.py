"""The processes of one run of a `command:` trainable, supervised from the worker.

- start: the command runs under a small supervisor (planner._core.supervisor:
  a relay the worker starts, and the supervisor proper it forks), the child
  subreaper of everything the command starts, in a session and process group
  of their own, stdin closed, stdout and stderr piped.
- output: the pipes are pumped into two `BoundedLog`s (`stdout.log`,
  `stderr.log`): the first `max_log_bytes` and the last `TAIL_BYTES` of each
  stream are kept, secrets cut as they are written.
- memory: the resident memory of every process under the supervisor: the
  command, its children, and those re-parented to the supervisor (`setsid`,
  double-forked), so `max_trial_memory` counts the whole tree.
- stop: the supervisor SIGTERMs the whole tree, SIGKILLs what is left after a
  grace, and exits with the command's status; it does the same on its own when
  the command exits, so nothing the command started outlives the run.
  `describe_exit` says how it ended ("status 1", "SIGKILL ...").

`CommandLimits` is what bounds one run: its time, its memory, the grace before
SIGKILL, the size of its logs, how often it is looked at. The run itself (what
is watched when) is `planner._trial.command.run_command`.
"""

from __future__ import annotations

import codecs
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypedDict

import psutil

from planner._core import supervisor
from planner._core.redact import Redactor

DEFAULT_MAX_LOG_BYTES = 8 * 1024 * 1024  # per stream, kept from the head of the output
TAIL_BYTES = 64 * 1024  # per stream, the end of the output, always kept
SUPERVISOR = supervisor.__file__  # run as a script: it imports nothing of planner's
START_TIMEOUT_S = 60.0  # for the supervisor to start the command and say so
SUPERVISOR_SLACK_S = 3.0  # past the grace, for the supervisor to end the tree and exit


@dataclass(frozen=True)
class CommandLimits:
    """What bounds one run of a command. None: no limit."""

    timeout_s: float | None = None  # budget.max_trial_time
    max_memory_bytes: int | None = (
        None  # budget.max_trial_memory, the command and its children together
    )
    kill_grace_s: float = 5.0  # from SIGTERM to SIGKILL
    max_log_bytes: int = (
        DEFAULT_MAX_LOG_BYTES  # per stream, kept from the head of stdout.log / stderr.log
    )
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
    """The command under its supervisor (planner._core.supervisor): started, its pipes pumped into
    two sinks, its whole process tree measured and stopped."""

    def __init__(
        self,
        proc: subprocess.Popen,
        stdout: Sink,
        stderr: Sink,
        status: int,
        command_pid: int,
        *,
        supervisor_pid: int = 0,
    ):
        self.proc = proc  # the supervisor's relay (the worker's child)
        self.command_pid = command_pid
        self.supervisor_pid = (
            supervisor_pid  # the supervisor proper, under the relay: not counted in the memory
        )
        self._status = status  # the supervisor's status pipe: its last word is the command's exit
        self._exit: int | None = None
        self._selector = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None  # started with both piped
        self._selector.register(proc.stdout, selectors.EVENT_READ, stdout)
        self._selector.register(proc.stderr, selectors.EVENT_READ, stderr)

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdout: Sink,
        stderr: Sink,
        grace_s: float = 5.0,
    ) -> CommandProcesses:
        """Start `argv` under a supervisor, in a session of its own; OSError when it cannot
        start."""
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-P",
                    SUPERVISOR,
                    str(write_end),
                    repr(float(grace_s)),
                    str(os.getpid()),
                    "--",
                    *argv,
                ],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(write_end,),
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        first = _status_line(read_end, START_TIMEOUT_S)
        assert proc.stdout is not None and proc.stderr is not None  # both piped above
        if first is None or "pid" not in first:
            os.close(read_end)
            _end_process(proc)
            error = (
                proc.stderr.read().decode("utf-8", errors="replace").strip()[-500:]
                if first is None
                else ""
            )
            for stream in (proc.stdout, proc.stderr):
                stream.close()
            if first is not None and "error" in first:
                raise OSError(int(first.get("errno") or 0), str(first["error"]))
            raise OSError(
                0, f"planner's supervisor did not start the command ({error or 'no word from it'})"
            )
        return cls(
            proc,
            stdout,
            stderr,
            read_end,
            int(first["pid"]),
            supervisor_pid=int(first.get("supervisor") or 0),
        )

    @property
    def returncode(self) -> int | None:
        """The command's exit status (negative: the signal that ended it), once the supervisor has
        ended."""
        if self.proc.returncode is None:
            return None
        return self._exit if self._exit is not None else self.proc.returncode

    def running(self) -> bool:
        if self.proc.poll() is None:
            return True
        self._read_exit()
        return False

    def _read_exit(self) -> None:
        if self._status < 0:
            return
        while (line := _status_line(self._status, 0.5)) is not None:
            if "exit" in line and line["exit"] is not None:
                self._exit = int(line["exit"])
        os.close(self._status)
        self._status = -1

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
        """Read the pipes to their end, for at most `limit_s` (a child left behind may hold them
        open)."""
        deadline = time.monotonic() + limit_s
        while self._selector.get_map() and time.monotonic() < deadline:
            self.pump(0.05)

    def memory_bytes(self) -> int:
        """Resident memory of the command and every process under it (re-parented ones included:
        the supervisor is their subreaper); the supervisor's own is not counted. 0 when it is
        gone."""
        try:
            processes = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return 0
        total = 0
        for process in processes:
            if process.pid == self.supervisor_pid:
                continue
            try:
                total += process.memory_info().rss
            except psutil.Error:
                pass
        return total

    def stop(self, grace_s: float) -> None:
        """End the whole tree: the supervisor SIGTERMs every descendant and SIGKILLs what is left
        after `grace_s`; if it does not end in time, what is under it, and it, are killed from
        here."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace_s + SUPERVISOR_SLACK_S)
            except subprocess.TimeoutExpired:
                _end_process(self.proc)
        self._read_exit()
        if (
            self._exit is None
        ):  # the supervisor died without ending the tree: what is left of its group goes
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self, grace_s: float) -> None:
        """Stop what still runs and close the pipes."""
        self.stop(grace_s)
        self._selector.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:  # never: both are piped
                stream.close()


@contextmanager
def trial_processes_end(grace_s: float = CommandLimits.kill_grace_s) -> Iterator[None]:
    """Every process a trial starts in this process (a Ray worker) ends with the trial: a function
    trainable's child, its `setsid` daemon, its double-forked grandchild.

    This process becomes the child subreaper of what it starts (Linux), so a daemon that leaves its
    parent behind is re-parented here, not to init; when the block ends (the trial returned,
    raised, was stopped), each descendant that was not there when it began gets SIGTERM, SIGKILL
    after `grace_s`, and is reaped. Where the call is not available, only what is still in the tree
    is ended."""
    supervisor.become_subreaper()
    had_children = supervisor.has_children()
    spare = (
        frozenset(supervisor.descendants(supervisor.process_table(), os.getpid()))
        if had_children
        else frozenset()
    )
    try:
        yield
    finally:
        if (
            had_children or supervisor.has_children()
        ):  # none: nothing it started is left, no table to read
            supervisor.end_descendants(grace_s, spare=spare)


def _end_process(proc: subprocess.Popen) -> None:
    """SIGKILL a supervisor that did not end when asked, and every process under it, and reap it."""
    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        victims = []
    for process in [*victims]:
        try:
            process.kill()
        except psutil.Error:
            pass
    proc.kill()
    proc.wait()


def _status_line(fd: int, timeout_s: float) -> dict | None:
    """The next line on the supervisor's status pipe, or None at its end (or after `timeout_s`)."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return None
        chunk = os.read(fd, 1)
        if not chunk:
            return None
        data += chunk
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


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
        if (
            self._stream is not None
        ):  # scrubbed line by line: a secret split across reads is still cut
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
        if (
            self._stream is not None and self._stream.pending
        ):  # a last line still held: scrubbed too
            text += self._stream.redactor.text(self._stream.pending)
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        if self._file.closed:
            return
        if self._stream is not None:
            self._keep(self._stream.feed(self._decoder.decode(b"", final=True)).encode("utf-8"))
            self._keep(self._stream.flush().encode("utf-8"))
        if self.dropped:
            kept = bytes(self.tail[-min(self.dropped, len(self.tail)) :])
            omitted = self.dropped - len(kept)
            self._file.write(
                f"\n[planner: {omitted} bytes of output omitted here; the last {len(kept)} "
                f"follow]\n".encode()
            )
            self._file.write(kept)
        self._file.close()
