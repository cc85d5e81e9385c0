"""Tuning through Ray Tune: every sweep's trials in one `Tuner`, records back to the driver.

ONE `Tuner` runs all the sweeps of a run, so the trials of every arm and tuning
seed share the cluster's slots and the worker processes (`reuse_actors=True`).
Each sweep (an arm at a tuning seed) keeps its own Optuna study (a `SweepStudy`
in the run folder's studies.log, drawing by tuning index from the declared
sampler and seed, over the arm's space) and its own
early-stopping rule (ASHA or the median rule on the reported step, or none), so
arms never compete with each other inside a rung and every arm gets exactly
`trials_per_arm` trials per tuning seed.

The pieces, each taking the one `TuneState` a tuning shares (the sweeps, which
sweep each Tune trial belongs to, the reports seen, the trials stopped early,
the hooks, the outcome):

    SweepSearch        Tune's searcher: the next trial of each sweep in turn, from its own study
    PerSweepScheduler  Tune's scheduler: each trial to its sweep's early-stopping rule
    Recorder           Tune's callback: trial events -> planner records, as they happen

Records are built in the workers (`planner._dispatch.worker.tune_trainable`) and
returned as values; a trial that completed on its first attempt, or was stopped
by its scheduler, sends only its reports, and the Recorder rebuilds its record.

This module is the Ray Tune and Optuna boundary of tuning: it imports both at
the top and is imported when the tuning phase starts, never by a worker.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import optuna
from ray import tune
from ray.tune import ProgressReporter
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule, TrialScheduler
from ray.tune.search import Searcher

from planner._contract.model import Resources
from planner._contract.paths import apply_params
from planner._core.errors import RunError
from planner._core.records import finite_final_value
from planner._core.status import StopReason, TrialStatus
from planner._core.text import utc_now, without_colours
from planner._dispatch import compat
from planner._dispatch.cluster import resources_for
from planner._dispatch.fixed import (
    after_worker_death,
    completed_reports,
    prestart_workers,
    slots_for,
)
from planner._dispatch.hooks import CANCELLED, Hooks, Outcome
from planner._dispatch.nodes import NodeGuard
from planner._dispatch.ray_start import embedded_worker_environ, environ
from planner._dispatch.search import SweepStudy, metric_steps, run_studies, study_name
from planner._dispatch.worker import WORKER_ENV, tune_trainable
from planner._trial.protocol import kept_record, make_record
from planner._trial.spec import TrialSpec

__all__ = ["TUNE_ENV", "WORKER_ENV", "Sweep", "TuneState", "run_tuning"]

# Tune knobs that cost time per trial and buy nothing here.
TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "TUNE_DISABLE_SIGINT_HANDLER": "1",
    "TUNE_GLOBAL_CHECKPOINT_S": "1000000",
    "TUNE_RESULT_BUFFER_LENGTH": "1",
    "TUNE_WARN_THRESHOLD_S": "100",
    "TUNE_PRINT_ALL_TRIAL_ERRORS": "0",
    "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
    "RAY_AIR_NEW_OUTPUT": "0",
}


@dataclass
class Sweep:
    """One Optuna study: an arm at a tuning seed. `specs[i]` is the trial at position i."""

    arm: str
    seed: int
    specs: list[TrialSpec]  # in order of index; only the trials still to run
    space: dict[str, Any]  # {dotted key: optuna distribution}
    sampler: (
        Any  # the contract's sampler (name, seed): planner._dispatch.search.SweepStudy draws by it
    )
    finished: list[dict] = field(
        default_factory=list
    )  # the records of a resumed sweep's finished trials
    raw: dict[str, Any] | None = (
        None  # the arm's config with interpolations unresolved (apply_params)
    )
    # trial id -> the tuned values it started with before (a second pass, a --resume): SweepSearch
    # moves those trials to the front of `specs` and runs these values again, never a new draw
    again: dict[str, dict] = field(default_factory=dict)


@dataclass
class TuneState:
    """What the searcher, the scheduler and the recorder of one tuning share."""

    sweeps: list[Sweep]
    metric: str
    mode: str
    exposure: int
    hooks: Hooks
    of_trial: dict[str, tuple[int, TrialSpec]] = field(
        default_factory=dict
    )  # Tune trial id -> (sweep, spec)
    reports: dict[str, list] = field(
        default_factory=dict
    )  # Tune trial id -> the reports seen, in order
    last_seen: dict[str, dict] = field(
        default_factory=dict
    )  # Tune trial id -> its last scheduler result
    stopped: set[str] = field(default_factory=set)  # trials a sweep's early-stopping rule stopped
    records: dict[str, dict] = field(default_factory=dict)  # Tune trial id -> the record written
    outcome: Outcome = field(default_factory=Outcome)

    def sweep_of(self, trial_id: str) -> int | None:
        entry = self.of_trial.get(trial_id)
        return None if entry is None else entry[0]

    def completed_at_full_exposure(self, trial_id: str) -> bool:
        """The one test: a trial no rule stopped whose last report is at the full exposure."""
        reports = self.reports.get(trial_id, [])
        return (
            trial_id not in self.stopped and bool(reports) and reports[-1]["step"] == self.exposure
        )


def scheduler_result(result: dict, metric: str) -> dict | None:
    """What a sweep's scheduler and searcher see of a Tune result: the step and the selection
    metric.

    Tune hands schedulers and searchers the result flattened ("planner/step"),
    callbacks the nested one; both forms are read here.
    """
    payload = result.get("planner")
    if isinstance(payload, dict) and "step" in payload:
        step, value, elapsed = (
            payload["step"],
            payload["metrics"].get(metric),
            payload.get("time_s", 0.0),
        )
    elif "planner/step" in result:
        step, value, elapsed = (
            result["planner/step"],
            result.get(f"planner/metrics/{metric}"),
            result.get("planner/time_s", 0.0),
        )
    else:
        return None
    if value is None or not math.isfinite(value):
        return None
    return {"step": step, "training_iteration": step, metric: value, "time_total_s": elapsed}


def _rerun_values(sweep: Sweep, trial_id: str) -> dict[str, Any] | None:
    """The tuned values trial `trial_id` started with before, when they are values of the sweep's
    space (they come from events.jsonl: a run folder's, so checked), else None: the trial then
    draws anew, and its attempt ledger keeps it from continuing an earlier attempt's checkpoint
    (planner._trial.attempts)."""
    params = sweep.again.get(trial_id)
    if not isinstance(params, dict) or set(params) != set(sweep.space):
        return None
    try:  # Optuna checks each value against its distribution as it makes a trial of them
        optuna.trial.create_trial(params=params, distributions=sweep.space, value=0.0)
    except (TypeError, ValueError, AttributeError):
        return None
    return dict(params)


def _make_rule(early_stop, metric: str, mode: str, exposure: int):
    if early_stop.rule == "asha":
        return ASHAScheduler(
            time_attr="step",
            metric=metric,
            mode=mode,
            max_t=exposure,
            grace_period=early_stop.grace,
            reduction_factor=early_stop.reduction_factor,
        )
    if early_stop.rule == "median":
        return MedianStoppingRule(
            time_attr="step", metric=metric, mode=mode, grace_period=early_stop.grace
        )
    return None


# ---------------------------------------------------------------- the searcher


class SweepSearch(Searcher):
    """Suggests the next trial of each sweep in turn, from that sweep's own Optuna study, by tuning
    index (planner._dispatch.search.SweepStudy): the studies live in `storage` (the run folder's
    journal) and are asked and told as trials start and end; a resumed sweep's study is given its
    finished trials first."""

    def __init__(self, state: TuneState, storage: Any = None, resumed_at: str | None = None):
        super().__init__(metric=None, mode=None)
        self.state = state
        self.studies: list[SweepStudy] = []
        self.asked: dict[str, int] = {}  # Tune trial id -> its trial number in its sweep's study
        several = {
            s.arm: len({x.seed for x in state.sweeps if x.arm == s.arm}) > 1 for s in state.sweeps
        }
        for sweep in state.sweeps:
            study = SweepStudy(
                storage,
                study_name(sweep.arm, sweep.seed, several[sweep.arm]),
                sweep.sampler,
                sweep.space,
                state.mode,
                state.metric,
            )
            ran = sweep.finished or sweep.again
            study.replay(sweep.finished, state.metric, resumed_at if ran else None)
            rerun = {
                spec.trial_id: params
                for spec in sweep.specs
                if (params := _rerun_values(sweep, spec.trial_id)) is not None
            }
            sweep.again = rerun  # the values each trial run again started with (checked)
            self.studies.append(study)
        self.next = [0] * len(state.sweeps)
        self.turn = 0

    def set_search_properties(self, metric, mode, config, **spec):
        return True

    def suggest(self, trial_id):
        sweeps = self.state.sweeps
        for _ in range(len(sweeps)):
            k = self.turn
            self.turn = (self.turn + 1) % len(sweeps)
            if self.next[k] < len(sweeps[k].specs):
                template = sweeps[k].specs[self.next[k]]
                self.next[k] += 1
                number, drawn = self.studies[k].ask(
                    template.index, template.trial_id, sweeps[k].again.get(template.trial_id)
                )
                params = {key: _plain(value) for key, value in drawn.items()}
                spec = _with_params(template, params, sweeps[k].raw)
                self.state.of_trial[trial_id] = (k, spec)
                self.asked[trial_id] = number
                return {"planner_spec": asdict(spec)}
        return Searcher.FINISHED

    def on_trial_result(self, trial_id, result):
        """A running trial's report, its metric at the step given to its study. Tune hands a
        searcher the result flattened: the worker's "planner" entry as "planner/step",
        "planner/metrics/<name>"."""
        k, number = self.state.sweep_of(trial_id), self.asked.get(trial_id)
        step, metric = result.get("planner/step"), self.state.metric
        if k is not None and number is not None and isinstance(step, int):
            report = {"step": step, "metrics": {metric: result.get(f"planner/metrics/{metric}")}}
            self.studies[k].report(number, metric_steps([report], metric))

    def on_trial_complete(self, trial_id, result=None, error=False):
        k = self.state.sweep_of(trial_id)
        number = self.asked.pop(trial_id, None)
        if k is None or number is None:
            return
        metric = self.state.metric
        record = self.state.records.get(trial_id)
        if record is not None:
            status, reports = record["status"], record["reports"]
        else:  # not written yet: a fast-path completion, an early stop, or a cancellation
            reports = self.state.reports.get(trial_id, [])
            status = (
                TrialStatus.COMPLETED
                if self.state.completed_at_full_exposure(trial_id)
                else TrialStatus.EARLY_STOPPED
            )
        final = (
            finite_final_value({"reports": reports}, metric)
            if status == TrialStatus.COMPLETED
            else None
        )
        # stopped early: pruned; failed, diverged: failed; never a final value but a completed one's
        self.studies[k].tell(
            number, final, status == TrialStatus.EARLY_STOPPED, metric_steps(reports, metric)
        )


# ---------------------------------------------------------------- the scheduler


class PerSweepScheduler(FIFOScheduler):
    """Routes each trial to its sweep's own early-stopping rule; never stops a trial at full
    exposure."""

    def __init__(self, state: TuneState, early_stop):
        super().__init__()
        self.state = state
        self.rules = [
            _make_rule(early_stop, state.metric, state.mode, state.exposure) for _ in state.sweeps
        ]
        self.added: deque = deque()  # the trials added, in order, until they leave PENDING

    def _rule(self, trial):
        k = self.state.sweep_of(trial.trial_id)
        return None if k is None else self.rules[k]

    def choose_trial_to_run(self, tc):
        """FIFOScheduler's choice, the first PENDING trial in the order added, without its walk
        over every trial of the run at each step of Tune's loop (a quarter of the driver's time at
        5,000 trials, growing with the run): trials that left PENDING are dropped from the front of
        `added`, so a step costs O(1) amortized. No trial is ever PAUSED here (no rule pauses), and
        a trial Tune sets back to PENDING (a retry after its worker died) is started by Tune's own
        pass over its pending trials, as before."""
        while self.added and self.added[0].status != Trial.PENDING:
            self.added.popleft()
        return self.added[0] if self.added else None

    def on_trial_add(self, tc, trial):
        self.added.append(trial)
        rule = self._rule(trial)
        if rule is not None:
            rule.on_trial_add(tc, trial)

    def on_trial_result(self, tc, trial, result):
        rule = self._rule(trial)
        seen = scheduler_result(result, self.state.metric)
        if rule is None or seen is None:
            return TrialScheduler.CONTINUE
        decision = rule.on_trial_result(tc, trial, seen)
        if decision == TrialScheduler.STOP and seen["step"] < self.state.exposure:
            self.state.stopped.add(trial.trial_id)
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, tc, trial, result):
        rule = self._rule(trial)
        if rule is None:
            return
        seen = self.state.last_seen.get(trial.trial_id)
        try:
            if seen is not None:
                rule.on_trial_complete(tc, trial, seen)
            else:
                rule.on_trial_remove(tc, trial)
        except KeyError:
            pass

    def on_trial_error(self, tc, trial):
        rule = self._rule(trial)
        if rule is not None:
            try:
                rule.on_trial_error(tc, trial)
            except KeyError:
                pass

    def on_trial_remove(self, tc, trial):
        self.on_trial_error(tc, trial)


# ---------------------------------------------------------------- the recorder


class Recorder(tune.Callback):
    """Turns Tune's trial events into planner records, as they happen."""

    def __init__(
        self,
        state: TuneState,
        *,
        prestart: bool = False,
        resources: Resources | None = None,
        guard: NodeGuard | None = None,
    ):
        self.state, self.guard = state, guard
        self.started: set[str] = (
            set()
        )  # trial ids started (a restart after a dead worker is not a new trial)
        self.meta: dict[str, dict] = {}
        self.lost: dict[
            str, list
        ] = {}  # attempts whose worker died (a node lost), before Tune's retry
        self.prestart, self.resources = prestart, resources
        self.warming: list = []
        self.total = sum(len(s.specs) for s in state.sweeps)
        self.ended: deque = (
            deque()
        )  # trials that ended, in order, until Tune has let go of them (`forget`)
        self.requests: dict = {}  # one copy of each resource request, for the trials forgotten

    def on_step_begin(self, iteration, trials, **info):
        """Each step of Tune's loop: a node that joined is held and checked before Tune can place a
        trial there (NodeGuard)."""
        if self.guard is not None:
            self.guard.look()

    def on_trial_start(self, iteration, trials, trial, **info):
        entry = self.state.of_trial.get(trial.trial_id)
        if entry is not None and trial.trial_id not in self.started:
            self.started.add(trial.trial_id)
            self.state.hooks.trial_started(entry[1])
        if self.prestart and not self.warming and len(self.started) >= self.warm_from:
            # Warm one worker per slot for the confirmation, so its first trials do not pay for
            # starting processes: on a cluster once the last tuning trials run and none waits (a
            # warm-up asks for a trial's resources there); on one machine from the last two waves
            # on (it asks for none, and an embedded Ray keeps an idle worker, so it is ready
            # however short the tuning's tail).
            self.warming.extend(
                prestart_workers(
                    self.state.sweeps[0].specs[0],
                    self.resources,
                    one_machine=embedded_worker_environ() is not None,
                )
            )

    @functools.cached_property
    def warm_from(self) -> int:
        """How many trials have started when the warm-ups go out (asked once: slots_for asks the
        GCS): never before every slot's first trial has its actor, which might otherwise wait for a
        new worker."""
        if embedded_worker_environ() is None or self.resources is None:
            return self.total
        slots = slots_for(self.resources)
        return min(self.total, max(slots, self.total - 2 * slots))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        # Tune summarizes every number of a result (a summary and two windows of recent values
        # each, in `Trial.update_last_result`, after the callbacks, which may change the result in
        # place): planner's payload is read here, once, and what Tune keeps of it is one word. The
        # scheduler and the searcher have seen it already (Tune calls them before its callbacks);
        # Tune's own progress callback prints "Trial ... completed. Last result:" for a trial whose
        # last result has no key of its own, hence the word rather than nothing.
        payload = result.get("planner")
        payload = payload if isinstance(payload, dict) else {}
        result["planner"] = "read"
        if "record" in payload:
            if payload.get(
                "kept"
            ):  # Tune ran again a trial that had ended: its worker sent the record it kept
                lost = self.lost.get(trial.trial_id) or [
                    {"message": "the trial's worker process died"}
                ]
                self._kept(trial, payload["record"], lost[-1]["message"])
            else:
                self._end(trial, payload["record"])
            return
        if "step" in payload:
            self.state.reports.setdefault(trial.trial_id, []).append(
                {
                    "step": payload["step"],
                    "metrics": dict(payload["metrics"]),
                    "time_s": payload["time_s"],
                }
            )
            meta = payload.get("meta", {})
            if "inputs" not in meta:  # the files the trial read are sent when they change
                kept = self.meta.get(trial.trial_id, {}).get("inputs")
                meta = meta if kept is None else {**meta, "inputs": kept}
            self.meta[trial.trial_id] = meta
            seen = scheduler_result(result, self.state.metric)
            if seen is not None:
                self.state.last_seen[trial.trial_id] = seen
            entry = self.state.of_trial.get(trial.trial_id)
            if entry is not None:
                self.state.hooks.trial_reported(
                    entry[1].trial_id, payload["metrics"], payload["step"], payload["time_s"]
                )

    def _end(self, trial, record: dict, *, counted_lost: bool = False) -> None:
        if trial.trial_id in self.state.records:
            return
        lost = self.lost.get(trial.trial_id, [])
        known = sum(
            1 for e in record["errors"] if e.get("type") == "WorkerDied"
        )  # from the attempt ledger
        if lost and not counted_lost and known < len(lost):
            own = [dict(e, attempt=e["attempt"] + len(lost)) for e in record["errors"]]
            record = dict(record, attempts=record["attempts"] + len(lost), errors=lost + own)
        self.state.records[trial.trial_id] = record
        self.state.outcome.ended += 1
        self.state.hooks.trial_ended(record)

    def _kept(self, trial, record: dict, why: str) -> None:
        """The trial had ended and its worker died before Tune had its result: the record the
        worker kept is the trial's, as it is (its attempts, its errors), the death logged beside it
        (`trial_kept`)."""
        if trial.trial_id in self.state.records:
            return
        self.lost.pop(trial.trial_id, None)  # a death after the trial ended uses no attempt
        entry = self.state.of_trial.get(trial.trial_id)
        if entry is not None:
            self.state.hooks.trial_kept(entry[1], record, why)
        self._end(trial, record, counted_lost=True)

    def _rebuilt(self, trial, status: str, errors: list, attempts: int = 1) -> dict | None:
        """The record of a trial whose worker sent only its reports (or died), from what the driver
        saw."""
        entry = self.state.of_trial.get(trial.trial_id)
        if entry is None:
            return None
        meta = self.meta.get(trial.trial_id, {})
        reports = self.state.reports.get(trial.trial_id, [])
        duration = reports[-1]["time_s"] if reports else 0.0
        record = make_record(
            entry[1],
            status,
            None,
            attempts,
            errors,
            meta.get("started", utc_now()),
            duration,
            reports,
        )
        record["host"] = meta.get("host", record["host"])
        record["pid"] = meta.get("pid", record["pid"])
        record["node_id"] = meta.get("node_id", record.get("node_id"))
        if meta.get("splits"):
            record["splits"] = meta["splits"]
        if meta.get("inputs"):
            record["inputs"] = meta["inputs"]
        record["violations"] = list(
            meta.get("violations", [])
        )  # the one place: an early stop keeps what it broke
        return record

    def on_trial_recover(self, iteration, trials, trial, **info):
        """The trial's worker died (its node was lost) and Tune runs it again from the start; a
        trial that had ended (its worker kept its record) is recorded now, and its new start only
        sends that record back."""
        message = without_colours(
            str(getattr(trial, "error_msg", "") or "the trial's worker process died")
        )
        entry = self.state.of_trial.get(trial.trial_id)
        kept = kept_record(entry[1]) if entry else None
        if kept is not None:
            self._kept(trial, kept, message.splitlines()[0] if message else "")
            return
        lost = self.lost.setdefault(trial.trial_id, [])
        lost.append(
            {
                "attempt": len(lost) + 1,
                "type": "WorkerDied",
                "message": message.splitlines()[0] if message else "",
                "traceback": message,
            }
        )
        self.state.reports.pop(trial.trial_id, None)  # the retry reports from step 1 again
        self.state.last_seen.pop(trial.trial_id, None)

    def on_step_end(self, iteration, trials, **info):
        while self.ended and self.ended[0].is_finished():
            trial = self.ended.popleft()
            forget(trial, self.requests)
            if trial.trial_id in self.state.records:  # what the record was built from
                for seen in (self.state.reports, self.state.last_seen, self.meta):
                    seen.pop(trial.trial_id, None)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.ended.append(trial)
        if trial.trial_id in self.state.records:
            return
        if self.state.completed_at_full_exposure(trial.trial_id):
            status = TrialStatus.COMPLETED  # the worker's fast path: see worker.tune_trainable
        elif trial.trial_id in self.state.stopped:
            status = TrialStatus.EARLY_STOPPED
        else:
            entry = self.state.of_trial.get(trial.trial_id)
            if entry is not None:
                self.state.hooks.trial_cancelled(entry[1], CANCELLED)
            return
        record = self._rebuilt(trial, status, [])
        if record is not None:
            self._end(trial, record)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.ended.append(trial)
        if trial.trial_id in self.state.records:
            return
        message = without_colours(
            str(getattr(trial, "error_msg", "") or "the trial's worker process died")
        )
        entry = self.state.of_trial.get(trial.trial_id)
        kept = kept_record(entry[1]) if entry else None
        if (
            kept is not None
        ):  # the trial had ended before its worker went, and the worker kept its record
            self._kept(trial, kept, message.splitlines()[0] if message else "")
            return
        reports = completed_reports(entry[1]) if entry else None
        if (
            reports is not None
        ):  # a command's attempt had completed (its reports on disk), its record not kept
            self.state.reports[trial.trial_id] = reports
            record = self._rebuilt(trial, TrialStatus.COMPLETED, [])
            if record is not None:
                self.state.hooks.trial_kept(
                    entry[1], record, message.splitlines()[0] if message else ""
                )
                self._end(trial, record, counted_lost=True)
                return
        lost = self.lost.get(trial.trial_id, [])
        # the attempt ledger in trial.dir knows a watchdog's verdict and every attempt on a shared
        # disk
        status, errors, attempts = (
            after_worker_death(entry[1], message) if entry else (TrialStatus.FAILED, [], 1)
        )
        if (
            status == TrialStatus.FAILED and attempts < len(lost) + 1
        ):  # the ledger was on another node's disk
            errors = lost + [
                {
                    "attempt": len(lost) + 1,
                    "type": "WorkerError",
                    "message": message.splitlines()[0] if message else "",
                    "traceback": message,
                }
            ]
            attempts = len(lost) + 1
        record = self._rebuilt(trial, status, errors, attempts=attempts)
        if record is not None:
            self._end(trial, record, counted_lost=True)


def trial_id_of(trial) -> str:
    """A Tune trial's name and folder name: its id. A function of this module, so that Tune's
    snapshot of each trial (which pickles both creators into its JSON) names it (about 80 bytes)
    instead of holding a lambda's code (1.3 KB a creator, a trial)."""
    return trial.trial_id


def forget(trial, requests: dict) -> None:
    """What Tune keeps of a trial that has ended, down to what it reads again: its status, folder
    and error.

    Tune holds every trial of a run until the run ends, with the trial's config (here planner's
    whole trial spec), its flattened copy, its last result and a summary of each number in it:
    about 40 KiB a trivial trial, the driver's memory growth on a large sweep. Once a trial is
    TERMINATED or ERROR none of these is read again: the scheduler and the searcher were told
    (`stop_trial`, `_process_trial_failure`), the record is written, and at the end the
    `ResultGrid` is read only for each trial's folder and error (`_note_unrecorded`). A trial that
    Tune will run again (a retry after its worker died) is never finished, so it is never
    forgotten."""
    metadata = trial.run_metadata
    compat.forget_trial_result(trial)
    metadata.last_result = {}
    metadata.metric_analysis = {}
    metadata.metric_n_steps = {}
    trial.config = {}
    trial.evaluated_params = {}
    trial.experiment_tag = (
        ""  # the suggested config as a string: read only to name a trial's folder, at its start
    )
    _snapshot_entry(trial, metadata)
    # Each trial holds its own copy of the one resource request (Tune deep-copies the experiment
    # per trial), with its bound signature; an ended trial takes the first ended trial's equal copy
    # (requests are compared by value, `PlacementGroupFactory.__eq__`; `requests` maps each to the
    # first).
    trial.placement_group_factory = requests.setdefault(
        trial.placement_group_factory, trial.placement_group_factory
    )


ENDED_ENTRY = "ended; planner's record of it is in the run folder's trials.jsonl"


def _snapshot_entry(trial, metadata) -> None:
    """An ended trial's entry in Tune's experiment snapshot: its id, status and folder.

    Tune writes every trial's state into its snapshot (at the end of the run, and now and then
    while it runs) and caches that JSON on the trial: 4.4 KB a trial, most of it its storage
    context, resource request and checkpoint manager pickled to hex, kept until the run ends and
    written again in the final snapshot (about 8 KiB of the driver's peak a trial). Planner never
    restores a Tune experiment (`--resume` reads the run folder), and the trial was just emptied of
    what a restore would need, so its cached entry says what it was and where its folder is. The
    snapshot itself is still written (it carries the trials' error files to Tune's storage)."""
    compat.cache_snapshot_entry(
        trial,
        {
            "trial_id": trial.trial_id,
            "status": trial.status,
            "relative_logdir": getattr(trial, "relative_logdir", None),
            "planner": ENDED_ENTRY,
        },
        {
            key: getattr(metadata, key, None)
            for key in ("start_time", "num_failures", "error_filename", "pickled_error_filename")
        },
    )


# ---------------------------------------------------------------- the tuning


def run_tuning(sweeps: list[Sweep], **options) -> Outcome:
    """Run every sweep's trials through one Ray Tune `Tuner`; call `hooks` as trials start and end.

    Options: metric, mode, exposure, early_stop, resources, hooks, time_budget_s, storage_dir,
    studies (the journal file of the sweeps' Optuna studies; None: in memory), resumed_at (when the
    run was resumed, for a sweep that ran before), prestart (warm one worker per slot for the
    confirmation that follows, during the tuning tail), and guard (a cluster run's NodeGuard, which
    holds every node until its check passed, and a refused one for good).
    """
    # Tune reads these while it runs (the user's own values win); the process is left as it was.
    # Tune lets a custom searcher keep one trial pending; one per slot keeps every slot fed.
    pending = str(max(2, slots_for(options.get("resources") or {})))
    with environ({**TUNE_ENV, "TUNE_MAX_PENDING_TRIALS_PG": pending}, override=False), _Quiet():
        return _fit(sweeps, **options)


def _fit(
    sweeps: list[Sweep],
    *,
    metric: str,
    mode: str,
    exposure: int,
    early_stop,
    resources: Resources,
    hooks: Hooks,
    time_budget_s: float | None,
    storage_dir: str | None = None,
    studies: str | None = None,
    resumed_at: str | None = None,
    prestart: bool = False,
    guard: NodeGuard | None = None,
) -> Outcome:
    """One Tuner over the sweeps, with the three pieces sharing one TuneState."""
    state = TuneState(sweeps, metric, mode, exposure, hooks)
    total = sum(len(s.specs) for s in sweeps)
    if total == 0:
        return state.outcome
    retries = max(spec.retries for sweep in sweeps for spec in sweep.specs)
    own_storage = storage_dir is None
    storage = storage_dir or tempfile.mkdtemp(prefix="planner-tune-")
    tuner = tune.Tuner(
        tune.with_resources(tune_trainable, resources_for(resources)),
        tune_config=tune.TuneConfig(
            search_alg=SweepSearch(state, run_studies(studies), resumed_at),
            scheduler=PerSweepScheduler(state, early_stop),
            num_samples=total,
            reuse_actors=True,
            time_budget_s=time_budget_s,
            trial_dirname_creator=trial_id_of,
            trial_name_creator=trial_id_of,
        ),
        run_config=tune.RunConfig(
            name="tune",
            storage_path=storage,
            verbose=0,
            callbacks=[Recorder(state, prestart=prestart, resources=resources, guard=guard)],
            stop=_StopAll(hooks, guard),  # fail fast (planner._dispatch.failfast), no node left
            log_to_file=False,
            # A raise is retried inside the trial (run_trial); Tune's retries
            # only see a worker that died, e.g. on a node that was lost.
            failure_config=tune.FailureConfig(max_failures=retries),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
            progress_reporter=_SilentReporter(),
        ),
    )
    t0 = time.monotonic()
    try:
        with (
            compat.callbacks_tagged_without_integrations(Recorder),
            compat.cancelled_actors_forgotten(),
            compat.trainable_looked_up_once(),
            compat.trial_actors_on_inherited_environment(embedded_worker_environ()),
        ):
            _note_unrecorded(state, tuner.fit())
    finally:
        if own_storage:
            shutil.rmtree(storage, ignore_errors=True)
    if guard is not None and (why := guard.none_can_run()) is not None:
        raise RunError(why)
    if (
        state.outcome.ended < total
        and time_budget_s is not None
        and time.monotonic() - t0 >= time_budget_s * 0.98
    ):
        state.outcome.stopped = StopReason.BUDGET
    return state.outcome


class _StopAll(tune.Stopper):
    """Stops the whole tuning when the driver says it must (hooks.should_stop: the run fails
    fast)."""

    def __init__(self, hooks: Hooks, guard: NodeGuard | None = None):
        self.hooks, self.guard = hooks, guard

    def __call__(self, trial_id, result) -> bool:
        return False

    def stop_all(self) -> bool:
        return bool(self.hooks.should_stop()) or (
            self.guard is not None and self.guard.none_can_run() is not None
        )


def _note_unrecorded(state: TuneState, grid) -> None:
    """Trials Tune ended with no record (no callback tells of them: e.g. `Could not re-use actor`),
    with Tune's reason, in `outcome.unrecorded`; the driver runs them again. A trial folder is
    named by its Tune trial id (trial_dirname_creator)."""
    for result in grid:
        tune_id = os.path.basename(str(result.path or "").rstrip("/"))
        entry = state.of_trial.get(tune_id)
        if entry is None or tune_id in state.records:
            continue
        error = result.error
        message = (
            (str(error).strip().splitlines() or [type(error).__name__])[-1]
            if error is not None
            else ""
        )
        state.outcome.unrecorded[entry[1].trial_id] = (
            message or "Ray Tune ended the trial without running it"
        )


class _Quiet:
    """Silence Tune's and Optuna's chatter (the planner shows its own progress); errors still
    show."""

    names = ("ray.tune", "ray.train", "ray.air", "optuna")

    def __enter__(self):
        self.levels = {}
        for name in self.names:
            logger = logging.getLogger(name)
            self.levels[name] = logger.level
            logger.setLevel(logging.ERROR)
        self.optuna_level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        return self

    def __exit__(self, *exc):
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)
        optuna.logging.set_verbosity(self.optuna_level)
        return False


class _SilentReporter(ProgressReporter):
    def should_report(self, trials, done=False):
        return False

    def report(self, trials, done, *sys_info):
        pass


def _plain(value: Any) -> Any:
    """numpy scalars from Optuna -> plain Python values (for JSON and the trainable)."""
    if hasattr(value, "item") and not isinstance(value, list | dict | str):
        return value.item()
    return value


def _with_params(
    template: TrialSpec, params: dict[str, Any], raw: dict[str, Any] | None = None
) -> TrialSpec:
    return replace(template, params=params, config=apply_params(template.config, params, raw))
