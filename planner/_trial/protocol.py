"""The trainable protocol, as the worker runs it.

`train(config, trial)` receives a `Trial`: `trial.seed`, `trial.budget` (the
exposure) and `trial.unit` (budget.unit), `trial.arm`, `trial.phase` (tune | confirm | reeval),
`trial.id`, `trial.dir`, `trial.heldout` (metric.heldout's name, or None), `trial.resumed`,
`trial.report(step, **metrics)` and `trial.log_split(name, ids, groups)` (docs/data.md). A
trainable that continued from a checkpoint sets `trial.resumed_from` (path, sha256, what it held)
for the record.

`run_trial` runs one trial to its end and returns its record (the schema of
docs/run-folder.md, minus what only the driver knows). It never raises for a
bad trainable: a raise is retried `retries` times then `failed` with each
traceback; a broken report is a `protocol_error` (not retried); a NaN or
infinite decision metric stops the trial as `diverged` (a result, not retried).

State does not leak between trials that share a worker process: before every
attempt the trainable's own module is executed afresh (its globals start
over), and `random`, `numpy.random` and `torch` (when loaded) are seeded from
the trial's seed.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import math
import numbers
import os
import random
import socket
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from planner._core import supervisor
from planner._core.errors import (
    CommandError,
    CommandMemoryError,
    CommandTimeoutError,
    TrialProtocolError,
)
from planner._core.records import stored_metric
from planner._core.redact import Redactor
from planner._core.status import FAILED, TrialStatus
from planner._core.text import utc_now
from planner._data.checks import missing_required, overlap_violations
from planner._data.splits import SplitError, SplitLog
from planner._store.identity import read_facts, trainable_sources
from planner._trial import checkpoints
from planner._trial.attempts import RAISED, Ledger
from planner._trial.command import CommandTrainable
from planner._trial.limits import OUTPUT_CAP, TrialLimit, Watchdog, captured_output
from planner._trial.reads import Recorder, recording
from planner._trial.reports import nearest_name
from planner._trial.storage import TrialStorage, trial_storage


@dataclass(frozen=True)
class TrialSpec:
    """Everything a worker needs to run one trial (small, picklable)."""

    trial_id: str
    phase: str
    arm: str
    seed: int
    index: int
    params: dict[str, Any]
    config: dict[str, Any]
    budget: int
    dir: str
    trainable: str  # module:function
    metric: str
    heldout: str | None = None
    retries: int = 0
    contract_sha256: str = ""
    max_trial_time_s: float | None = None
    unit: str | None = (
        None  # budget.unit: what one step of `budget` counts (None: not said, as in a test's spec)
    )
    path: tuple[
        str, ...
    ] = ()  # folders put on sys.path before importing the trainable (those that exist here)
    cwd: str | None = (
        None  # the folder the trainable runs in (where `plan run` started), when it exists here
    )
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def decision_metric(self) -> str:
        """The metric every trial must report: the tuning metric while tuning, else the held-out
        one if set."""
        return self.heldout if self.heldout and self.phase != "tune" else self.metric

    @property
    def first_report_metrics(self) -> tuple[str, ...]:
        """A trial's first report holds one of these (the selection metric; outside tuning, or the
        held-out one)."""
        if self.heldout and self.phase != "tune":
            return (self.metric, self.heldout)
        return (self.metric,)

    @property
    def divergence_metrics(self) -> tuple[str, ...]:
        """Metrics whose NaN/inf makes the trial diverged: the selection metric, and the heldout
        one outside tuning."""
        if self.heldout and self.phase != "tune":
            return (self.metric, self.heldout)
        return (self.metric,)


OUTPUT_LOG = "output.log"  # the trainable's prints, in trial.dir


class _Stop(BaseException):
    """Ends an attempt from inside `trial.report` (a BaseException, so `except Exception` in a
    trainable cannot swallow it)."""

    def __init__(self, status: TrialStatus, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class _SessionExit(SystemExit):
    """Ray Tune's own sys.exit from `tune.report` (the scheduler stopped the trial): never a
    trainable's raise."""


class Trial:
    """What the trainable sees. Only `report` talks back."""

    def __init__(
        self,
        spec: TrialSpec,
        forward: Callable[..., None] | None,
        already_forwarded: int | None = None,
    ):
        self.seed = spec.seed
        self.budget = spec.budget
        self.unit = spec.unit  # budget.unit, or None
        self.metric = spec.metric  # metric.name: what each trial is tuned and selected on
        self.arm = spec.arm
        self.phase = spec.phase
        self.id = spec.trial_id
        self.dir = spec.dir
        self.params = dict(spec.params)
        self._spec = spec
        self._forward = forward
        self._forwarded = already_forwarded
        self._t0 = time.monotonic()
        self.reports: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.log_reached: int | None = (
            None  # a command's own metrics log: the furthest step a row of it held
        )
        self.notes: list[
            str
        ] = []  # protocol notes of the attempt that ended (a declared metric no row held,
        # an output.log refused)
        self.splits: dict[
            str, dict[str, Any]
        ] = {}  # name -> counts and fingerprints (planner._data.splits)
        self._split_log: Any = None
        self.attempt = 1  # this attempt's number (1 + retries used so far)
        # the previous attempt was cut short (its worker died, the driver was killed, it raised):
        self.resumed = False
        # a trainable that saves checkpoints in trial.dir looks for one there and continues from it
        self.resumed_from: dict[str, Any] | None = (
            None  # the checkpoint a command continued from (checkpoints.describe)
        )
        self.inputs: dict[str, Any] | None = None  # a command's: {argv, files} (TrialInputs)
        self._reads: _Reads | None = None  # a function trainable's: what its trial reads
        self._sent_files: dict[str, Any] | None = None  # the files its last forward carried
        self.heldout = (
            spec.heldout
        )  # metric.heldout's name (None when unset): reported outside tuning only
        self.machinery: set[str] | None = (
            None  # top-level modules the first forward loaded (Ray Tune's own)
        )
        self.storage: TrialStorage | None = (
            None  # plan run --storage: trial.dir's files copied there
        )

    @property
    def last_step(self) -> int | None:
        return self.reports[-1]["step"] if self.reports else None

    def report(self, step: int, **metrics: Any) -> None:
        """Report the exposure consumed so far (`step`) and metrics at that point."""
        spec = self._spec
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise _Stop(
                TrialStatus.PROTOCOL_ERROR, f"trial.report: step must be an integer, got {step!r}"
            )
        step = int(step)
        if step > spec.budget:
            raise _Stop(
                TrialStatus.PROTOCOL_ERROR,
                f"trial.report: step {step} is past the budget of {spec.budget}",
            )
        if step < 0:
            raise _Stop(TrialStatus.PROTOCOL_ERROR, f"trial.report: step {step} is negative")
        if self.last_step is not None and step <= self.last_step:
            raise _Stop(
                TrialStatus.PROTOCOL_ERROR,
                f"trial.report: step {step} does not follow step {self.last_step} "
                "(steps strictly increase; a second training loop in one trial, such as "
                "trainer.fit called "
                "twice, starts its steps over)",
            )
        if not metrics:
            raise _Stop(TrialStatus.PROTOCOL_ERROR, f"trial.report: step {step} has no metrics")
        values: dict[str, float] = {}
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise _Stop(
                    TrialStatus.PROTOCOL_ERROR,
                    f"trial.report: metric {name!r} at step {step} is not a number: {value!r}",
                )
            values[name] = float(value)
        elapsed = time.monotonic() - self._t0
        if spec.max_trial_time_s is not None and elapsed > spec.max_trial_time_s:
            raise _Stop(
                TrialStatus.TIMEOUT,
                f"step {step} came after {elapsed:.1f} s, past budget.max_trial_time of "
                f"{spec.max_trial_time_s:g} s",
            )
        self.reports.append(
            {
                "step": step,
                "metrics": {k: stored_metric(v) for k, v in values.items()},
                "time_s": round(elapsed, 6),
            }
        )
        if (
            spec.phase == "tune"
            and spec.heldout
            and spec.heldout in values
            and not any(v["kind"] == "heldout_in_tuning" for v in self.violations)
        ):  # one per trial, at its first step
            self.violations.append(
                {"kind": "heldout_in_tuning", "step": step, "metric": spec.heldout}
            )
        if len(self.reports) == 1 and not any(name in values for name in spec.first_report_metrics):
            # a misnamed metric ends the trial at once, with what it spent on the record
            near = nearest_name(spec.metric, values)
            raise _Stop(
                TrialStatus.PROTOCOL_ERROR,
                f"metric {spec.metric} never reported; got "
                f"{', '.join(sorted(values))} in the trial's first report (step {step}){near} (the "
                "contract's metric.name must be one of the names the trainable reports)",
            )
        diverged = [
            m for m in spec.divergence_metrics if m in values and not math.isfinite(values[m])
        ]
        if diverged:
            raise _Stop(
                TrialStatus.DIVERGED, f"{diverged[0]} is {values[diverged[0]]} at step {step}"
            )
        if self.storage is not None:  # a checkpoint saved before this report outlives this node
            self.storage.push()
        if self._forward is not None and (self._forwarded is None or step > self._forwarded):
            forwarded = {
                k: v for k, v in values.items() if not (spec.phase == "tune" and k == spec.heldout)
            }
            self._forwarded = step
            before = top_level_modules() if self.machinery is None else None
            extra: dict[str, Any] = {"splits": dict(self.splits)} if self.splits else {}
            files = self._reads.files() if self._reads is not None else None
            if files is not None and files is not self._sent_files:  # sent when they change
                extra["inputs"] = {"files": files}
                self._sent_files = files
            try:
                self._forward(step, forwarded, elapsed, self.violations, **extra)
            except (
                SystemExit
            ) as stop:  # Ray Tune ends a stopped trial's thread with sys.exit from tune.report
                raise _SessionExit(*stop.args) from None
            finally:
                if (
                    before is not None
                ):  # the first report imports ray.tune in the worker: not the trainable's
                    self.machinery = top_level_modules() - before

    def log_split(self, name: str, ids: Any, groups: Any = None) -> dict[str, Any]:
        """Log the unit ids of split `name` in row order, and optional aligned `groups`
        ({"patient": [...]}).

        Only counts and fingerprints are kept (docs/data.md); overlaps with the
        splits logged before, and the contract's `data.independent` pairs, are
        checked here. Returns the stored summary.
        """
        if self._split_log is None:
            self._split_log = SplitLog()
        try:
            summary = self._split_log.add(name, ids, groups)
        except SplitError as error:
            raise _Stop(TrialStatus.PROTOCOL_ERROR, f"trial.log_split: {error}") from None
        self.add_split_summary(name, summary)
        return summary

    def add_split_summary(self, name: str, summary: dict[str, Any]) -> None:
        """Take a split summary (from log_split, or a `command:` script's report line) and check
        it."""
        self.splits[name] = summary
        found, problems = overlap_violations(self.splits, self._spec.extra.get("data"), only=name)
        if problems:
            raise _Stop(TrialStatus.PROTOCOL_ERROR, f"log_split: {problems[0]}")
        self.violations += [v for v in found if v not in self.violations]


MACHINERY = frozenset(
    {"planner", "ray"}
)  # planner's own and Ray's worker, never a trainable's package


# (how many modules, the last one's name and object id, their top-level names) at the last look
_LAST_LOOK: list = []


def top_level_modules() -> frozenset[str]:
    """The top-level names of the modules loaded in this process (`torch` for `torch.nn`).

    Asked four times a trial in a worker holding thousands of modules: while `sys.modules` has as
    many entries as at the last look and the same module object last (a module loaded since would
    be last), the names are the last look's."""
    modules = list(sys.modules)
    last = modules[-1] if modules else ""  # no module is named ""
    key = (len(modules), last, id(sys.modules.get(last)))  # a module loaded again is a new object
    if _LAST_LOOK and _LAST_LOOK[0][:3] == key:
        return _LAST_LOOK[0][3]
    names = frozenset(name.partition(".")[0] for name in modules)
    _LAST_LOOK[:] = [(*key, names)]
    return names


def new_modules(before: AbstractSet[str], machinery: AbstractSet[str] | None = None) -> list[str]:
    """The top-level modules loaded since `before` (names only): not the standard library,
    planner's or Ray's own, nor what Ray Tune loaded for the first report (`machinery`). A function
    trainable's record keeps them (`modules`): the imports inside its function body, which its
    source does not show."""
    skip = before | MACHINERY | (machinery or set())
    return sorted(
        name
        for name in top_level_modules() - skip
        if name not in sys.stdlib_module_names
        and not name.startswith(("__", "_cython_"))
        and name != "cython_runtime"
    )  # Cython's runtime entries: no package


def seed_everything(seed: int) -> None:
    """Seed the global RNGs a trainable may draw from: random, numpy.random, torch when loaded."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")  # seeded only when the trainable loaded it: torch is heavy
    if torch is not None:
        torch.manual_seed(seed)


def load_trainable(path: str, fresh: bool = True) -> Callable:
    """`module.path:function` -> the function; `fresh` executes the module anew (its globals start
    over)."""
    module_name, _, function = path.partition(":")
    if fresh and (module_name in sys.modules or module_name in _LET_GO):
        spec = importlib.util.find_spec(module_name)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            _with_submodules(
                module
            )  # before it runs: `import pkg.sub` at its top then `pkg.sub.x` works
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module_name, None)
                raise
            _bind_in_package(
                module_name, module
            )  # as an import does: `package.module` is the new one
            return getattr(module, function)
    module = importlib.import_module(module_name)
    return getattr(module, function)


def _bind_in_package(module_name: str, module: Any, *, was: Any = None) -> None:
    """`package.module` is `module` (None: no attribute), as an import makes it; with `was`, only
    while the attribute is `was` (what the package's own code put there is left)."""
    package, _, name = module_name.rpartition(".")
    holder = sys.modules.get(package)
    if holder is None or (was is not None and getattr(holder, name, None) is not was):
        return
    if module is not None:
        setattr(holder, name, module)
    elif hasattr(holder, name):
        delattr(holder, name)


def _with_submodules(module: Any) -> None:
    """A package about to be executed anew gets the submodules that are still loaded as its
    attributes, as their first import made them: `import pkg.sub` finds them loaded and sets
    nothing, so `pkg.sub.x` raised AttributeError from the second trial on. What the package's own
    code then assigns wins."""
    if getattr(module, "__path__", None) is not None:
        prefix = module.__name__ + "."
        for name, loaded in list(sys.modules.items()):
            child = name[len(prefix) :]
            if name.startswith(prefix) and "." not in child and loaded is not None:
                setattr(module, child, loaded)


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
    reads = _Reads.of(spec)  # what a function trainable reads, all its attempts together
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
            _SessionExit
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
    _release_memory(
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
    checkpoint = (spec.extra.get("command") or {}).get("checkpoint")
    if checkpoint and checkpoint.get("keep", "all") != "all":
        checkpoints.prune(spec.dir, checkpoint["file"], checkpoint["keep"])
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
# a tuning run and cannot be deserialized by the driver (F7).
_PROPAGATE = (_SessionExit, KeyboardInterrupt, TrialLimit)

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
    except _Stop as stop:
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
        return RAISED, _error(n, type(exc).__name__, scrub(str(exc)), scrub(trace))
    if trial.last_step == spec.budget and (never := _never_reported(spec, trial)):
        return TrialStatus.PROTOCOL_ERROR, _error(n, "TrialProtocolError", never, "")
    missing = _missing_splits(spec, trial)
    if trial.last_step == spec.budget and missing:
        return TrialStatus.PROTOCOL_ERROR, _error(n, "TrialProtocolError", missing, "")
    if trial.last_step == spec.budget:
        return TrialStatus.COMPLETED, None
    reached = (
        "no report at all"
        if trial.last_step is None
        else f"its last report was step {trial.last_step}"
    )
    return TrialStatus.PROTOCOL_ERROR, _error(
        n,
        "TrialProtocolError",
        f"the trainable returned before the full exposure of {spec.budget}: {reached}"
        f"{_why_short(spec, trial.last_step, trial.log_reached, trial.notes, steps=_steps(trial))}",
        "",
    )


class _Reads:
    """What a function trainable's trial reads, all its attempts together: the recorder of its
    audit events (`recorder`) and the files as its record names them (`files`), each file looked
    at once a trial."""

    def __init__(self, spec: TrialSpec, recorder: Recorder, module_file: Path | None):
        self.spec, self.recorder, self.module_file = spec, recorder, module_file
        self.known: dict[str, Any] = {}  # absolute path -> its FileFact, as first looked at
        self.seen = -1  # how many files the recorder had noted when `last` was made
        self.last: dict[str, Any] = {}

    @classmethod
    def of(cls, spec: TrialSpec) -> _Reads | None:
        """Below the contract's folder (`extra["reads_base"]`: "." on a cluster, where the worker
        runs in its copy) and the trainable module's, outside the run folder; None for a
        `command:` (its bootstrap records them) or a spec that does not ask for it."""
        base = spec.extra.get("reads_base")
        if "command" in spec.extra or not base:
            return None
        module_file = _module_file(spec.trainable.partition(":")[0])
        roots = [os.path.abspath(base)] + ([str(module_file.parent)] if module_file else [])
        trial_dir = os.path.abspath(spec.dir)
        parent = os.path.dirname(trial_dir)
        run_folder = os.path.dirname(parent) if os.path.basename(parent) == "trials" else trial_dir
        return cls(spec, Recorder(roots, [run_folder]), module_file)

    def files(self) -> dict[str, Any]:
        """The files read so far (`inputs.files`): what the hook saw, and the trainable's module
        and the local modules it imports, which an earlier trial in this worker may have loaded
        before this one started (no import then, no audit event)."""
        if len(self.recorder.noted) == self.seen:
            return self.last
        self.seen = len(self.recorder.noted)
        read, written = self.recorder.read()
        if self.module_file is not None:
            module_name = self.spec.trainable.partition(":")[0]
            read |= {str(path) for path in trainable_sources(self.module_file, module_name)}
        base = Path(self.recorder.roots[0])  # the first root: the folder the names start from
        self.last = dict(read_facts(read, written, base, self.known))
        return self.last


def _module_file(module_name: str) -> Path | None:
    """The file of the trainable's module as this worker imports it, or None."""
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    origin = found.origin if found is not None else None
    return Path(origin).resolve() if origin and os.path.isfile(origin) else None


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


def _uses_lightning(trainable: str) -> bool:
    """Whether the function trainable's module holds Lightning (`import lightning as L`, `from
    lightning.pytorch import Trainer`): a name in its globals from `lightning` or
    `pytorch_lightning`."""
    module = sys.modules.get(trainable.partition(":")[0])
    for value in list(getattr(module, "__dict__", {}).values()):
        name = (
            value.__name__
            if isinstance(value, types.ModuleType)
            else getattr(value, "__module__", None)
        )
        if isinstance(name, str) and name.split(".")[0] in ("lightning", "pytorch_lightning"):
            return True
    return False


# planner.LightningCallback's note while the last epoch's report waits for trainer.test()
# (planner._trial.lightning)
WAITING_FOR_TEST = (
    "the last epoch's report waits for trainer.test() (metric.heldout is reported outside tuning): "
    "call trainer.test() after trainer.fit()"
)


def _steps(trial: Trial) -> list[int]:
    return [r["step"] for r in trial.reports if isinstance(r.get("step"), int)]


def _interval_short(budget: int, steps: list[int]) -> str:
    """When the reports came at one interval and the next would have passed the budget: the clause
    that says so ('' otherwise). nanoGPT evaluates at multiples of eval_interval: 75 into 200 ends
    at 150."""
    gaps = {b - a for a, b in zip(steps, steps[1:], strict=False)}
    if len(steps) < 2 or len(gaps) != 1:
        return ""
    (every,) = gaps
    if every <= 0 or steps[-1] + every <= budget:
        return ""
    return (
        f"; the script reported every {every} steps (at {', '.join(map(str, steps[-3:]))}), and "
        f"the budget of {budget} is not a multiple of {every}: its next evaluation would have been "
        "at step "
        f"{steps[-1] + every}, past the budget. Make budget.exposure a multiple of the evaluation "
        f"interval (or the interval a divisor of {budget}), or evaluate at the last step too"
    )


def _why_short(
    spec: TrialSpec,
    last_step: int | None,
    log_reached: int | None = None,
    notes: list[str] | None = None,
    *,
    steps: list[int] | None = None,
) -> str:
    """What most often ends a trial short of its exposure, as a clause for the protocol error (''
    if nothing). `log_reached`: the furthest step a command's own metrics log held a row at, the
    metric or not; `notes`: the trial's notes (LightningCallback's WAITING_FOR_TEST: the last
    report waited for a test that never reached the callback)."""
    if notes and WAITING_FOR_TEST in notes:
        return (
            "; its last epoch was trained, and its report waited for trainer.test() "
            "(metric.heldout is "
            "reported outside tuning), which never reached this trial's LightningCallback: call "
            "trainer.test() on the Trainer that has the callback (a new Trainer without it "
            "reports nothing)"
        )
    metrics = (spec.extra.get("command") or {}).get("metrics") or {}
    if last_step is None and "command" not in spec.extra and _uses_lightning(spec.trainable):
        return (
            "; the trainable runs Lightning: a Trainer reports its epochs to the trial through "
            "planner.LightningCallback(trial) in its callbacks (docs/lightning.md)"
        )
    if metrics and log_reached is not None and log_reached > (last_step or 0):
        column = (metrics.get("names") or {}).get(spec.metric, spec.metric)
        return (
            f"; the script did train to step {log_reached} (its log holds rows there) but logged "
            f"{column!r} "
            f"{'never' if last_step is None else f'last at step {last_step}'}: the steps after "
            f"were not "
            "evaluated (Lightning's check_val_every_n_epoch, the Trainer's eval_steps or "
            "eval_strategy): "
            "evaluate at the last step too, or make the budget a multiple of the evaluation "
            "interval"
        )
    if (
        metrics
        and last_step is not None
        and last_step == spec.budget - 1
        and metrics.get("step_base", 1) == 1
    ):
        return (
            f"; one step short: if the script's {metrics.get('step') or 'step'} column counts "
            f"from 0 (Lightning's "
            "epoch does), say so with command.metrics.step_base: 0"
        )
    if steps and (interval := _interval_short(spec.budget, steps)):
        return interval
    if last_step is not None and last_step < spec.budget:
        return (
            "; a script that ends its training early by itself (Lightning's EarlyStopping, "
            "Hugging Face's "
            "EarlyStoppingCallback, a patience loop) gives the arms unequal budgets: remove that, "
            "and let "
            "tuning.early_stop stop trials by one rule for every arm"
        )
    return ""


def _call(spec: TrialSpec, trial: Trial, ledger: Ledger, scrub: Callable[[str], str]) -> None:
    """Call the trainable under the watchdog, its output captured; a limit reached is a _Stop.

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
        raise _Stop(limit.status, dog.verdict[1] if dog.verdict else limit.status) from None
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


def _never_reported(spec: TrialSpec, trial: Trial) -> str | None:
    """Why a trial that reached its budget and ended lacks its decision metric, or None.

    Asked once the trainable has returned (a script has exited): what it reports after its last
    budget step (a final evaluation on the test split) counts.
    """
    required = spec.decision_metric
    if any(required in r["metrics"] for r in trial.reports):
        return None
    got = sorted({name for r in trial.reports for name in r["metrics"]})
    return (
        f"metric {required} never reported; got {', '.join(got)}{nearest_name(required, got)} "
        f"(the contract's "
        f"{'metric.heldout' if required != spec.metric else 'metric.name'} must be one of the "
        f"names the "
        "trainable reports)"
    )


def _missing_splits(spec: TrialSpec, trial: Trial) -> str | None:
    """Why the trial breaks `data.require` (a split it did not log), or None."""
    if not (spec.extra.get("data") or {}).get("require"):
        return None
    missing = missing_required(trial.splits, spec.extra["data"])
    if not missing:
        return None
    return (
        f"the trial logged no split {', '.join(missing)}, which data.require needs: call "
        f"trial.log_split({missing[0]!r}, ids) (planner.log_split in a command: script)"
    )


def _scrubber(spec: TrialSpec) -> Callable[[str], str]:
    return Redactor.for_run(spec.config).text


_FULL_COLLECTION_S = [0.0]  # the CPU seconds this process's last full collection took
_TRIM_S = [0.0]  # and its last malloc_trim
_AT_MOST = (
    20  # a release runs after a trial only when its last run took at most 1/20 of the trial's time
)


def _release_memory(trial_s: float, trainable_module: str | None = None) -> None:
    """Give freed memory back to the system, so a reused worker starts its next trial small.

    A full collection walks every object of the process (Ray, Tune, torch...: 40-100 ms in a
    worker), and malloc_trim walks the C heap (about 1 ms), so each runs after a trial only when it
    costs at most a twentieth of the trial's own time (`trial_s`); after a shorter trial the young
    generations are collected, and the interpreter's own collections do the rest. A thousand
    trivial trials no longer spend most of their workers' time in the collector.

    In a Ray worker, what is still alive after its first trial's full collection (the modules it
    imported: Ray, Tune, the trainable's torch or Lightning, and their caches) is moved out of the
    collector's sight (`gc.freeze`), once: those objects live as long as the process, and every
    later full collection walks only what trials made since (2 ms instead of 50-60 ms in a worker
    that imported Ray Tune, measured here), so it runs after nearly every trial. Objects frozen are
    still freed when nothing refers to them; only a cycle among them would stay: a module is one
    (its functions refer to its globals), so the function trainable's module (`trainable_module`),
    which the next trial executes anew anyway, is let go and collected first, its globals with it
    (a dataset it loaded at import), never frozen."""
    if not _if_cheap(trial_s, _FULL_COLLECTION_S, gc.collect):
        gc.collect(1)
    elif not _FROZEN[0] and _in_ray_worker():
        if trainable_module and _let_go(trainable_module):
            gc.collect()
        gc.freeze()
        _FROZEN[0] = True
        _FULL_COLLECTION_S[0] = (
            0.0  # the next full collection walks only what trials made: it weighs itself
        )
    _if_cheap(trial_s, _TRIM_S, _malloc_trim)


_FROZEN = [False]  # whether this worker froze what its first trial left alive


_LET_GO: set[str] = (
    set()
)  # trainable modules let go before the freeze: the next trial executes them anew


def _let_go(module_name: str) -> bool:
    """Forget the module `module_name` (sys.modules and its package's attribute): the next trial
    executes it anew (`load_trainable`). True when it was there."""
    _LET_GO.add(module_name)
    module = sys.modules.pop(module_name, None)
    if module is not None:
        _bind_in_package(module_name, None, was=module)
    return module is not None


def _in_ray_worker() -> bool:
    """True inside a Ray worker's task or actor (never the driver, a test or a user's own
    process)."""
    return ray_node_id() is not None


def _if_cheap(trial_s: float, last_s: list[float], release: Callable[[], object]) -> bool:
    """Run `release` when its last run (`last_s[0]`, CPU seconds of this thread) took at most
    1/_AT_MOST of `trial_s`, keeping what this run took; False when it was too dear to run."""
    if trial_s < _AT_MOST * last_s[0]:
        return False
    t0 = (
        time.thread_time()
    )  # its own CPU: a collection the scheduler paused (Ray's processes on 2 cores) is not
    release()  # dearer, and a wall-clock figure once skipped the next trial's collection for that
    last_s[0] = time.thread_time() - t0
    return True


def _malloc_trim() -> None:
    try:
        supervisor.libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass


def trainable_for(spec: TrialSpec) -> Callable:
    """The function a trial calls: the contract's `module:function`, or its `command:` as a
    subprocess."""
    if "command" in spec.extra:
        return CommandTrainable.from_dict(spec.extra["command"])
    return load_trainable(spec.trainable)


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


def ray_node_id() -> str | None:
    """The Ray node running this trial: several nodes can share a host. None outside a Ray task or
    actor."""
    ray = sys.modules.get(
        "ray"
    )  # never imported here: only asked when the worker already runs in Ray
    if ray is None or not ray.is_initialized():
        return None
    # the driver (SCRIPT_MODE) has no task; asking it for one makes Ray log a warning on stderr
    try:
        context = ray.get_runtime_context()
        if context.worker.mode != ray.WORKER_MODE:
            return None
        return context.get_node_id() if context.get_task_id() is not None else None
    except Exception:  # an older or partial Ray: the record just lacks the node
        return None


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
