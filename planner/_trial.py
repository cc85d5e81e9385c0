"""The trainable protocol, as the worker runs it.

`train(config, trial)` receives a `Trial`: `trial.seed`, `trial.budget` (the
exposure), `trial.arm`, `trial.phase` (tune | confirm | reeval), `trial.id`,
`trial.dir`, and `trial.report(step, **metrics)`.

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

import importlib
import importlib.util
import math
import numbers
import os
import random
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

PHASES = ("tune", "confirm", "reeval")


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
    path: tuple[str, ...] = ()  # folders put on sys.path before importing the trainable (those that exist here)
    cwd: str | None = None  # the folder the trainable runs in (where `plan run` started), when it exists here
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def divergence_metrics(self) -> tuple[str, ...]:
        """Metrics whose NaN/inf makes the trial diverged: the selection metric, and the heldout one outside tuning."""
        if self.heldout and self.phase != "tune":
            return (self.metric, self.heldout)
        return (self.metric,)


class _Stop(BaseException):
    """Ends an attempt from inside `trial.report` (a BaseException, so `except Exception` in a trainable cannot swallow it)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Trial:
    """What the trainable sees. Only `report` talks back."""

    def __init__(self, spec: TrialSpec, forward: Callable[..., None] | None,
                 already_forwarded: int | None = None):
        self.seed = spec.seed
        self.budget = spec.budget
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

    @property
    def last_step(self) -> int | None:
        return self.reports[-1]["step"] if self.reports else None

    def report(self, step: int, **metrics: Any) -> None:
        """Report the exposure consumed so far (`step`) and metrics at that point."""
        spec = self._spec
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise _Stop("protocol_error", f"trial.report: step must be an integer, got {step!r}")
        step = int(step)
        if step > spec.budget:
            raise _Stop("protocol_error", f"trial.report: step {step} is past the budget of {spec.budget}")
        if step < 0:
            raise _Stop("protocol_error", f"trial.report: step {step} is negative")
        if self.last_step is not None and step <= self.last_step:
            raise _Stop("protocol_error", f"trial.report: step {step} does not follow step {self.last_step} (steps strictly increase)")
        if not metrics:
            raise _Stop("protocol_error", f"trial.report: step {step} has no metrics")
        values: dict[str, float] = {}
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise _Stop("protocol_error", f"trial.report: metric {name!r} at step {step} is not a number: {value!r}")
            values[name] = float(value)
        elapsed = time.monotonic() - self._t0
        if spec.max_trial_time_s is not None and elapsed > spec.max_trial_time_s:
            raise _Stop("timeout", f"step {step} came after {elapsed:.1f} s, past budget.max_trial_time of {spec.max_trial_time_s:g} s")
        self.reports.append({"step": step, "metrics": {k: _jsonable(v) for k, v in values.items()},
                             "time_s": round(elapsed, 6)})
        if spec.phase == "tune" and spec.heldout and spec.heldout in values:
            self.violations.append({"kind": "heldout_in_tuning", "step": step, "metric": spec.heldout})
        diverged = [m for m in spec.divergence_metrics if m in values and not math.isfinite(values[m])]
        if diverged:
            raise _Stop("diverged", f"{diverged[0]} is {values[diverged[0]]} at step {step}")
        if self._forward is not None and (self._forwarded is None or step > self._forwarded):
            forwarded = {k: v for k, v in values.items() if not (spec.phase == "tune" and k == spec.heldout)}
            self._forwarded = step
            self._forward(step, forwarded, elapsed, self.violations)


def _jsonable(value: float) -> float | str:
    """Non-finite floats are stored as "nan", "inf", "-inf" (JSON has no such numbers)."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def seed_everything(seed: int) -> None:
    """Seed the global RNGs a trainable may draw from: random, numpy.random, torch when loaded."""
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is None:
        import numpy as np
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def load_trainable(path: str, fresh: bool = True) -> Callable:
    """`module.path:function` -> the function; `fresh` executes the module anew (its globals start over)."""
    module_name, _, function = path.partition(":")
    if fresh and module_name in sys.modules:
        spec = importlib.util.find_spec(module_name)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module_name, None)
                raise
            return getattr(module, function)
    module = importlib.import_module(module_name)
    return getattr(module, function)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_trial(spec: TrialSpec, forward: Callable[..., None] | None = None) -> dict[str, Any]:
    """Run `spec` to its end (retrying raises) and return its record."""
    started, t0 = now_iso(), time.monotonic()
    errors: list[dict[str, Any]] = []
    os.makedirs(spec.dir, exist_ok=True)
    for folder in reversed(spec.path):
        if folder not in sys.path and os.path.isdir(folder):
            sys.path.insert(0, folder)
    if spec.cwd and os.path.isdir(spec.cwd) and os.getcwd() != spec.cwd:
        os.chdir(spec.cwd)
    status, trial, attempts = "failed", None, 0
    forwarded: int | None = None
    while attempts < 1 + spec.retries:
        attempts += 1
        seed_everything(spec.seed)
        trial = Trial(spec, forward, forwarded)
        try:
            fn = trainable_for(spec)
            seed_everything(spec.seed)  # the module body may have drawn from the RNGs
            fn(spec.config, trial)
        except _Stop as stop:
            status = stop.status
            if stop.status in ("protocol_error", "timeout"):
                errors.append(_error(attempts, "TrialProtocolError" if stop.status == "protocol_error" else "Timeout",
                                     stop.message, ""))
            elif stop.status == "diverged":
                trial.violations.append({"kind": "diverged", "step": trial.last_step, "message": stop.message})
            break
        except Exception as error:  # the trainable raised: retried, then failed (a command's limits end it at once)
            final = _final_status(error)
            if final:
                errors.append(_error(attempts, type(error).__name__, str(error), getattr(error, "stderr_tail", "")))
                forwarded = trial._forwarded
                status = final
                break
            errors.append(_error(attempts, type(error).__name__, str(error), traceback.format_exc()))
            forwarded = trial._forwarded
            status = "failed"
            continue
        if trial.last_step == spec.budget:
            status = "completed"
        else:
            status = "protocol_error"
            reached = "no report at all" if trial.last_step is None else f"its last report was step {trial.last_step}"
            errors.append(_error(attempts, "TrialProtocolError",
                                 f"the trainable returned before the full exposure of {spec.budget}: {reached}", ""))
        break
    return make_record(spec, status, trial, attempts, errors, started, time.monotonic() - t0)


def trainable_for(spec: TrialSpec) -> Callable:
    """The function a trial calls: the contract's `module:function`, or its `command:` as a subprocess."""
    if "command" in spec.extra:
        from planner._command import CommandTrainable

        return CommandTrainable.from_dict(spec.extra["command"])
    return load_trainable(spec.trainable)


def _final_status(error: Exception) -> str | None:
    """The status of an error that ends a trial without a retry, or None (retry it).

    A protocol error (TrialProtocolError, also raised by a command that reported
    nothing or ran another config), a command killed at its time limit, or at its
    memory cap, will not go better on a second attempt.
    """
    from planner._errors import TrialProtocolError

    if isinstance(error, TrialProtocolError):
        return "protocol_error"
    kind = type(error).__name__
    if kind == "CommandTimeoutError":
        return "timeout"
    if kind == "CommandMemoryError":
        return "oom"
    return None


def _error(attempt: int, kind: str, message: str, trace: str) -> dict[str, Any]:
    return {"attempt": attempt, "type": kind, "message": message, "traceback": trace}


def make_record(spec: TrialSpec, status: str, trial: Trial | None, attempts: int, errors: list,
                started: str, duration_s: float, reports: list | None = None) -> dict[str, Any]:
    reports = reports if reports is not None else (trial.reports if trial is not None else [])
    return {
        "trial_id": spec.trial_id,
        "phase": spec.phase,
        "arm": spec.arm,
        "seed": spec.seed,
        "index": spec.index,
        "params": dict(spec.params),
        "config": spec.config,
        "status": status,
        "exposure": reports[-1]["step"] if reports else 0,
        "reports": reports,
        "attempts": attempts,
        "errors": errors,
        "violations": list(trial.violations) if trial is not None else [],
        "started": started,
        "ended": now_iso(),
        "duration_s": round(duration_s, 6),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "contract_sha256": spec.contract_sha256,
    }
