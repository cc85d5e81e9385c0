"""Dispatch to Ray Tune: tuning trials and confirmation tasks out, records back to the driver.

Tuning runs through Ray Tune: ONE `Tuner` for all the sweeps of a run, so the
trials of every arm and tuning seed share the cluster's slots and the worker
processes (`reuse_actors=True`). Each sweep (an arm at a tuning seed) keeps
its own Optuna study (`OptunaSearch` with the declared sampler and seed, over
the arm's space) and its own early-stopping rule (ASHA or the median rule on
the reported step, or none): `_Sweeps` and `_PerSweepScheduler` route each
Tune trial to its sweep's searcher and scheduler, so arms never compete with
each other inside a rung and every arm gets exactly `trials_per_arm` trials
per tuning seed.

Confirmation runs fixed configs, which need none of Tune's machinery: plain
Ray tasks, at most one per free slot, so the driver knows when each started
(for `max_trial_time`) and can stop at `max_wall_time`.

Records are built in the workers (`planner._trial.protocol.run_trial`) and returned as
values; the driver writes them. A trial stopped by its scheduler never
returns, so the driver rebuilds its record from the reports it received.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from planner._trial.protocol import TrialSpec, make_record, ray_node_id, run_trial, utc_now

if TYPE_CHECKING:  # the workers import this module; pydantic and the model stay out of them
    from planner._contract.model import Resources

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
WORKER_ENV = {"RAY_CHDIR_TO_TRIAL_DIR": "0", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}


@dataclass
class Sweep:
    """One Optuna study: an arm at a tuning seed. `specs[i]` is the trial at position i."""

    arm: str
    seed: int
    specs: list[TrialSpec]  # in order of index; only the trials still to run
    space: dict[str, Any]  # {dotted key: optuna distribution}
    sampler: Any  # an optuna sampler
    evaluated: list[tuple[dict, float]] = field(default_factory=list)  # finished trials of a resumed sweep
    raw: dict[str, Any] | None = None  # the arm's config with interpolations unresolved (apply_params)


@dataclass
class Hooks:
    """What the driver does as trials start and end (write the record, update progress)."""

    trial_started: Callable[[TrialSpec], None]
    trial_ended: Callable[[dict], None]
    trial_cancelled: Callable[[TrialSpec, str], None]

    def __getstate__(self):  # Tune pickles its searcher and callbacks; the driver's hooks stay behind
        return {}

    def __setstate__(self, state):
        self.trial_started = self.trial_ended = self.trial_cancelled = _ignore


def _ignore(*args, **kwargs) -> None:
    return None


@dataclass
class Outcome:
    stopped: str | None = None  # None | "budget" | "interrupted"
    ended: int = 0


# ---------------------------------------------------------------- the worker side

def _tune_trainable(config: dict) -> dict | None:
    """The Ray Tune function trainable: run one trial, streaming each report to Tune.

    A trial that completed on its first attempt returns nothing: the driver builds
    its record from the reports it streamed (saving Tune one round trip per trial).
    Any other ending sends the worker's full record as a last result.
    """
    from ray import tune

    spec = TrialSpec(**config["planner_spec"])
    meta = {"started": utc_now(), "host": os.uname().nodename, "pid": os.getpid(), "node_id": ray_node_id()}

    sent: dict = {}

    def forward(step: int, metrics: dict[str, float], elapsed: float, violations: list, splits=None) -> None:
        sent["splits"] = splits or {}  # the splits logged so far travel with the reports (docs/data.md)
        tune.report({"planner": {"step": step, "metrics": metrics, "time_s": elapsed,
                                 "meta": {**meta, "violations": list(violations), **({"splits": splits} if splits else {})}}})

    record = run_trial(spec, forward)
    if (record["status"] == "completed" and record["attempts"] == 1 and not record["errors"]
            and not record.get("resumed") and record.get("splits", {}) == sent.get("splits", {})):
        return None
    return {"planner": {"record": record}}


def _confirm_task(spec: dict) -> dict:
    return run_trial(TrialSpec(**spec))


def _warm_task(trainable: str, path: tuple[str, ...]) -> int:
    """Start a worker process and import what a confirmation trial needs, so the first ones start at once."""
    import sys

    from planner._trial.protocol import load_trainable

    for folder in reversed(path):
        if folder not in sys.path and os.path.isdir(folder):
            sys.path.insert(0, folder)
    try:
        load_trainable(trainable, fresh=False)
    except Exception:  # the trial itself will report it
        pass
    return os.getpid()


def prestart_workers(template: TrialSpec, resources: Resources) -> list:
    """One warm-up task per slot; they queue until the tuning tail frees slots, then leave warm idle workers."""
    import ray

    from planner._dispatch.cluster import task_options

    task = ray.remote(_warm_task).options(**task_options(resources), max_retries=0)
    return [task.remote(template.trainable, template.path) for _ in range(slots_for(resources))]


# ---------------------------------------------------------------- the driver side: tuning

def _make_scheduler(early_stop, metric: str, mode: str, exposure: int):
    from ray.tune.schedulers import ASHAScheduler, MedianStoppingRule

    if early_stop.rule == "asha":
        return ASHAScheduler(time_attr="step", metric=metric, mode=mode, max_t=exposure,
                             grace_period=early_stop.grace, reduction_factor=early_stop.reduction_factor)
    if early_stop.rule == "median":
        return MedianStoppingRule(time_attr="step", metric=metric, mode=mode,
                                  grace_period=early_stop.grace)
    return None


def _scheduler_result(result: dict, metric: str) -> dict | None:
    """What a sweep's scheduler and searcher see of a Tune result: the step and the selection metric.

    Tune hands schedulers and searchers the result flattened ("planner/step"),
    callbacks the nested one; both forms are read here.
    """
    payload = result.get("planner")
    if isinstance(payload, dict) and "step" in payload:
        step, value, elapsed = payload["step"], payload["metrics"].get(metric), payload.get("time_s", 0.0)
    elif "planner/step" in result:
        step, value, elapsed = (result["planner/step"], result.get(f"planner/metrics/{metric}"),
                                result.get("planner/time_s", 0.0))
    else:
        return None
    if value is None or not math.isfinite(value):
        return None
    return {"step": step, "training_iteration": step, metric: value, "time_total_s": elapsed}


def run_tuning(sweeps: list[Sweep], **options) -> Outcome:
    """Run every sweep's trials through one Ray Tune `Tuner`; call `hooks` as trials start and end.

    Options: metric, mode, exposure, early_stop, resources, hooks, time_budget_s, storage_dir, and
    prestart (warm one worker per slot for the confirmation that follows, during the tuning tail).
    """
    saved = {key: os.environ.get(key) for key in [*TUNE_ENV, "TUNE_MAX_PENDING_TRIALS_PG"]}
    try:
        for key, value in TUNE_ENV.items():
            os.environ.setdefault(key, value)
        # Tune lets a custom searcher keep one trial pending; one per slot keeps every slot fed.
        os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", str(max(2, slots_for(options.get("resources") or {}))))
        with _Quiet():
            return _run_tuning(sweeps, **options)
    finally:  # Tune reads these while it runs; leave the process as it was
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_tuning(sweeps: list[Sweep], *, metric: str, mode: str, exposure: int, early_stop,
                resources: Resources, hooks: Hooks, time_budget_s: float | None,
                storage_dir: str | None = None, prestart: bool = False) -> Outcome:
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler
    from ray.tune.search import Searcher
    from ray.tune.search.optuna import OptunaSearch

    total = sum(len(s.specs) for s in sweeps)
    outcome = Outcome()
    if total == 0:
        return outcome
    retries = max(spec.retries for sweep in sweeps for spec in sweep.specs)
    warming: list = []

    class _Sweeps(Searcher):
        """Suggests the next trial of each sweep in turn, from that sweep's own Optuna study."""

        def __init__(self):
            super().__init__(metric=None, mode=None)
            self.searchers = []
            for sweep in sweeps:
                searcher = OptunaSearch(space=sweep.space, metric=metric, mode=mode, sampler=sweep.sampler,
                                        points_to_evaluate=[p for p, _ in sweep.evaluated] or None,
                                        evaluated_rewards=[v for _, v in sweep.evaluated] or None)
                self.searchers.append(searcher)
            self.next = [0] * len(sweeps)
            self.turn = 0
            self.of_trial: dict[str, tuple[int, TrialSpec]] = {}

        def set_search_properties(self, metric, mode, config, **spec):
            return True

        def suggest(self, trial_id):
            for _ in range(len(sweeps)):
                k = self.turn
                self.turn = (self.turn + 1) % len(sweeps)
                if self.next[k] < len(sweeps[k].specs):
                    template = sweeps[k].specs[self.next[k]]
                    self.next[k] += 1
                    params = self.searchers[k].suggest(trial_id)
                    params = {key: _plain(value) for key, value in params.items()}
                    spec = _with_params(template, params, sweeps[k].raw)
                    self.of_trial[trial_id] = (k, spec)
                    return {"planner_spec": asdict(spec)}
            return Searcher.FINISHED

        def on_trial_result(self, trial_id, result):
            seen = _scheduler_result(result, metric)
            if seen is not None and trial_id in self.of_trial:
                self.searchers[self.of_trial[trial_id][0]].on_trial_result(trial_id, seen)

        def on_trial_complete(self, trial_id, result=None, error=False):
            if trial_id not in self.of_trial:
                return
            k = self.of_trial[trial_id][0]
            record = recorder.records.get(trial_id)
            if record is not None:
                status, reports = record["status"], record["reports"]
            else:  # not written yet: a fast-path completion, an early stop, or a cancellation
                reports = recorder.reports.get(trial_id, [])
                complete = trial_id not in scheduler.stopped and reports and reports[-1]["step"] == exposure
                status = "completed" if complete else "early_stopped"
            final = None
            if status == "completed":
                values = [r["metrics"][metric] for r in reports if metric in r["metrics"]]
                final = values[-1] if values and isinstance(values[-1], float) else None
            if final is not None:
                self.searchers[k].on_trial_complete(trial_id, {metric: final}, error=False)
            else:  # stopped early (pruned), failed, diverged: never a final value
                self.searchers[k].on_trial_complete(trial_id, None, error=status != "early_stopped")

    class _PerSweepScheduler(FIFOScheduler):
        """Routes each trial to its sweep's own early-stopping rule; never stops a trial at full exposure."""

        def __init__(self):
            super().__init__()
            self.rules = [_make_scheduler(early_stop, metric, mode, exposure) for _ in sweeps]
            self.stopped: set[str] = set()

        def _rule(self, trial):
            entry = searcher.of_trial.get(trial.trial_id)
            return None if entry is None else self.rules[entry[0]]

        def on_trial_add(self, tc, trial):
            rule = self._rule(trial)
            if rule is not None:
                rule.on_trial_add(tc, trial)

        def on_trial_result(self, tc, trial, result):
            rule = self._rule(trial)
            seen = _scheduler_result(result, metric)
            if rule is None or seen is None:
                return TrialScheduler.CONTINUE
            decision = rule.on_trial_result(tc, trial, seen)
            if decision == TrialScheduler.STOP and seen["step"] < exposure:
                self.stopped.add(trial.trial_id)
                return TrialScheduler.STOP
            return TrialScheduler.CONTINUE

        def on_trial_complete(self, tc, trial, result):
            rule = self._rule(trial)
            if rule is None:
                return
            seen = _last_seen.get(trial.trial_id)
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

    _last_seen: dict[str, dict] = {}

    class _Recorder(tune.Callback):
        """Turns Tune's trial events into planner records, as they happen."""

        def __init__(self):
            self.records: dict[str, dict] = {}
            self.started: set[str] = set()  # trial ids started (a restart after a dead worker is not a new trial)
            self.reports: dict[str, list] = {}
            self.meta: dict[str, dict] = {}
            self.lost: dict[str, list] = {}  # attempts whose worker died (a node lost), before Tune's retry

        def on_trial_start(self, iteration, trials, trial, **info):
            entry = searcher.of_trial.get(trial.trial_id)
            if entry is not None and trial.trial_id not in self.started:
                self.started.add(trial.trial_id)
                hooks.trial_started(entry[1])
            if prestart and not warming and len(self.started) == total:
                # The last tuning trials run and none waits: warm one worker per slot for the confirmation,
                # so its first trials do not pay for starting processes.
                warming.extend(prestart_workers(sweeps[0].specs[0], resources))

        def on_trial_result(self, iteration, trials, trial, result, **info):
            payload = result.get("planner") or {}
            if "record" in payload:
                self._end(trial, payload["record"])
                return
            if "step" in payload:
                self.reports.setdefault(trial.trial_id, []).append(
                    {"step": payload["step"], "metrics": dict(payload["metrics"]), "time_s": payload["time_s"]})
                self.meta[trial.trial_id] = payload.get("meta", {})
                seen = _scheduler_result(result, metric)
                if seen is not None:
                    _last_seen[trial.trial_id] = seen

        def _end(self, trial, record):
            if trial.trial_id in self.records:
                return
            lost = self.lost.get(trial.trial_id, [])
            known = sum(1 for e in record["errors"] if e.get("type") == "WorkerDied")  # from the attempt ledger
            if lost and not record.get("_counted_lost") and known < len(lost):
                own = [dict(e, attempt=e["attempt"] + len(lost)) for e in record["errors"]]
                record = dict(record, attempts=record["attempts"] + len(lost), errors=lost + own)
            record.pop("_counted_lost", None)
            self.records[trial.trial_id] = record
            outcome.ended += 1
            hooks.trial_ended(record)

        def _rebuilt(self, trial, status: str, errors: list, attempts: int = 1) -> dict | None:
            entry = searcher.of_trial.get(trial.trial_id)
            if entry is None:
                return None
            spec = entry[1]
            meta = self.meta.get(trial.trial_id, {})
            reports = self.reports.get(trial.trial_id, [])
            duration = reports[-1]["time_s"] if reports else 0.0
            record = make_record(spec, status, None, attempts, errors, meta.get("started", utc_now()), duration,
                                 reports)
            record["violations"] = list(meta.get("violations", []))  # an early stop keeps what it broke
            record["host"] = meta.get("host", record["host"])
            record["pid"] = meta.get("pid", record["pid"])
            record["node_id"] = meta.get("node_id", record.get("node_id"))
            if meta.get("splits"):
                record["splits"] = meta["splits"]
            record["violations"] = list(meta.get("violations", []))
            return record

        def on_trial_recover(self, iteration, trials, trial, **info):
            """The trial's worker died (its node was lost) and Tune runs it again from the start."""
            message = str(getattr(trial, "error_msg", "") or "the trial's worker process died")
            lost = self.lost.setdefault(trial.trial_id, [])
            lost.append({"attempt": len(lost) + 1, "type": "WorkerDied",
                         "message": message.splitlines()[0] if message else "", "traceback": message})
            self.reports.pop(trial.trial_id, None)  # the retry reports from step 1 again
            _last_seen.pop(trial.trial_id, None)

        def on_trial_complete(self, iteration, trials, trial, **info):
            if trial.trial_id in self.records:
                return
            reports = self.reports.get(trial.trial_id, [])
            if trial.trial_id not in scheduler.stopped and reports and reports[-1]["step"] == exposure:
                record = self._rebuilt(trial, "completed", [])  # the worker's fast path: see _tune_trainable
                if record is not None:
                    record["violations"] = list(self.meta.get(trial.trial_id, {}).get("violations", []))
                    self._end(trial, record)
                return
            if trial.trial_id in scheduler.stopped:
                record = self._rebuilt(trial, "early_stopped", [])
                if record is not None:
                    self._end(trial, record)
                return
            entry = searcher.of_trial.get(trial.trial_id)
            if entry is not None:
                hooks.trial_cancelled(entry[1], "stopped before it ended (budget or interruption)")

        def on_trial_error(self, iteration, trials, trial, **info):
            if trial.trial_id in self.records:
                return
            message = str(getattr(trial, "error_msg", "") or "the trial's worker process died")
            entry = searcher.of_trial.get(trial.trial_id)
            lost = self.lost.get(trial.trial_id, [])
            # the attempt ledger in trial.dir knows a watchdog's verdict and every attempt on a shared disk
            status, errors, attempts = _after_worker_death(entry[1], message) if entry else ("failed", [], 1)
            if status == "failed" and attempts < len(lost) + 1:  # the ledger was on another node's disk
                errors = lost + [{"attempt": len(lost) + 1, "type": "WorkerError",
                                  "message": message.splitlines()[0] if message else "", "traceback": message}]
                attempts = len(lost) + 1
            record = self._rebuilt(trial, status, errors, attempts=attempts)
            if record is not None:
                record["_counted_lost"] = True
                self._end(trial, record)

    searcher = _Sweeps()
    scheduler = _PerSweepScheduler()
    recorder = _Recorder()
    own_storage = storage_dir is None
    storage = storage_dir or tempfile.mkdtemp(prefix="planner-tune-")
    from planner._dispatch.cluster import resources_for

    trainable = tune.with_resources(_tune_trainable, resources_for(resources))
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, scheduler=scheduler, num_samples=total,
                                    reuse_actors=True, time_budget_s=time_budget_s,
                                    trial_dirname_creator=lambda trial: trial.trial_id,
                                    trial_name_creator=lambda trial: trial.trial_id),
        run_config=tune.RunConfig(name="tune", storage_path=storage, verbose=0, callbacks=[recorder],
                                  log_to_file=False,
                                  # A raise is retried inside the trial (run_trial); Tune's retries
                                  # only see a worker that died, e.g. on a node that was lost.
                                  failure_config=tune.FailureConfig(max_failures=retries),
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
                                  progress_reporter=_SilentReporter()),
    )
    t0 = time.monotonic()
    try:
        tuner.fit()
    finally:
        if own_storage:
            shutil.rmtree(storage, ignore_errors=True)
    if outcome.ended < total and time_budget_s is not None and time.monotonic() - t0 >= time_budget_s * 0.98:
        outcome.stopped = "budget"
    return outcome


class _Quiet:
    """Silence Tune's and Optuna's chatter (the planner shows its own progress); errors still show."""

    names = ("ray.tune", "ray.train", "ray.air", "optuna")

    def __enter__(self):
        import logging

        self.levels = {}
        for name in self.names:
            logger = logging.getLogger(name)
            self.levels[name] = logger.level
            logger.setLevel(logging.ERROR)
        try:
            import optuna

            self.optuna_level = optuna.logging.get_verbosity()
            optuna.logging.set_verbosity(optuna.logging.ERROR)
        except ImportError:
            self.optuna_level = None
        return self

    def __exit__(self, *exc):
        import logging

        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)
        if self.optuna_level is not None:
            import optuna

            optuna.logging.set_verbosity(self.optuna_level)
        return False


def _plain(value: Any) -> Any:
    """numpy scalars from Optuna -> plain Python values (for JSON and the trainable)."""
    if hasattr(value, "item") and not isinstance(value, list | dict | str):
        return value.item()
    return value


def _with_params(template: TrialSpec, params: dict[str, Any], raw: dict[str, Any] | None = None) -> TrialSpec:
    from planner._contract.paths import apply_params

    data = asdict(template)
    data["params"] = params
    data["config"] = apply_params(template.config, params, raw)
    return TrialSpec(**data)


def _silent_reporter_class():
    from ray.tune import ProgressReporter

    class Silent(ProgressReporter):
        def should_report(self, trials, done=False):
            return False

        def report(self, trials, done, *sys_info):
            pass

    return Silent


def _SilentReporter():  # noqa: N802 - a factory that reads like a class
    return _silent_reporter_class()()


# ---------------------------------------------------------------- the driver side: confirmation

BACKSTOP_S = 10.0  # past max_trial_time + this, the driver kills a trial its worker's watchdog did not stop
STARTUP_S = 120.0  # what a trial whose start the driver cannot see may spend waiting for its worker


def _running_for(spec: TrialSpec, submitted_at: float) -> float:
    """Seconds the trial's current attempt has run: from its ledger when the driver can read it (the
    trial may wait long for a worker to start), else since it was submitted."""
    from planner._trial.attempts import Ledger

    ledger = Ledger.load(spec.dir, str(spec.extra.get("session", "")))
    mine = ledger.mine()
    if not mine:  # not started yet (a worker can take long to start), or its ledger is on another node
        return time.monotonic() - submitted_at - STARTUP_S
    return time.time() - mine[-1].get("started_epoch", time.time())


def _after_worker_death(spec: TrialSpec, message: str, traceback: str = "") -> tuple[str, list, int]:
    """After a worker died under `spec`: ("retry" | a final status, the errors, attempts used).

    The attempt ledger in trial.dir (planner._trial.attempts) says whether a watchdog
    killed it for oom/timeout (final, never retried), and how many attempts this
    run has used (a worker death uses a retry, like a raise).
    """
    from planner._trial.attempts import Ledger

    ledger = Ledger.load(spec.dir, str(spec.extra.get("session", "")))
    terminal = ledger.terminal()
    errors = ledger.errors(died_message=f"the worker process died: {message}")
    for error in errors:
        if error["type"] == "WorkerDied" and traceback and not error["traceback"]:
            error["traceback"] = traceback
    used = max(ledger.used, 1)
    if terminal is not None:
        return terminal["ended"], errors, used
    if not ledger.used:  # no ledger (another node's disk): count on the driver's side
        errors = [{"attempt": 1, "type": "WorkerDied", "message": f"the worker process died: {message}",
                   "traceback": traceback}]
    if used < 1 + spec.retries and ledger.used:
        return "retry", errors, used
    return "failed", errors, used


def slots_for(resources: Resources | Mapping[str, Any]) -> int:
    """How many trials of `resources` (the contract's budget.resources) the connected Ray cluster runs at once (at least 1)."""
    import ray

    from planner._dispatch.cluster import resources_for

    total = ray.cluster_resources()
    counts = []
    for name, need in resources_for(resources).items():
        if need > 0:
            counts.append(int(total.get(name, 0) // need))
    return max(1, min(counts) if counts else 1)


def run_fixed(specs: list[TrialSpec], *, resources: Resources, hooks: Hooks,
              max_trial_time_s: float | None, deadline: float | None) -> Outcome:
    """Run fixed-config trials as plain Ray tasks, one per free slot; a dead worker is retried like a raise."""
    import ray

    outcome = Outcome()
    if not specs:
        return outcome
    from planner._dispatch.cluster import task_options

    task = ray.remote(_confirm_task).options(**task_options(resources), max_retries=0, retry_exceptions=False)
    slots = slots_for(resources)
    queue = list(specs)
    attempts: dict[str, int] = {}
    running: dict[Any, tuple[TrialSpec, float, str]] = {}
    try:
        while queue or running:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                outcome.stopped = "budget"
                break
            while queue and len(running) < slots:
                spec = queue.pop(0)
                attempts[spec.trial_id] = attempts.get(spec.trial_id, 0) + 1
                if attempts[spec.trial_id] == 1:
                    hooks.trial_started(spec)
                running[task.remote(asdict(spec))] = (spec, time.monotonic(), utc_now())
            wait_s = 0.5
            if deadline is not None:
                wait_s = max(0.01, min(wait_s, deadline - time.monotonic()))
            done, _ = ray.wait(list(running), num_returns=1, timeout=wait_s)
            for ref in done:
                spec, started_at, started = running.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as error:  # the worker died (crash, SIGKILL, a watchdog's kill): retried like a raise
                    message = str(error).splitlines()[0] if str(error) else type(error).__name__
                    status, errors, used = _after_worker_death(spec, message, traceback=str(error))
                    if status == "retry":
                        queue.insert(0, spec)
                        continue
                    record = make_record(spec, status, None, used, errors, started, time.monotonic() - started_at)
                outcome.ended += 1
                hooks.trial_ended(record)
            if max_trial_time_s is not None:  # the worker's watchdog stops it first; this is the backstop
                for ref, (spec, started_at, started) in list(running.items()):
                    if _running_for(spec, started_at) > max_trial_time_s + BACKSTOP_S:
                        ray.cancel(ref, force=True)
                        running.pop(ref)
                        record = make_record(spec, "timeout", None, attempts[spec.trial_id],
                                             [{
                                                 "attempt": attempts[spec.trial_id], "type": "Timeout",
                                                 "message": f"stopped after budget.max_trial_time of {max_trial_time_s:g} s",
                                                 "traceback": ""}], started, time.monotonic() - started_at)
                        outcome.ended += 1
                        hooks.trial_ended(record)
    except KeyboardInterrupt:
        outcome.stopped = "interrupted"
    finally:
        for ref, (spec, _, _) in running.items():
            ray.cancel(ref, force=True)
            hooks.trial_cancelled(spec, "stopped before it ended (budget or interruption)")
    return outcome
