"""The trainable protocol, as the worker runs it: one trial run to its end and its record.

`run_trial(spec)` calls `train(config, trial)` with a `Trial` (planner._trial.trial) for each
attempt and returns the trial's record (the schema of docs/run-folder.md, minus what only the
driver knows). It never raises for a bad trainable: a raise is retried `retries` times then
`failed` with each traceback; a broken report is a `protocol_error` (not retried); a NaN or
infinite decision metric stops the trial as `diverged` (a result, not retried).

State does not leak between trials that share a worker process: before every
attempt the trainable's own module is executed afresh (its globals start
over), and `random`, `numpy.random` and `torch` (when loaded) are seeded from
the trial's seed (planner._trial.loading).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from typing import Any, cast

from planner._core.errors import (
    CommandError,
    CommandMemoryError,
    CommandTimeoutError,
    TrialProtocolError,
)
from planner._core.redact import Redactor
from planner._core.status import FAILED, TrialStatus
from planner._core.text import utc_now
from planner._trial import checkpoints
from planner._trial.attempts import RAISED, Ledger
from planner._trial.function_reads import TrialReads
from planner._trial.limits import OUTPUT_CAP, TrialLimit, Watchdog, captured_output
from planner._trial.loading import new_modules, seed_everything, top_level_modules, trainable_for
from planner._trial.reads import recording
from planner._trial.shortfall import missing_splits, never_reported, report_steps, why_short
from planner._trial.spec import TrialSpec
from planner._trial.storage import trial_storage
from planner._trial.trial import SessionExit, StopAttempt, Trial
from planner._trial.worker_process import ray_node_id, release_memory

OUTPUT_LOG = "output.log"  # the trainable's prints, in trial.dir


def run_trial(spec: TrialSpec, forward: Callable[..., None] | None = None) -> dict[str, Any]:
    """Run `spec` to its end (retrying raises) and return its record.

    The attempt ledger in trial.dir (planner._trial.attempts) counts attempts across
    worker deaths; the watchdog (planner._trial.limits) enforces max_trial_time and
    max_trial_memory inside this process; the trainable's output goes to
    trial.dir/output.log, capped.
    """
    started, t0 = utc_now(), time.monotonic()
    _enter(spec)
    ledger = Ledger.of(spec)
    terminal = ledger.terminal()
    if terminal is not None:  # a watchdog killed the last attempt's process: its verdict stands
        record = make_record(
            spec, terminal["ended"], None, ledger.used, ledger.errors(), started, 0.0
        )
        record["resumed"] = False
        record["exposure"] = ledger.reached()  # the steps it reported before the kill were spent
        return record
    scrub = _scrubber(spec)
    status, trial, resumed = TrialStatus.FAILED, None, False
    forwarded: int | None = None
    attempts = ledger.used
    before = (
        top_level_modules() if "command" not in spec.extra else None
    )  # a function trainable's imports
    modules: list[str] | None = None
    reads = TrialReads.of(spec)  # what a function trainable reads, all its attempts together
    storage = trial_storage(spec)
    while attempts < 1 + spec.retries:
        attempts += 1
        ledger.start(attempts, spec.params)
        seed_everything(spec.seed)
        trial = Trial(spec, forward, forwarded)
        trial.attempt, trial.resumed = attempts, ledger.cut_short_before()
        resumed = trial.resumed
        trial.storage = storage
        trial._reads = reads
        if storage is not None and trial.resumed:  # its checkpoint, from the node that ran it
            storage.pull()
        try:
            how, error = _attempt(spec, trial, ledger, scrub)
        except (
            SessionExit
        ):  # Tune stopped it at a report (early stopping): the ledger says so, then Tune ends it
            ledger.end(attempts, TrialStatus.EARLY_STOPPED, None, trial.last_step)
            # the driver tidied the trial's checkpoints when Tune stopped it, while the script could
            # still save one more before this worker ended it: tidied again now that it has
            _tidy(spec)
            ledger.ship(OUTPUT_LOG, OUTPUT_CAP + (64 << 10))
            raise
        ledger.end(attempts, how, error, _spent(trial))
        if storage is not None:
            storage.push()
        ledger.ship(OUTPUT_LOG, OUTPUT_CAP + (64 << 10))  # the cap's note past it
        if before is not None and modules is None:  # once per trial: what its first attempt loaded
            modules = new_modules(before, trial.machinery)
        if how != RAISED:
            status = cast(TrialStatus, how)  # any end but RAISED is a trial status
            break
        forwarded = trial._forwarded  # a retry forwards only the steps past what was forwarded
        status = TrialStatus.FAILED
    release_memory(
        time.monotonic() - t0, None if "command" in spec.extra else spec.trainable.partition(":")[0]
    )
    record = make_record(
        spec, status, trial, attempts, ledger.errors(), started, time.monotonic() - t0
    )
    record["resumed"] = resumed
    record["resumed_from"] = trial.resumed_from if trial is not None else None
    if reads is not None:
        record["inputs"] = {"files": reads.files()}
    elif trial is not None and trial.inputs is not None:  # a command's flags and the files it read
        record["inputs"] = trial.inputs
    if modules is not None:
        record["modules"] = modules
    if (
        status in FAILED
    ):  # the steps a failed trial spent count, also those of an attempt before its last
        record["exposure"] = max(record["exposure"], ledger.reached())
    if (
        trial is not None and status == how
    ):  # the last attempt ended the trial (it did not raise): its record
        ledger.keep(
            attempts, record
        )  # is kept before it is returned, for a worker that dies before Ray delivers it
    return record


def kept_record(spec: TrialSpec) -> dict[str, Any] | None:
    """The record of `spec` that its worker kept as the trial ended in this driver session (the
    attempt ledger's `kept`), or None: the trial had not ended (an attempt cut short, raised,
    stopped at a report), its worker died before it kept the record, the record is on another
    node's disk, or it is not this trial's (another trial id, phase, params or config). The one
    reader of a kept record, in the driver after a worker death and in a worker Tune starts again
    for a trial that had ended."""
    record = Ledger.of(spec).kept()
    if record is None or any(
        record.get(key) != getattr(spec, key) for key in ("trial_id", "phase", "arm", "seed")
    ):
        return None
    if _canonical(record.get("params")) != _canonical(spec.params) or _canonical(
        record.get("config")
    ) != _canonical(spec.config):
        return None
    return record


def _canonical(value: Any) -> str:
    """A value as JSON (keys sorted): a record read back from disk compares equal to the spec it
    was made of."""
    return json.dumps(value, sort_keys=True, default=str)


def _tidy(spec: TrialSpec) -> int | None:
    """Once a trial has ended: remove the checkpoints `command.checkpoint.keep` does not keep; the
    bytes its folder then holds (None when the folder is not on this machine's disk)."""
    checkpoints.tidy(spec.dir, (spec.extra.get("command") or {}).get("checkpoint"))
    return checkpoints.disk_bytes(spec.dir)


def _enter(spec: TrialSpec) -> None:
    """The trial's folder made, its trainable's folders on sys.path, its working folder entered."""
    os.makedirs(spec.dir, exist_ok=True)
    for folder in reversed(spec.path):
        if folder not in sys.path and os.path.isdir(folder):
            sys.path.insert(0, folder)
    if spec.cwd and os.path.isdir(spec.cwd) and os.getcwd() != spec.cwd:
        os.chdir(spec.cwd)


# What ends an attempt without being the trainable's error: Tune stopping the trial at a report
# (its thread ends as Tune intends), Ray cancelling the task or the worker's SIGINT
# (KeyboardInterrupt), a watchdog's limit (the watchdog's own verdict is recorded). Any other
# BaseException a trainable raises is its error: a user's BaseException subclass left to Ray kills
# a tuning run and cannot be deserialized by the driver.
_PROPAGATE = (SessionExit, KeyboardInterrupt, TrialLimit)

_ERROR_TYPE = {
    TrialStatus.OOM: "OutOfMemory",
    TrialStatus.TIMEOUT: "Timeout",
    TrialStatus.PROTOCOL_ERROR: "TrialProtocolError",
}  # an error's `type` in the record, by status


def _attempt(
    spec: TrialSpec, trial: Trial, ledger: Ledger, scrub: Callable[[str], str]
) -> tuple[TrialStatus | str, dict[str, Any] | None]:
    """One attempt: how it ended (a status, or RAISED to retry it) and its error."""
    n = trial.attempt
    try:
        _call(spec, trial, ledger, scrub)
    except StopAttempt as stop:
        if stop.status == TrialStatus.DIVERGED:
            trial.violations.append(
                {"kind": "diverged", "step": trial.last_step, "message": stop.message}
            )
            return stop.status, None
        return stop.status, _error(n, _ERROR_TYPE[stop.status], stop.message, "")
    except (
        BaseException
    ) as exc:  # the trainable raised (any BaseException, sys.exit too): retried, then failed
        if isinstance(
            exc, _PROPAGATE
        ):  # Tune stopping the trial, Ray cancelling it, a limit: not the trainable's
            raise
        final = _final_status(exc) if isinstance(exc, Exception) else None
        if final:  # a protocol error, a command's time or memory limit: no retry
            return final, _error(
                n, type(exc).__name__, scrub(str(exc)), scrub(getattr(exc, "stderr_tail", ""))
            )
        # a command's failure is the script's: its stderr's last lines, not planner's frames that
        # ran it (a report's "where" read planner/_trial/command.py for a script that called
        # sys.exit(3))
        trace = (exc.stderr_tail or "") if isinstance(exc, CommandError) else traceback.format_exc()
        error = _error(n, type(exc).__name__, scrub(str(exc)), scrub(trace))
        code = exc.errno if isinstance(exc, (OSError, CommandError)) else None
        if isinstance(code, int):  # the driver reads it: a full disk is not the trial's result
            error["errno"] = code
        return RAISED, error
    if trial.last_step == spec.budget and (never := never_reported(spec, trial)):
        return TrialStatus.PROTOCOL_ERROR, _error(n, "TrialProtocolError", never, "")
    missing = missing_splits(spec, trial)
    if trial.last_step == spec.budget and missing:
        return TrialStatus.PROTOCOL_ERROR, _error(n, "TrialProtocolError", missing, "")
    if trial.last_step == spec.budget:
        return TrialStatus.COMPLETED, None
    reached = (
        "no report at all"
        if trial.last_step is None
        else f"its last report was step {trial.last_step}"
    )
    why = why_short(
        spec, trial.last_step, trial.log_reached, trial.notes, steps=report_steps(trial)
    )
    return TrialStatus.PROTOCOL_ERROR, _error(
        n,
        "TrialProtocolError",
        f"the trainable returned before the full exposure of {spec.budget}: {reached}{why}",
        "",
    )


def _spent(trial: Trial) -> int | None:
    """The furthest step the attempt trained: its last report, or further where a command's own
    metrics log holds rows past it (a metric logged under another name: the script trained to its
    end, reporting nothing)."""
    steps = [
        s
        for s in (trial.last_step, trial.log_reached)
        if isinstance(s, int) and not isinstance(s, bool)
    ]
    return min(max(steps), trial.budget) if steps else None


def _call(spec: TrialSpec, trial: Trial, ledger: Ledger, scrub: Callable[[str], str]) -> None:
    """Call the trainable under the watchdog, its output captured; a limit reached is a StopAttempt.

    A command trainable enforces its limits on its own subprocess, so the
    watchdog then has nothing to watch. A watchdog about to kill the process
    writes its verdict to the ledger first.
    """
    own = "command" not in spec.extra
    memory = spec.extra.get("max_trial_memory_bytes")
    n = trial.attempt

    def on_kill(status: TrialStatus, message: str) -> None:
        ledger.end(n, status, _error(n, _ERROR_TYPE[status], message, ""), trial.last_step)

    dog = Watchdog(spec.max_trial_time_s if own else None, memory if own else None, on_kill)
    output = captured_output(os.path.join(spec.dir, OUTPUT_LOG), scrub=scrub)
    try:
        with _worker_kept(spec), output, dog:
            try:
                with recording(trial._reads.recorder) if trial._reads else nullcontext():
                    fn = trainable_for(spec)
                    seed_everything(spec.seed)  # the module body may have drawn from the RNGs
                    fn(spec.config, trial)
            finally:
                dog.stop()
    except TrialLimit as limit:  # raised in this thread by the watchdog, which holds the message
        raise StopAttempt(limit.status, dog.verdict[1] if dog.verdict else limit.status) from None
    # after the trainable: a command trainable sets the notes of its metrics file while it runs
    finally:
        if output.refused is not None and output.refused not in trial.notes:
            trial.notes.append(output.refused)


@contextmanager
def _worker_kept(spec: TrialSpec) -> Iterator[None]:
    """An attempt's folder, file descriptors and working folder are its own: whatever the trainable
    did to them (removed its `trial.dir`, closed or replaced fds 0-2, changed into a folder it then
    removed) is undone once it returns, so the attempt ledger is written, Ray's worker writes its
    own output, and the next trial in the same worker starts where every trial starts."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # a working folder an earlier trial removed: the trial's own then
        cwd = None
    saved = []
    for fd in (0, 1, 2):
        with suppress(OSError):  # a descriptor closed before this attempt stays as it was
            saved.append((fd, os.dup(fd)))
    try:
        yield
    finally:
        for fd, copy in saved:
            with suppress(OSError):
                os.dup2(copy, fd)
            os.close(copy)
        os.makedirs(spec.dir, exist_ok=True)
        with suppress(OSError):
            os.chdir(cwd or spec.cwd or spec.dir)


def _scrubber(spec: TrialSpec) -> Callable[[str], str]:
    return Redactor.for_run(spec.config).text


def _final_status(error: Exception) -> TrialStatus | None:
    """The status of an error that ends a trial without a retry, or None (retry it).

    A protocol error (TrialProtocolError, also raised by a command that reported
    nothing or ran another config), a command killed at its time limit, or at its
    memory cap, will not go better on a second attempt.
    """
    if isinstance(error, TrialProtocolError):
        return TrialStatus.PROTOCOL_ERROR
    if isinstance(error, CommandTimeoutError):
        return TrialStatus.TIMEOUT
    if isinstance(error, CommandMemoryError):
        return TrialStatus.OOM
    return None


def _error(attempt: int, kind: str, message: str, trace: str) -> dict[str, Any]:
    return {"attempt": attempt, "type": kind, "message": message, "traceback": trace}


def make_record(
    spec: TrialSpec,
    status: TrialStatus | str,
    trial: Trial | None,
    attempts: int,
    errors: list,
    started: str,
    duration_s: float,
    reports: list | None = None,
) -> dict[str, Any]:
    """A trial's record (docs/run-folder.md), minus what only the driver knows; its status one of
    TrialStatus.

    A record is made when the trial has ended (in the worker, or in the driver for a trial its
    scheduler stopped): its folder is tidied first (`command.checkpoint.keep`), then measured
    (`disk_bytes`).
    """
    reports = reports if reports is not None else (trial.reports if trial is not None else [])
    disk = _tidy(spec)
    return {
        "trial_id": spec.trial_id,
        "phase": spec.phase,
        "arm": spec.arm,
        "seed": spec.seed,
        "index": spec.index,
        "params": dict(spec.params),
        "config": spec.config,
        "status": TrialStatus(
            status
        ).value,  # the plain word on disk; an unknown status fails here, loud
        "exposure": reports[-1]["step"] if reports else 0,
        "reports": reports,
        "attempts": attempts,
        "errors": errors,
        "violations": list(trial.violations) if trial is not None else [],
        **({"splits": trial.splits} if trial is not None and trial.splits else {}),
        **({"notes": list(trial.notes)} if trial is not None and trial.notes else {}),
        "started": started,
        "ended": utc_now(),
        "duration_s": round(duration_s, 6),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "node_id": ray_node_id(),
        "contract_sha256": spec.contract_sha256,
        "disk_bytes": disk,
    }
