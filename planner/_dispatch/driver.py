"""`plan run`: one contract from the YAML file to a decision per arm.

validate -> freeze the run folder -> tune (Ray Tune) -> select -> confirm (Ray
tasks) -> decide -> decisions.json. Every ended trial is written as it ends;
the run state (completed / budget_exhausted / interrupted / failed) is kept
apart from the decisions.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner._core.errors import (
    EXIT_INCOMPLETE,
    EXIT_NO_VALUE,
    EXIT_OK,
    PlannerError,
    RunError,
    UsageError,
)
from planner._core.records import error_groups, final_value, finite_final_value
from planner._core.text import noun, shown_path, yaml_value
from planner._dispatch.session import (
    claim_stop_signals,
    restore_stop_signals,
    start_ray,
    trainable_search_path,
)
from planner._plan.trials import Plan, make_plan
from planner._store.writer import RunStore, read_jsonl
from planner._trial.protocol import TrialSpec

if TYPE_CHECKING:
    from planner._dispatch.looks import SequentialConfirmation

FAILED_STATUSES = ("failed", "protocol_error", "timeout", "oom")


@dataclass
class RunResult:
    run_dir: Path
    state: str
    reason: str
    decisions: list[dict]
    wall_time_s: float
    trials_ended: int
    failures: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)  # failed trials by error, first occurrence first
    no_value_arms: list[str] = field(default_factory=list)  # arms without one usable confirmation value
    heldout_exposures: int = 0  # tuning trials that reported metric.heldout
    heldout: str | None = None
    findings: list[dict] = field(default_factory=list)  # decisions.json `findings` (seeds_identical, ...)
    resume_command: str | None = None  # how to continue a run that was stopped (Ctrl-C, SIGTERM)
    resumed: dict | None = None  # on --resume: trials kept, run again, not started yet

    @property
    def exit_code(self) -> int:
        if self.state != "completed":
            return EXIT_INCOMPLETE
        return EXIT_NO_VALUE if self.no_value_arms else EXIT_OK


# ------------------------------------------------------------------ loading and validating

def load_and_validate(contract_path: str | os.PathLike, lineage=None):
    """(contract, contract_dir, composed configs, plan, the configs with interpolations unresolved),
    or ContractError / UsageError.

    The contract is loaded, composed and checked once, by `plan validate`'s own
    `load_contract`; the plan is made from it and must fit `budget.max_trials`.
    """
    from planner._contract.validate import load_contract
    from planner._dispatch.trials import at_budget

    path = Path(contract_path)
    if not path.is_file():
        raise UsageError(f"cannot read {contract_path}: no such file")
    loaded = load_contract(path, lineage)  # lineage: a baseline from a run or a line (planner._lineage)
    configs, raw_configs = at_budget(loaded.contract, loaded.configs, loaded.raw_configs)  # as the trials get them
    return loaded.contract, path.parent.resolve(), configs, make_plan(loaded.contract), raw_configs








# ------------------------------------------------------------------ the decision

def _decide_arms(contract, confirm_records: list[dict]) -> list[dict]:
    """The contract's decision per treatment arm (planner._stats.decide), as decisions.json rows.

    A confirmation record becomes an Outcome: its seed, the last reported value
    of the decision metric, and its status; a planned seed with no record is
    pending, which makes the arm incomplete.
    """
    from planner._stats.decide import Outcome, decide

    metric = contract.metric.decision_metric
    confirm = {contract.baseline.name: [], **{arm.name: [] for arm in contract.arms}}
    latest: dict[tuple[str, int], dict] = {}
    for record in confirm_records:
        if record.get("phase") == "confirm" and record.get("arm") in confirm and record.get("seed") in contract.seeds:
            latest[(record["arm"], record["seed"])] = record  # a re-run after resume supersedes
    for (arm, seed), record in latest.items():
        confirm[arm].append(Outcome(seed, final_value(record, metric), record.get("status", "failed")))
    decisions = decide(contract.acceptance, contract.metric.mode, confirm, contract.baseline.name,
                       planned_seeds=list(contract.seeds), diverged_value=contract.failures.diverged_value,
                       arms=[arm.name for arm in contract.arms], metric=metric)
    return [d.as_dict() for d in decisions]


def _invalid_on_data(contract, rows: list[dict], confirm_records: list[dict]) -> list[dict]:
    """Arms whose confirmation trials (or the baseline's) carry a data violation: decision `invalid`."""
    from planner._data.checks import invalid_reasons
    from planner._stats.decide import mark_invalid

    latest: dict[tuple, dict] = {}
    for record in confirm_records:
        latest[(record.get("arm"), record.get("seed"))] = record
    reasons = invalid_reasons(latest.values(), contract.baseline.name, [arm.name for arm in contract.arms])
    return mark_invalid(rows, reasons)









# ------------------------------------------------------------------ the run

class _Runner:
    def __init__(self, contract, contract_dir: Path, configs: dict[str, dict], plan: Plan, store: RunStore,
                 display_factory, previous_wall_s: float = 0.0, *, raw_configs: dict[str, dict] | None = None):
        from planner._dispatch.progress import Progress
        from planner._dispatch.trials import Dispatch

        self.contract, self.contract_dir, self.configs, self.plan = contract, contract_dir, configs, plan
        self.raw_configs: dict[str, dict] = dict(raw_configs or {})  # unresolved: tuned values go in first
        self.store = store
        self.t0 = time.monotonic()
        self.previous_wall_s = previous_wall_s
        self._state_written = 0.0
        planned: dict[tuple[str, str], int] = {}
        for t in plan.trials:
            planned[(t.phase, t.arm)] = planned.get((t.phase, t.arm), 0) + 1
        self.progress = Progress(list(plan.arms), planned, metric=contract.metric.name, mode=contract.metric.mode,
                                 decision_metric=contract.metric.decision_metric,
                                 max_wall_time_s=contract.budget.max_wall_time_s)
        self.display = display_factory(self.progress)
        # the trials' specs and the hooks that log them, shared with reeval; it hears back through
        # started/ended/cancelled below
        self.dispatch = Dispatch.open(contract, contract_dir, configs, store, listener=self, raw_configs=self.raw_configs,
                                      records={r["trial_id"]: r for r in store.trials()
                                               if r.get("phase") != "reeval"})  # plan reeval trials are not the plan's
        self.records = self.dispatch.records
        for record in self.records.values():
            self.progress.ended(record, was_running=False)
        # what a sequential confirmation leaves for the decision and the run's end (planner._dispatch.looks)
        self.sequential: SequentialConfirmation | None = None
        self.not_needed: set[str] = set()

    @property
    def search_path(self) -> list[str]:
        return self.dispatch.search_path

    # time
    def wall_s(self) -> float:
        return self.previous_wall_s + time.monotonic() - self.t0

    def remaining_s(self) -> float | None:
        limit = self.contract.budget.max_wall_time_s
        return None if limit is None else limit - self.wall_s()

    def write_state(self, state: str, reason: str = "", *, every_s: float = 0.0) -> None:
        """Rewrite state.json (at most once per `every_s` seconds while running)."""
        now = time.monotonic()
        if every_s and now - self._state_written < every_s:
            return
        self._state_written = now
        self.store.write_state(state, reason=reason, wall_time_s=self.wall_s(), trials_ended=len(self.records))

    # the live progress hears of each trial after the run folder (Dispatch's listener)
    def started(self, spec: TrialSpec) -> None:
        self.progress.started(spec.phase, spec.arm)
        self.display.update()

    def ended(self, record: dict) -> None:
        from planner._data.checks import data_violations

        for v in data_violations(record):  # at once, as the trial ends (docs/data.md)
            self.display.note(f"data violation: {v['kind']} in {record['trial_id']}: {v['message']}")
        self.progress.ended(record)
        heldout = [v for v in record.get("violations") or [] if v.get("kind") == "heldout_in_tuning"]
        if heldout and not getattr(self, "_warned_heldout", False):  # at once, not only in the summary
            self._warned_heldout = True
            self.display.note(f"warning: {record['trial_id']} reported the held-out metric {heldout[0].get('metric')} "
                              f"at step {heldout[0].get('step')} while tuning: test exposure (the run summary counts "
                              "every such trial)")
        self.write_state("running", every_s=1.0)
        self.display.update(record)

    def cancelled(self, spec: TrialSpec, why: str) -> None:
        self.progress.cancelled(spec.phase, spec.arm)
        self.display.update()

    def spec(self, trial, config: dict) -> TrialSpec:
        return self.dispatch.spec(trial, config)

    # phases
    def tune(self) -> str | None:
        from planner._dispatch.search import make_sampler, to_optuna
        from planner._dispatch.tune import Sweep, run_tuning
        from planner._plan.space import arm_space

        tuning = self.contract.tuning
        sweeps = []
        for group in self.plan.tune_groups:
            trials = [t for t in self.plan.tune if t.arm == group.arm and t.seed == group.seed]
            done = [self.records[t.trial_id] for t in trials if t.trial_id in self.records]
            todo = [t for t in trials if t.trial_id not in self.records]
            if not todo:
                continue
            space = arm_space(tuning, group.arm)
            evaluated = [(r["params"], v) for r in done if r["status"] == "completed"
                         for v in [finite_final_value(r, self.contract.metric.name)] if v is not None]
            sweeps.append(Sweep(group.arm, group.seed, [self.spec(t, self.configs[group.arm]) for t in todo],
                                to_optuna(space), make_sampler(tuning.sampler, space), evaluated,
                                raw=self.dispatch.raw_for(group.arm, group.seed)))
        if not sweeps:
            return None
        self.progress.phase = "tune"
        self.store.event("phase_started", phase="tune", trials=sum(len(s.specs) for s in sweeps))
        self.display.note(f"tuning: {sum(len(s.specs) for s in sweeps)} trials in {len(sweeps)} sweeps")
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0:
            return "budget"
        outcome = run_tuning(sweeps, metric=self.contract.metric.name, mode=self.contract.metric.mode,
                             exposure=self.contract.budget.exposure, early_stop=tuning.early_stop,
                             resources=self.contract.budget.resources, hooks=self.dispatch.hooks(),
                             time_budget_s=remaining,
                             prestart=True)
        self.store.event("phase_ended", phase="tune", ended=outcome.ended, stopped=outcome.stopped)
        return outcome.stopped

    def select(self) -> dict[str, dict]:
        """Each arm's confirmation config; writes selection.json."""
        from planner._contract.paths import apply_params
        from planner._stats.select import select

        c = self.contract
        if c.tuning is None:
            return {arm: config for arm, config in self.configs.items()}
        selected = select(c, [r for r in self.records.values() if r["phase"] == "tune"])
        self.store.write_selection({
            "rule": c.tuning.selection.rule, "k": c.tuning.selection.k, "metric": c.metric.name,
            "mode": c.metric.mode, "arms": {arm: s.as_dict() for arm, s in selected.items()}})
        self.unselected = {arm: s.reason for arm, s in selected.items() if not s.trial_id}
        for arm, s in selected.items():
            self.store.event("selected", arm=arm, trial_id=s.trial_id, params=s.params, score=s.score,
                             reason=s.reason)
            self.display.note(f"selected for {arm}: {s.trial_id or 'nothing'} {s.params or ''} {s.reason}".strip())
        return {arm: apply_params(self.configs[arm], s.params, self.raw_configs.get(arm))
                for arm, s in selected.items() if s.trial_id}

    def _seeds_identical(self, rows: list[dict]) -> tuple[list[dict], list[dict]]:
        """Arms whose seeds did not vary the run become `invalid` (not an incomplete one); and the
        findings for decisions.json."""
        from planner._core.records import seeds_identical
        from planner._stats.decide import mark_invalid, seeds_did_not_vary

        c = self.contract
        identical = seeds_identical([r for r in self.records.values() if r["phase"] == "confirm"])
        reasons = {row["arm"]: why for row in rows if row["decision"] != "incomplete"
                   for why in [seeds_did_not_vary(row["arm"], identical, c.baseline.name, c.metric.decision_metric)]
                   if why is not None}
        findings = [{"kind": "seeds_identical", "arm": arm, "seeds": n,
                     "message": f"every confirmation seed of {arm} ({n} seeds) reported exactly the same curves: "
                                "the seeds did not vary the run"} for arm, n in identical.items()]
        return mark_invalid(rows, reasons), findings

    def _nothing_confirmed(self, rows: list[dict]) -> list[dict]:
        """An arm (or the baseline) whose tuning selected nothing was never confirmed: say why, not
        "seeds not run yet" (which reads as pending work that --resume would do)."""
        unselected = getattr(self, "unselected", {})
        if not unselected or any(r["phase"] == "confirm" and r["arm"] in unselected for r in self.records.values()):
            return rows
        out = []
        for row in rows:
            said = []
            for arm in (self.contract.baseline.name, row["arm"]):
                if arm in unselected:
                    tuned = [r for r in self.records.values() if r["phase"] == "tune" and r["arm"] == arm]
                    groups = error_groups(tuned)
                    error = (f"; {groups[0]['error']} in {groups[0]['count']} of them" if groups else "")
                    said.append(f"{'the baseline ' if arm != row['arm'] else ''}{arm} was never confirmed: "
                                f"{unselected[arm]}{error}")
            if said and row["decision"] == "incomplete":
                row = {**row, "reason": f"Incomplete: {'; '.join(said)}. Resuming will not change this: fix the "
                                        "trainable or the contract and start a new run."}
            out.append(row)
        return out

    def confirm(self, configs: dict[str, dict]) -> str | None:
        """Run the confirmation trials of the arms in `configs`; what stopped the phase early, or None."""
        if self.contract.confirmation.looks > 1:  # sequential: batches of seeds, looks in between
            from planner._dispatch.looks import confirm_in_looks

            looks = confirm_in_looks(self, configs)
            self.sequential, self.not_needed = looks.sequential, looks.not_needed
            return looks.stopped
        self.skip_unselected(configs)
        specs = [self.spec(t, configs[t.arm]) for t in self.plan.confirm
                 if t.trial_id not in self.records and t.arm in configs]
        if not specs:
            return None
        outcome = self.run_batch(specs, f"confirming: {len(specs)} trials")
        return "budget" if outcome is None else outcome.stopped

    def skip_unselected(self, configs: dict[str, dict]) -> None:
        """Log the confirmation trials of arms without a selected config as skipped."""
        skipped = [t.trial_id for t in self.plan.confirm if t.arm not in configs]
        if skipped:
            self.store.event("trials_skipped", phase="confirm", trial_ids=skipped,
                             reason="the arm has no selected config (no tuning trial completed the full exposure)")

    def run_batch(self, specs: list[TrialSpec], note: str, started: dict | None = None,
                  ended: dict | None = None):
        """One batch of confirmation trials as Ray tasks, between phase_started and phase_ended events.

        Returns the Outcome, or None when the wall-time budget was spent before it could start.
        `started` and `ended` are extra fields of the two events (a look's number).
        """
        self.progress.phase = "confirm"
        self.store.event("phase_started", phase="confirm", trials=len(specs), **(started or {}))
        self.display.note(note)
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0:
            return None
        outcome = self.dispatch.run_fixed(specs, remaining)
        self.store.event("phase_ended", phase="confirm", ended=outcome.ended, stopped=outcome.stopped,
                         **(ended or {}))
        return outcome

    def decide(self, state: str) -> list[dict]:
        c = self.contract
        extra = {}
        if c.confirmation.looks > 1:  # the decisions come from the looks (planner._dispatch.looks)
            from planner._dispatch.looks import SequentialConfirmation

            sequential = self.sequential or SequentialConfirmation(c)
            rows = sequential.decisions(sequential.evaluate(self.records))
            extra = {"sequential": sequential.describe()}
        else:
            rows = _decide_arms(c, [r for r in self.records.values() if r["phase"] == "confirm"])
        rows = _invalid_on_data(c, rows, [r for r in self.records.values() if r["phase"] == "confirm"])
        rows = self._nothing_confirmed(rows)
        rows, self.findings = self._seeds_identical(rows)
        if self.findings:
            extra["findings"] = self.findings
        self.store.write_decisions({
            "run_state": state, "metric": c.metric.decision_metric, "test": c.acceptance.test,
            "alpha": c.acceptance.alpha, "correction": c.acceptance.correction,
            "min_effect": c.acceptance.min_effect, **extra, "decisions": rows})
        return rows


def run(contract_path: str | os.PathLike, *, runs_dir: str | os.PathLike = "runs", address: str | None = None,
        resume: str | os.PathLike | None = None, quiet: bool = False, stream=None,
        resume_argv: list[str] | None = None) -> RunResult:
    """Run a contract end to end. Raises ContractError/UsageError before anything starts.

    `resume_argv` is the contract path and options as the user typed them: an
    interrupted run's result carries the `plan run ... --resume RUN_DIR` that continues it.
    """
    from planner._core.version import VERSION
    from planner._dispatch.progress import make_display
    from planner._lineage import record as lineage_record
    from planner._lineage.resolve import ProjectLineage
    from planner._store.identity import run_identity

    lineage = ProjectLineage(Path(resume).resolve().parent.parent if resume is not None else runs_dir)
    contract, contract_dir, configs, plan, raw_configs = load_and_validate(contract_path, lineage)
    mlflow_tracking = contract.tracking.mlflow
    if mlflow_tracking is not None:  # a store MLflow refuses fails here, before any compute is spent
        from planner._results.mlflow import check_mlflow_tracking

        check_mlflow_tracking(mlflow_tracking.tracking_uri, mlflow_tracking.experiment or contract.name)
    from planner._core.redact import Redactor
    from planner._store.read import RunFolder
    from planner._store.resume import heal_files, resolve_run_dir, unfinished

    previous_wall = 0.0
    redactor = Redactor.for_run(contract.frozen(), *configs.values())
    if resume is not None:
        store = RunStore.open(resolve_run_dir(resume, contract))
        store.redactor = redactor
        _check_logged_configs(store.root, {arm: redactor.scrub(config) for arm, config in configs.items()})
        took_over = store.lock()
        try:  # a folder refused after the lock was taken (a planted link, a damaged file) keeps no lock of ours
            cut = heal_files(store.root)
            state = read_state(store.root)
        except BaseException:
            store.unlock()
            raise
        previous_wall = float(state.get("budget", {}).get("wall_time_s", 0.0))
        logged_code = (RunFolder(store.root).identity() or {}).get("code", {})
        logged_code = logged_code if isinstance(logged_code, dict) else {}
        now_code = run_identity(contract, contract_dir, trainable_search_path(contract_dir))["code"]
        changed = logged_code.get("trainable_source_sha256") != now_code.get("trainable_source_sha256")
        store.event("run_resumed", pid=os.getpid(), previous_state=state.get("state"),
                    trainable_source_sha256=now_code.get("trainable_source_sha256"), trainable_changed=changed)
        if took_over is not None:
            store.event("stale_lock_taken_over", pid=took_over.get("pid"), host=took_over.get("host"),
                        started=took_over.get("started"), reason=took_over.get("reason"))
        for name, size in cut.items():
            store.event("torn_record_dropped", file=name, bytes=size)
        lineage_record.run_started(store.root, contract, configs, None, resumed=True)
    else:
        store = RunStore.create(runs_dir, contract.name)
        store.redactor = redactor
        store.lock()
        store.write_frozen(contract, str(contract_path), configs, plan.as_dict(), VERSION, raw_configs=raw_configs)
        store.write_identity(run_identity(contract, contract_dir, trainable_search_path(contract_dir)))
        store.event("run_started", run_id=store.run_id, planned=plan.planned_count, pid=os.getpid())
        try:  # the project ledger (docs/lineage.md): refused before any trial when it cannot be written
            lineage_record.run_started(store.root, contract, configs,
                                       lineage.resolved.source if lineage.resolved else None)
        except BaseException:
            store.unlock()
            raise
    stream = stream or sys.stdout
    runner = _Runner(contract, contract_dir, configs, plan, store,
                     lambda progress: make_display(progress, quiet=quiet, stream=stream), previous_wall,
                     raw_configs=raw_configs)
    resumed = None
    if resume is not None:
        again = unfinished(store, runner.records)
        if again:
            store.event("trials_rerun", trial_ids=again, reason="started under a driver that stopped before they ended")
        resumed = resume_counts(plan, runner.records, again)
    runner.write_state("running")
    started_ray = False
    state, reason = "failed", ""
    previous_term = claim_stop_signals()
    try:
        from planner._dispatch.cluster import resolve_address

        runner.dispatch.remote = resolve_address(address) is not None
        with runner.display:
            target = address or os.environ.get("RAY_ADDRESS")
            runner.display.note(f"connecting to Ray at {target}" if target else "starting an embedded local Ray")
            t_ray = time.monotonic()
            started_ray = start_ray(address, runner.search_path, Path(runs_dir), log_dir=store.root,
                                     contract=contract, contract_dir=contract_dir)
            runner.display.note(f"Ray ready in {time.monotonic() - t_ray:.1f} s")
            if resumed is not None:
                runner.display.note(format_resumed(resumed))
            stopped = runner.tune() if contract.tuning is not None else None
            if stopped is None:
                stopped = runner.confirm(runner.select())
            elif contract.tuning is not None:
                runner.select()
        if stopped == "budget":
            state, reason = "budget_exhausted", f"budget.max_wall_time of {contract.budget.max_wall_time} reached"
        elif stopped == "interrupted":
            state, reason = "interrupted", "stopped by the user"
        else:
            state, reason = "completed", "all planned trials ended"
            not_needed = runner.not_needed  # sequential looks stopped early
            missing = [t.trial_id for t in plan.trials if t.trial_id not in runner.records and t.trial_id not in not_needed]
            if missing:
                reason = (f"every trial that could run ended; {len(missing)} planned trials did not run "
                          "(arms whose tuning left nothing to select)")
            if not_needed:
                reason += (f"; {len(not_needed)} confirmation trials not needed "
                           "(the sequential confirmation stopped early)")
    except KeyboardInterrupt:
        state, reason = "interrupted", "stopped by the user (Ctrl-C or SIGTERM)"
    except OSError as error:
        from planner._store.resume import disk_error

        if not disk_error(error):
            state, reason = "failed", f"internal error: {type(error).__name__}: {error}"
            raise
        state, reason = "failed", (f"cannot write the run folder {store.root}: {error.strerror}; what ended is "
                                   f"kept; free space and resume with --resume {store.root}")
        raise RunError(reason) from None
    except PlannerError as error:
        state, reason = "failed", str(error)
        raise
    except BaseException as error:
        state, reason = "failed", f"internal error: {type(error).__name__}: {error}"
        raise
    finally:
        decisions, decide_error = [], None
        try:
            decisions = runner.decide(state)
        except OSError:  # a full disk: the steps below may fail too; the lock is released and Ray stopped
            pass
        except Exception as error:  # never skip the bookkeeping below; raised once it is done
            decide_error = error
            state, reason = "failed", (f"every trial that ran is kept, but the decision could not be made: "
                                       f"{type(error).__name__}: {error}")
        for step in (lambda: runner.write_state(state, reason),
                     lambda: store.event("run_ended", state=state, reason=reason)):
            try:  # on a full disk each may fail; the lock is released and Ray stopped all the same
                step()
            except OSError:
                pass
        lineage_record.run_ended(store.root, state, reason, decisions, contract.acceptance.alpha)  # warns, never raises
        store.close()
        store.unlock()
        restore_stop_signals(previous_term)
        if started_ray:
            import ray

            ray.shutdown()
    if decide_error is not None:
        raise RunError(f"{reason}; the run folder {store.root} is closed and unlocked "
                       "(run with --debug for the trace)") from decide_error
    if mlflow_tracking is not None:
        _log_to_mlflow(store.root, mlflow_tracking, stream)
    records = list(runner.records.values())
    failures = [{"trial_id": r["trial_id"], "status": r["status"],
                 "message": (r["errors"][-1]["message"] if r.get("errors") else "")}
                for r in records if r["status"] in FAILED_STATUSES]
    resume_command = None
    if state == "interrupted":
        import shlex

        argv = resume_argv or [str(contract_path)]
        resume_command = shlex.join(["plan", "run", *argv, "--resume", shown_path(store.root)])
    return RunResult(store.root, state, reason, decisions, runner.wall_s(), len(runner.records), failures,
                     resume_command=resume_command, resumed=resumed,
                     errors=error_groups(records), no_value_arms=arms_without_value(contract, records),
                     heldout_exposures=_heldout_exposures(contract, records), heldout=contract.metric.heldout,
                     findings=list(getattr(runner, "findings", [])))


def arms_without_value(contract, records: list[dict]) -> list[str]:
    """Arms (the baseline first) with not one usable confirmation value: nothing to decide them on.

    Usable: a completed confirmation trial with a finite final value of the decision
    metric, or a diverged one when the contract sets failures.diverged_value.
    """
    metric, diverged_value = contract.metric.decision_metric, contract.failures.diverged_value
    usable = set()
    for r in records:
        if r.get("phase") != "confirm":
            continue
        value = final_value(r, metric)
        diverged = r.get("status") == "diverged" or (value is not None and not math.isfinite(value))
        if (diverged and diverged_value is not None) or (r.get("status") == "completed" and not diverged
                                                          and value is not None):
            usable.add(r.get("arm"))
    return [arm.name for arm in contract.all_arms if arm.name not in usable]


def _heldout_exposures(contract, records: list[dict]) -> int:
    """Tuning trials that reported metric.heldout: one per trial (the ledger's `tuning_exposures`)."""
    from planner._store.read import heldout_tuning_trials

    return len(heldout_tuning_trials(records, contract.metric.heldout))



def resume_counts(plan: Plan, records: dict[str, dict], again: list[str]) -> dict[str, int]:
    """On --resume: the planned trials whose records are kept, those cut short that run again, the rest."""
    planned = {t.trial_id for t in plan.trials}
    kept = len(planned & set(records))
    rerun = len(planned & set(again))
    return {"kept": kept, "rerun": rerun, "not_started": len(planned) - kept - rerun}


def format_resumed(counts: dict[str, int]) -> str:
    def trials(n: int) -> str:
        return f"{n} trial{'s' if n != 1 else ''}"

    return (f"resumed: {trials(counts['kept'])} kept, {trials(counts['rerun'])} run again (cut short when the run "
            f"stopped), {trials(counts['not_started'])} not started yet")


def _log_to_mlflow(run_dir: Path, tracking, stream) -> None:
    """Copy the finished run folder to MLflow; a failure is a warning, the run folder stays the record."""
    from planner._results.mlflow import MlflowTrackingError, log_run_to_mlflow

    try:
        summary = log_run_to_mlflow(run_dir, tracking_uri=tracking.tracking_uri, experiment=tracking.experiment)
    except MlflowTrackingError as error:
        print(f"warning: the run was not logged to MLflow: {error}", file=sys.stderr)
        return
    print(f"mlflow: {summary.trials_logged} trials logged to {summary.tracking_uri}", file=stream)






def _check_logged_configs(run_dir: Path, configs: dict[str, dict]) -> None:
    """A resumed run uses the configs it logged; refuse when today's config files compose differently."""
    from planner._contract.paths import config_diff
    from planner._store.read import read_yaml

    for arm, config in configs.items():
        path = run_dir / "configs" / f"{arm}.yaml"
        logged = read_yaml(path, root=run_dir)
        if logged is None:
            raise RunError(f"{path} is missing; cannot resume this run")
        diff = config_diff(logged, config)
        if diff:
            key, was, now = diff[0]
            raise RunError(f"arm {arm!r} composes differently from the run's {path.name} ({key}: {yaml_value(was)} "
                           f"then, {yaml_value(now)} now): the config files changed, which makes a new run; start it "
                           "without --resume")


def read_state(run_dir: str | os.PathLike) -> dict[str, Any]:
    from planner._store.read import RunFolder

    return RunFolder(Path(run_dir)).state() or {}


def read_records(run_dir: str | os.PathLike) -> list[dict]:
    return read_jsonl(Path(run_dir) / "trials.jsonl")


def format_result(result: RunResult) -> str:
    """The end of `plan run`: the run state, then the decision per arm, kept apart."""
    lines = [f"run folder: {shown_path(result.run_dir)}",
             f"run state:  {result.state} ({result.reason}); {noun('trial', result.trials_ended)} ended in "
             f"{result.wall_time_s:.1f} s"]
    if result.resumed is not None:
        lines.insert(1, format_resumed(result.resumed))
    if result.failures:
        lines.append(f"failures:   {noun('trial', len(result.failures))}: " + ", ".join(
            f"{f['trial_id']} {f['status']}" for f in result.failures[:5]) + (" ..." if len(result.failures) > 5 else ""))
    for finding in result.findings:
        lines.append(f"warning:    {finding['message']}")
    for group in result.errors[:5]:
        lines.append(f"error:      {group['error']} (in {noun('trial', group['count'])}, "
                     f"first {group['first']})")
    if result.heldout_exposures:
        lines.append(f"warning:    {result.heldout_exposures} tuning trial(s) reported the held-out metric "
                     f"{result.heldout!r}: test exposure (one per trial; see plan status)")
    if result.no_value_arms and result.state == "completed":
        lines.append(f"no value:   arm{'s' if len(result.no_value_arms) > 1 else ''} "
                     f"{', '.join(result.no_value_arms)} ended with no usable confirmation value: nothing to "
                     f"decide on (exit {EXIT_NO_VALUE})" + (f"; every failure above is {result.errors[0]['error']}"
                                                           if len(result.errors) == 1 else ""))
    lines.append("decisions:")
    for d in result.decisions:
        if d["effect"] is None:
            lines.append(f"  {d['arm']}: {d['decision']} ({d['reason']})")
        else:
            def num(x, spec):  # None: an unbounded CI, or no fixed-sample p after sequential looks
                return "none" if x is None else format(x, spec)

            looks = f"  at look {len(d['looks'])}" if d.get("looks") else ""
            p = "" if d["p_value"] is None else f"p={d['p_value']:.3g}  "
            lines.append(f"  {d['arm']}: {d['decision']}  effect {d['effect']:+.4g}  "
                         f"CI [{num(d['ci_low'], '+.4g')}, {num(d['ci_high'], '+.4g')}]  {p}"
                         f"n={d['n_arm']} vs {d['n_baseline']}{looks}")
        if d["decision"] == "invalid":  # the data broke the contract's data section (docs/data.md)
            lines.append(f"    {d['reason'].split(' Measured: ')[0]}")
    if result.resume_command:
        lines.append(f"to resume:  {result.resume_command}")
    from planner._lineage.record import forking_lines
    from planner._store.read import RunFolder

    lines += [f"lineage:    {line}" for line in forking_lines(RunFolder(Path(result.run_dir)).json("lineage.json"))]
    return "\n".join(lines)
