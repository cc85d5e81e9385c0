"""Per-trial limits, enforced inside the trial's own process.

- `budget.max_trial_time` and `budget.max_trial_memory`: a watchdog thread
  checks the trial's wall time and its process's resident memory (RSS, the
  trial's process plus any children it started) every 50 ms. Past a limit it
  first raises `TrialTimeout` / `TrialOutOfMemory` inside the trainable's
  thread (the trainable unwinds, its memory is freed, the worker stays
  usable). A trainable that does not unwind (stuck in C code, a `sleep`, a
  swallowed exception) within `GRACE_S`, or whose memory keeps growing past
  `HARD_FACTOR` x the cap, has its process killed (SIGKILL) after the verdict
  is written to the attempt ledger; Ray replaces the worker and the driver
  reads the verdict from the ledger (planner._trial.attempts).
- Output: the trainable's `print`s (sys.stdout / sys.stderr) go to
  `trial.dir/output.log`, at most `OUTPUT_CAP` bytes, secrets cut out; what is
  past the cap is counted, not kept. A trainable that prints megabytes floods
  neither the driver's terminal nor its memory. (Writes straight to file
  descriptor 1 or 2 from C code are not captured; Ray keeps them in its
  worker logs.)
"""

from __future__ import annotations

import ctypes
import io
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import psutil

from planner._core.errors import RunError
from planner._core.status import TrialStatus
from planner._store.files import open_inside

POLL_S = 0.05
GRACE_S = 2.0
HARD_FACTOR = 1.5
OUTPUT_CAP = 1 << 20


class TrialLimit(BaseException):  # noqa: N818 - a BaseException, so `except Exception` in a trainable cannot swallow it
    status: TrialStatus


class TrialTimeout(TrialLimit):
    status = TrialStatus.TIMEOUT


class TrialOutOfMemory(TrialLimit):
    status = TrialStatus.OOM


def rss_bytes(process=None) -> int:
    """Resident memory of this process and its children."""
    process = process or psutil.Process()
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except Exception:  # noqa: BLE001 - a child that just ended
            continue
    return total


def _raise_in(thread_id: int, exc: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _clear(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class Watchdog:
    """Enforces the time and memory limits of one attempt, run in the trainable's thread."""

    def __init__(
        self,
        max_time_s: float | None,
        max_memory_bytes: int | None,
        on_kill: Callable[[TrialStatus, str], None],
    ):
        self.max_time_s = max_time_s
        self.max_memory = max_memory_bytes
        self.on_kill = (
            on_kill  # (status, message) -> None: write the verdict before the process dies
        )
        self.thread_id = threading.get_ident()
        self.verdict: tuple[TrialStatus, str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    def __enter__(self) -> Watchdog:
        if self.max_time_s is None and self.max_memory is None:
            return self
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name="planner-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> Literal[False]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self.verdict is not None:
                _clear(
                    self.thread_id
                )  # an exception still pending must not fire in the planner's code
        return False

    def stop(self) -> None:
        """Stop watching: the trainable returned (or raised)."""
        self._stop.set()

    def _watch(self) -> None:
        process = psutil.Process()
        raised_at: float | None = None
        while not self._stop.wait(POLL_S):
            elapsed = time.monotonic() - self._t0
            rss = 0
            if self.max_memory is not None:
                try:
                    rss = rss_bytes(process)
                except Exception:  # noqa: BLE001
                    rss = 0
            if self.verdict is None:
                if self.max_memory is not None and rss > self.max_memory:
                    self.verdict = (
                        TrialStatus.OOM,
                        f"the trial's process used {_fmt_bytes(rss)}, past "
                        f"budget.max_trial_memory of {_fmt_bytes(self.max_memory)}",
                    )
                    exc: type[BaseException] = TrialOutOfMemory
                elif self.max_time_s is not None and elapsed > self.max_time_s:
                    self.verdict = (
                        TrialStatus.TIMEOUT,
                        f"stopped after {elapsed:.1f} s, past "
                        f"budget.max_trial_time of {self.max_time_s:g} s",
                    )
                    exc = TrialTimeout
                else:
                    continue
                raised_at = time.monotonic()
                _raise_in(self.thread_id, exc)
                continue
            # a verdict is out: the trainable had its chance to unwind
            runaway = self.max_memory is not None and rss > HARD_FACTOR * self.max_memory
            if runaway or time.monotonic() - (raised_at or 0) > GRACE_S:
                status, message = self.verdict
                how = "did not stop when asked" if not runaway else "kept allocating"
                self.on_kill(status, f"{message}; it {how}, so its process was killed")
                os.kill(os.getpid(), signal.SIGKILL)
                return


class CappedOutput:
    """A text stream that keeps the first `cap` bytes in a file and counts the rest.

    `scrub` is a Redactor's `text` (or any str -> str). With a Redactor, text is held to the end of
    its line and scrubbed whole, so a secret printed in pieces (or a character at a time) is still
    cut.
    """

    def __init__(
        self, path: str | None, cap: int = OUTPUT_CAP, scrub: Callable[[str], str] | None = None
    ):
        self.path = path
        self.cap = cap
        self.scrub = scrub or (lambda s: s)
        owner: Any = getattr(scrub, "__self__", None)
        self._stream = owner.stream() if hasattr(owner, "stream") else None
        self.kept = 0
        self.dropped = 0
        self._lock = threading.Lock()
        if path is None:  # a refused output.log: the prints are counted, kept nowhere
            self._handle = open(os.devnull, "a", encoding="utf-8")
            return
        # an output.log planted in a downloaded run folder as a link (symbolic or hard), a FIFO or
        # a device is refused (RunError) at once, never written through nor waited on
        fd = open_inside(os.path.dirname(path) or ".", path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._handle = open(fd, "a", encoding="utf-8", errors="replace")

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            text = str(text)
        with self._lock:
            if (
                self.kept >= self.cap
            ):  # past the cap nothing is kept: counted, not scrubbed (a trial printing
                self.dropped += len(
                    text
                )  # megabytes paid the scrubber for every line it then dropped)
            else:
                self._keep(
                    self._stream.feed(text) if self._stream is not None else self.scrub(text)
                )
        return len(text)

    def _keep(self, text: str) -> None:
        """Write scrubbed text up to the cap; count the rest."""
        room = self.cap - self.kept
        if room <= 0:
            self.dropped += len(text)
            return
        piece = text[:room]
        try:
            self._handle.write(piece)
        except (
            OSError,
            ValueError,
        ):  # a full disk must not turn a print into the trainable's error
            self.dropped += len(text)
            return
        self.kept += len(piece)
        self.dropped += len(text) - len(piece)

    def flush(self) -> None:
        with self._lock:
            if not self._handle.closed:
                try:
                    self._handle.flush()
                except OSError:
                    pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("trial output is captured; it has no file descriptor")

    @property
    def encoding(self) -> str:
        return "utf-8"

    def close(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._keep(self._stream.flush())
            try:
                if self.dropped:
                    self._handle.write(
                        f"\n[planner: output past {self.cap} bytes not kept: {self.dropped} more "
                        f"characters]\n"
                    )
                self._handle.close()
            except OSError:
                pass


class captured_output:  # noqa: N801 - a context manager that reads like a function
    """Send sys.stdout and sys.stderr to a CappedOutput for the duration of one trial."""

    def __init__(self, path: str, cap: int = OUTPUT_CAP, scrub: Callable[[str], str] | None = None):
        self.path, self.cap, self.scrub = path, cap, scrub
        self.stream: CappedOutput | None = None
        self.refused: str | None = (
            None  # the note the trial's record carries when output.log was refused
        )

    def __enter__(self) -> CappedOutput | None:
        self.saved = sys.stdout, sys.stderr
        try:
            self.stream = CappedOutput(self.path, self.cap, self.scrub)
        except (
            RunError
        ) as error:  # output.log is a link or special file: nothing written there, and the prints
            self.stream = CappedOutput(
                None, 0
            )  # reach neither the terminal nor Ray's logs unscrubbed
            what = str(error).partition(": planner ")[
                0
            ]  # "<trial dir>/output.log is a FIFO (named pipe)"
            self.refused = (
                f"{what}: nothing was written there, and the trial's prints were kept nowhere"
            )
        except OSError:
            return None  # no trial.dir to write to: leave output alone
        sys.stdout = sys.stderr = self.stream
        return self.stream

    def __exit__(self, *exc) -> Literal[False]:
        if self.stream is not None:
            sys.stdout, sys.stderr = self.saved
            self.stream.close()
        return False
