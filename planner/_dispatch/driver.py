"""`plan run`: one contract from the YAML file to a decision per arm.

    run(contract)
      prepare      validate the contract, open (resume) or create the run folder
      session      RunSession: the lock, the stop signals, Ray, the end's bookkeeping
      tune         every sweep through one Ray Tune Tuner (planner._dispatch.tune)
      select       each arm's confirmation config; selection.json
      confirm      fixed-config Ray tasks (planner._dispatch.fixed), in looks when
                   confirmation.looks > 1 (planner._dispatch.sequential_confirm)
      decide       decisions.json, on the way out, whatever stopped the run
      finish       state.json, run_ended, the lineage; the RunResult

Every ended trial is written as it ends; the run state (completed /
budget_exhausted / interrupted / failed) is kept apart from the decisions.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
import time
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, cast

# called through its module (tests swap the rule there)
import planner._stats.decide as decision_rule
from planner._contract.paths import apply_params, config_diff
from planner._contract.validate import load_contract
from planner._core.errors import (
    EXIT_INCOMPLETE,
    EXIT_NO_VALUE,
    EXIT_OK,
    FailedFast,
    MlflowTrackingError,
    RunError,
    UsageError,
)
from planner._core.lazy import lazy_import
from planner._core.records import (
    TrialRecord,
    error_groups,
    final_value,
    non_finite_metrics,
    note_groups,
    on_nodes,
    seeds_identical,
    tuned_values_identical,
)
from planner._core.redact import Redactor
from planner._core.status import FAILED, RunState, StopReason, TrialStatus
from planner._core.text import noun, shown_path, terminal_safe, utc_now, yaml_value
from planner._core.version import VERSION
from planner._data.checks import data_violations, invalid_reasons
from planner._dispatch.cluster import resolve_address
from planner._dispatch.failfast import FailFast
from planner._dispatch.progress import Progress, make_display
from planner._dispatch.ray_shutdown import (
    ray_shutdown_deferred,  # noqa: F401 - the CLI's name for it (it imports only the driver)
)
from planner._dispatch.ray_start import importing_meanwhile
from planner._dispatch.sequential_confirm import SequentialConfirmation, confirm_in_looks
from planner._dispatch.session import HANDLED, RAY_LOST, RunSession, final_state, raised_from
from planner._dispatch.specs import Dispatch, at_budget
from planner._lineage import record as lineage_record
from planner._lineage.record import forking_lines
from planner._lineage.resolve import ProjectLineage
from planner._plan.estimate import estimate as estimate_contract
from planner._plan.explored import ArmReach, arm_reach, reach_said
from planner._plan.space import arm_space, to_optuna
from planner._plan.trials import Plan, make_plan
from planner._results.mlflow import LiveMlflow, check_mlflow_tracking, log_run_to_mlflow
from planner._stats.decide import (
    latest_outcomes,
    mark_invalid,
    seeds_did_not_vary,
    tuned_values_did_not_vary,
)
from planner._stats.select import select
from planner._store.facts import heldout_tuning_trials
from planner._store.files import refuse_in_place
from planner._store.identity import (
    add_files_read,
    add_used_packages,
    files_read_refusal,
    run_identity,
    trainable_search_path,
)
from planner._store.live import (
    STUDIES_FILE,
    LiveWriter,
    dashboard_command,
    new_progress,
    write_latest,
)
from planner._store.read import RunFolder, read_yaml
from planner._store.resume import REWRITTEN, disk_error, heal_files, resolve_run_dir, unfinished
from planner._store.schema import check_trial
from planner._store.writer import RunStore
from planner._trial.attempts import Ledger
from planner._trial.protocol import make_record
from planner._trial.spec import TrialSpec
from planner._trial.storage import check_storage

NEVER_RAN = "NotRun"  # the error type of a planned trial Ray ended twice without running it

# Ray Tune and Optuna, loaded when tuning starts (a run without tuning never loads them)
tuning_pieces = lazy_import("planner._dispatch.tune")


# decisions that test nothing: the run exits 4 even when it completed (docs/running.md, exit codes)
UNDECIDED = ("invalid", "incomplete")


@dataclass
class RunResult:
    run_dir: Path
    state: str
    reason: str
    decisions: list[dict]
    wall_time_s: float
    trials_ended: int
    failures: list[dict] = field(default_factory=list)
    errors: list[dict] = field(
        default_factory=list
    )  # failed trials by error, first occurrence first
    no_value_arms: list[str] = field(
        default_factory=list
    )  # arms without one usable confirmation value
    heldout_exposures: int = 0  # tuning trials that reported metric.heldout
    heldout: str | None = None
    findings: list[dict] = field(
        default_factory=list
    )  # decisions.json `findings` (seeds_identical, ...)
    notes: list[dict] = field(
        default_factory=list
    )  # the trials' protocol notes, grouped (records.note_groups)
    resume_command: str | None = None  # how to continue a run that was stopped (Ctrl-C, SIGTERM)
    resumed: dict | None = None  # on --resume: trials kept, run again, not started yet
    tuning: str | None = None  # how far each arm's tuning explored (decisions.json `tuning`)

    @property
    def exit_code(self) -> int:
        if self.state != RunState.COMPLETED:
            return EXIT_INCOMPLETE
        undecidable = self.no_value_arms or any(
            d.get("decision") in UNDECIDED for d in self.decisions
        )
        return (
            EXIT_NO_VALUE if undecidable else EXIT_OK
        )  # 4: nothing, or nothing valid or whole, to decide on


# ------------------------------------------------------------------ loading and validating


def load_and_validate(contract_path: str | os.PathLike, lineage=None):
    """(contract, contract_dir, composed configs, plan, the configs with interpolations unresolved,
    the options an argparse script's flags were checked against), or ContractError / UsageError.

    The contract is loaded, composed and checked once, by `plan validate`'s own
    `load_contract`; the plan is made from it and must fit `budget.max_trials`.
    """
    path = Path(contract_path)
    if not path.is_file():
        raise UsageError(f"cannot read {contract_path}: no such file")
    loaded = load_contract(
        path, lineage
    )  # lineage: a baseline from a run or a line (planner._lineage)
    configs, raw_configs = at_budget(
        loaded.contract, loaded.configs, loaded.raw_configs
    )  # as the trials get them
    return (
        loaded.contract,
        path.parent.resolve(),
        configs,
        make_plan(loaded.contract),
        raw_configs,
        loaded.script_options,
    )


# ------------------------------------------------------------------ the decision


def _decide_arms(contract, confirm_records: list[dict]) -> list[dict]:
    """The contract's decision per treatment arm (planner._stats.decide), as decisions.json rows.

    A confirmation record becomes an Outcome: its seed, the last reported value
    of the decision metric, and its status; a planned seed with no record is
    pending, which makes the arm incomplete.
    """
    metric = contract.metric.decision_metric
    confirm = latest_outcomes(
        (
            (
                cast(str, r.get("arm")),
                r.get("seed"),
                final_value(r, metric),
                cast(str, r.get("status", TrialStatus.FAILED)),
            )
            for r in confirm_records
            if r.get("phase") == "confirm"
        ),
        [contract.baseline.name, *(arm.name for arm in contract.arms)],
        list(contract.seeds),
    )
    decisions = decision_rule.decide(
        contract.acceptance,
        contract.metric.decision_mode,
        confirm,
        contract.baseline.name,
        planned_seeds=list(contract.seeds),
        diverged_value=contract.failures.diverged_value,
        arms=[arm.name for arm in contract.arms],
        metric=metric,
    )
    return [d.as_dict() for d in decisions]


def tuning_reach(contract, records: Iterable[dict], selected: dict[str, dict]) -> list[ArmReach]:
    """How far each arm's tuning explored its space (planner._plan.explored), from its tuning
    records and the params selected for it; [] for a contract without tuning."""
    if contract.tuning is None:
        return []
    tune = [r for r in records if r.get("phase") == "tune"]
    return [
        arm_reach(
            arm,
            arm_space(contract.tuning, arm),
            [r.get("params") or {} for r in tune if r.get("arm") == arm],
            selected.get(arm),
        )
        for arm in [contract.baseline.name, *(a.name for a in contract.arms)]
    ]


def _invalid_on_data(contract, rows: list[dict], confirm_records: list[dict]) -> list[dict]:
    """Arms whose confirmation trials (or the baseline's) carry a data violation: decision
    `invalid`."""
    latest: dict[tuple, dict] = {}
    for record in confirm_records:
        latest[(record.get("arm"), record.get("seed"))] = record
    reasons = invalid_reasons(
        latest.values(), contract.baseline.name, [arm.name for arm in contract.arms]
    )
    return mark_invalid(rows, reasons, "data")


def _budget_not_matched(contract, plan: Plan, records: dict[str, dict]) -> dict[str, str]:
    """Arms whose tuning ran fewer trials than the plan gives every arm (a planned trial Ray never
    ran, recorded as such): arm -> why its decision is `invalid`. The baseline's shortfall is every
    arm's."""
    planned: dict[str, int] = {}
    never: dict[str, int] = {}
    for t in plan.tune:
        planned[t.arm] = planned.get(t.arm, 0) + 1
        record = records.get(t.trial_id)
        if record is not None and any(
            e.get("type") == NEVER_RAN for e in record.get("errors") or []
        ):
            never[t.arm] = never.get(t.arm, 0) + 1
    short = {
        arm: f"tuning budget not matched: {arm} {planned[arm] - n} of {planned[arm]} trials."
        for arm, n in never.items()
        if n
    }
    base = short.get(contract.baseline.name)
    return {
        arm.name: " ".join(w for w in (short.get(arm.name), base) if w)
        for arm in contract.arms
        if arm.name in short or base
    }


# ------------------------------------------------------------------ the runner's state


@dataclass
class Runner:
    """The state of one `plan run` between its phases; the Dispatch's listener
    (started/ended/cancelled)."""

    contract: Any  # planner._contract.model.Contract
    contract_dir: Path
    configs: dict[str, dict]
    raw_configs: dict[str, dict]  # interpolations unresolved: tuned values go in before resolving
    plan: Plan
    store: RunStore
    _: KW_ONLY
    quiet: bool = False
    stream: Any = None  # where the live progress prints (stdout when None)
    remote: bool = False  # on a cluster: the specs carry no driver paths (Dispatch.remote)
    previous_wall_s: float = 0.0  # the wall time of the runs this one resumes
    resumed_at: str | None = None  # when this session resumed the run (None: a new run)
    keep_going: bool = False  # plan run --keep-going: never fail fast
    storage: str | None = None  # plan run --storage: the trials' files for every node
    script_options: tuple | None = (
        None  # what the flag check read of an argparse script (Dispatch.open)
    )
    t0: float = field(init=False, default_factory=time.monotonic)
    progress: Progress = field(init=False)
    display: Any = field(init=False)  # planner._dispatch.progress: a Quiet, Line or Live display
    dispatch: Dispatch = field(
        init=False
    )  # the trials' specs and the hooks that log them, shared with reeval
    records: dict[str, dict] = field(
        init=False
    )  # trial_id -> record: the plan's trials ended so far
    state_written: float = field(
        init=False, default=0.0
    )  # when state.json was last rewritten while running (monotonic)
    warned_heldout: bool = field(
        init=False, default=False
    )  # the held-out exposure warning was shown
    unselected: dict[str, str] = field(
        init=False, default_factory=dict
    )  # arm -> why tuning selected nothing
    selected: dict[str, dict] = field(
        init=False, default_factory=dict
    )  # arm -> the params selected for confirmation
    tuning_said: str | None = field(init=False, default=None)  # decisions.json `tuning.summary`
    findings: list[dict] = field(init=False, default_factory=list)  # decisions.json `findings`
    sequential: SequentialConfirmation | None = field(
        init=False, default=None
    )  # the looks a sequential confirmation ran
    not_needed: set[str] = field(
        init=False, default_factory=set
    )  # confirmation trials the looks did not need
    fail_fast: FailFast = field(
        init=False
    )  # the first trials, watched for a run that can only fail
    live: LiveWriter = field(init=False)  # live/: running trials' reports and the progress
    live_written: float = field(init=False, default=0.0)  # when live/progress.json was last written
    mlflow: LiveMlflow | None = field(
        init=False, default=None
    )  # tracking.mlflow: trials as they end

    def __post_init__(self) -> None:
        planned: dict[tuple[str, str], int] = {}
        for t in self.plan.trials:
            planned[(t.phase, t.arm)] = planned.get((t.phase, t.arm), 0) + 1
        c = self.contract
        self.progress = Progress(
            list(self.plan.arms),
            planned,
            metric=c.metric.name,
            mode=c.metric.mode,
            decision_metric=c.metric.decision_metric,
            max_wall_time_s=c.budget.max_wall_time_s,
        )
        self.progress.steps_expected = expected_steps(c)
        self.live = LiveWriter(self.store.root)
        self.display = make_display(
            self.progress, quiet=self.quiet, stream=self.stream or sys.stdout
        )
        self.fail_fast = FailFast(
            c.metric.name, frozenset(a.name for a in c.all_arms), enabled=not self.keep_going
        )
        # it hears back through started/ended/cancelled below; plan reeval trials are not the plan's
        self.dispatch = Dispatch.open(
            c,
            self.contract_dir,
            self.configs,
            self.store,
            listener=self,
            remote=self.remote,
            storage=self.storage,
            raw_configs=self.raw_configs,
            script_options=self.script_options,
            records={r["trial_id"]: r for r in self.store.trials() if r.get("phase") != "reeval"},
        )
        self.records = self.dispatch.records
        for record in self.records.values():
            self.progress.ended(record, was_running=False)
            self.dispatch.slim(
                record
            )  # a resumed run's tuning records, as a running one keeps them

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
        if every_s and now - self.state_written < every_s:
            return
        self.state_written = now
        self.store.write_state(
            state, reason=reason, wall_time_s=self.wall_s(), trials_ended=len(self.records)
        )

    # the live progress hears of each trial after the run folder (Dispatch's listener)
    def started(self, spec: TrialSpec) -> None:
        self.progress.started(spec.phase, spec.arm)
        self.display.update()

    def ended(self, record: dict) -> None:
        self.fail_fast.trial_ended(record)
        for v in data_violations(record):  # at once, as the trial ends (docs/data.md)
            self.display.note(
                f"data violation: {v['kind']} in {record['trial_id']}: {v['message']}"
            )
        self.progress.ended(record)
        heldout = [
            v for v in record.get("violations") or [] if v.get("kind") == "heldout_in_tuning"
        ]
        if heldout and not self.warned_heldout:  # at once, not only in the summary
            self.warned_heldout = True
            self.display.note(
                f"warning: {record['trial_id']} reported the held-out metric "
                f"{heldout[0].get('metric')} "
                f"at step {heldout[0].get('step')} while tuning: test exposure (the run summary "
                f"counts "
                "every such trial)"
            )
        self.write_state(RunState.RUNNING, every_s=1.0)
        self.write_live(every_s=1.0)
        self.log_to_mlflow(record)
        self.display.update(record)

    def log_to_mlflow(self, record: dict) -> None:
        """The trial in MLflow as it ends; a refusal is a note, and the end logs what is missing."""
        if self.mlflow is None:
            return
        try:
            self.mlflow.trial_ended(record)
        except MlflowTrackingError as error:
            self.mlflow = None
            self.display.note(
                f"warning: MLflow stopped taking trials ({error}); the end tries again"
            )

    def recover(self, trial_id: str) -> bool:
        """On --resume: record the planned trial `trial_id` from the record its worker kept, when
        the trial had ended as the earlier driver stopped (its attempt ledger says so:
        planner._trial.attempts); True when it was. The kept record must pass the run folder's
        check and be of this trial, with the tuned values its attempt ran; anything else runs
        again."""
        planned = next((t for t in self.plan.trials if t.trial_id == trial_id), None)
        if planned is None:
            return False
        ledger = Ledger.load(self.store.trial_dir(trial_id), self.dispatch.session)
        record = ledger.kept_before()
        if record is None:
            return False
        try:
            check_trial(record, f"{trial_id}'s kept record")
        except RunError:
            return False
        same = all(
            record.get(key) == getattr(planned, key) for key in ("trial_id", "phase", "arm", "seed")
        ) and (record.get("contract_sha256") == self.dispatch.contract_sha256)
        if not same or (record.get("params") or {}) != (ledger.attempts[-1].get("params") or {}):
            return False
        self.dispatch.recover(record, ledger.attempts[-1].get("session"))
        self.progress.ended(record, was_running=False)
        return True

    def kept(self, spec: TrialSpec, why: str) -> None:
        self.display.note(
            f"{spec.trial_id}: its worker died after the trial ended; the record it kept is the "
            f"trial's ({why})"
        )

    def node_refused(self, node_id: str, problem: str) -> None:
        """A node that cannot import the trainable: said once, and held for the rest of the run
        (planner._dispatch.nodes), so that no tuning or confirmation trial runs there."""
        self.store.event("node_refused", sync=False, node_id=node_id, problem=problem)
        guard = self.dispatch.nodes
        here = guard is not None and guard.here == node_id
        mine = " (the node this driver runs on)" if here else ""
        self.display.note(
            f"node {node_id[:12]}{mine} cannot import the trainable ({problem}): "
            "no trial is sent there; the run goes on on the other nodes"
        )

    def should_stop(self) -> str | None:
        return self.fail_fast.should_stop()

    def trial_reported(self, trial_id: str, metrics: dict, step: int, time_s: float) -> None:
        self.fail_fast.trial_reported(trial_id, metrics)
        self.progress.reported(trial_id, step)
        self.live.report(trial_id, step, time_s, metrics)
        self.write_live(every_s=1.0)

    def write_live(self, *, every_s: float = 0.0) -> None:
        """Rewrite live/progress.json (at most once per `every_s` seconds): what `plan status`
        shows."""
        now = time.monotonic()
        if every_s and now - self.live_written < every_s:
            return
        self.live_written = now
        p = self.progress
        self.live.progress(
            new_progress(p.phase, self.wall_s(), p.steps_done, p.steps_expected, p.eta_s())
        )

    def stop_if_failing_fast(self) -> None:
        """Raise the fail-fast sentence (planner._dispatch.failfast) once its sign was seen; the
        run ends `failed`, every ended trial kept."""
        if self.fail_fast.reason is not None:
            self.store.event("fail_fast", reason=self.fail_fast.reason)
            raise FailedFast(self.fail_fast.reason)

    def cancelled(self, spec: TrialSpec, why: str) -> None:
        self.progress.cancelled(spec.phase, spec.arm)
        self.display.update()

    def spec(self, trial, config: dict) -> TrialSpec:
        return self.dispatch.spec(trial, config)

    def event(self, kind: str, **fields: Any) -> None:
        """An event in the run folder (the looks' notes: a look taken, trials not needed)."""
        self.store.event(kind, **fields)

    # phases
    def tune(self) -> StopReason | None:
        """The tuning phase; a planned trial Tune ended without a record runs once more (as --resume
        would run it), and one that still has none is recorded `failed` with Ray's reason."""
        stopped, unrecorded = self._tune_pass()
        self.stop_if_failing_fast()
        if stopped is None and self._unrecorded("tune", unrecorded):
            stopped, again = self._tune_pass()
            self.stop_if_failing_fast()
            unrecorded.update(again)
        if stopped is None:
            self._record_never_ran("tune", unrecorded)
        return stopped

    def _unrecorded(self, phase: str, reasons: dict[str, str], wanted=None) -> list[str]:
        """The planned trials of `phase` with no record after it (`wanted`: only those trials);
        logged as run again."""
        missing = [
            t.trial_id
            for t in self.plan.trials
            if t.phase == phase
            and t.trial_id not in self.records
            and t.trial_id not in self.not_needed
            and (wanted is None or wanted(t))
        ]
        if missing:
            self.store.event(
                "trials_rerun",
                trial_ids=missing,
                reasons={m: reasons.get(m, "") for m in missing},
                reason="planned, but the phase ended without their records",
            )
            self.display.note(
                f"{noun('planned trial', len(missing))} ended with no record; running "
                f"{'it' if len(missing) == 1 else 'them'} again: {', '.join(missing[:5])}"
                + (" ..." if len(missing) > 5 else "")
            )
        return missing

    def _record_never_ran(self, phase: str, reasons: dict[str, str], wanted=None) -> None:
        """A planned trial of `phase` that still has no record: recorded `failed`, with what Ray
        said."""
        for t in self.plan.trials:
            if (
                t.phase != phase
                or t.trial_id in self.records
                or t.trial_id in self.not_needed
                or (wanted is not None and not wanted(t))
            ):
                continue
            why = reasons.get(t.trial_id) or "Ray ended the phase without running it"
            error = {
                "attempt": 1,
                "type": NEVER_RAN,
                "traceback": "",
                "message": f"the trial did not run twice: {why}",
            }
            config = self.configs[t.arm]
            record = make_record(
                self.spec(t, config), TrialStatus.FAILED, None, 1, [error], utc_now(), 0.0
            )
            self.dispatch.hooks().trial_ended(record)

    def _tune_pass(self) -> tuple[StopReason | None, dict[str, str]]:
        tuning = self.contract.tuning
        sweeps = []
        for group in self.plan.tune_groups:
            trials = [t for t in self.plan.tune if t.arm == group.arm and t.seed == group.seed]
            done = [self.records[t.trial_id] for t in trials if t.trial_id in self.records]
            todo = [t for t in trials if t.trial_id not in self.records]
            if not todo:
                continue
            # a trial that started before (a second pass, a --resume) runs again with the values it
            # started with
            again = {
                t.trial_id: self.dispatch.started_params[t.trial_id]
                for t in todo
                if t.trial_id in self.dispatch.started_params
            }
            space = arm_space(tuning, group.arm)
            sweeps.append(
                tuning_pieces.Sweep(
                    group.arm,
                    group.seed,
                    [self.spec(t, self.configs[group.arm]) for t in todo],
                    to_optuna(space),
                    tuning.sampler,
                    done,
                    raw=self.dispatch.raw_for(group.arm, group.seed),
                    again=again,
                )
            )
        if not sweeps:
            return None, {}
        self.progress.phase = "tune"
        self.store.event("phase_started", phase="tune", trials=sum(len(s.specs) for s in sweeps))
        self.display.note(
            f"tuning: {sum(len(s.specs) for s in sweeps)} trials in {len(sweeps)} sweeps"
        )
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0:
            return StopReason.BUDGET, {}
        outcome = tuning_pieces.run_tuning(
            sweeps,
            metric=self.contract.metric.name,
            mode=self.contract.metric.mode,
            exposure=self.contract.budget.exposure,
            early_stop=tuning.early_stop,
            resources=self.contract.budget.resources,
            hooks=self.dispatch.hooks(),
            time_budget_s=remaining,
            studies=str(self.store.root / STUDIES_FILE),
            resumed_at=self.resumed_at,
            prestart=True,
            guard=self.dispatch.nodes,
        )
        self.store.event("phase_ended", phase="tune", ended=outcome.ended, stopped=outcome.stopped)
        return outcome.stopped, outcome.unrecorded

    def select(self) -> dict[str, dict]:
        """Each arm's confirmation config; writes selection.json."""
        c = self.contract
        if c.tuning is None:
            return {arm: config for arm, config in self.configs.items()}
        selected = select(c, [r for r in self.records.values() if r["phase"] == "tune"])
        self.store.write_selection(
            {
                "rule": c.tuning.selection.rule,
                "k": c.tuning.selection.k,
                "metric": c.metric.name,
                "mode": c.metric.mode,
                "arms": {arm: s.as_dict() for arm, s in selected.items()},
            }
        )
        self.unselected = {arm: s.reason for arm, s in selected.items() if not s.trial_id}
        self.selected = {arm: s.params for arm, s in selected.items() if s.trial_id}
        for arm, s in selected.items():
            self.store.event(
                "selected",
                arm=arm,
                trial_id=s.trial_id,
                params=s.params,
                score=s.score,
                reason=s.reason,
            )
            self.display.note(
                f"selected for {arm}: {s.trial_id or 'nothing'} {s.params or ''} {s.reason}".strip()
            )
        return {
            arm: apply_params(self.configs[arm], s.params, self.raw_configs.get(arm))
            for arm, s in selected.items()
            if s.trial_id
        }

    def _did_not_vary(self, rows: list[dict]) -> tuple[list[dict], list[dict]]:
        """Arms whose seeds, or whose tuned values, did not vary the run become `invalid` (not an
        incomplete one); and the findings for decisions.json. One rule: trials that should differ
        reported the same curves."""
        c = self.contract
        confirmed = [r for r in self.records.values() if r["phase"] == "confirm"]
        tuning = [r for r in self.records.values() if r["phase"] == "tune"]
        identical = seeds_identical(confirmed)
        tuned = tuned_values_identical(tuning, c.metric.name)
        diverged_confirm = (
            non_finite_metrics(confirmed) if identical else {}
        )  # a cause of identical curves
        diverged_tune = non_finite_metrics(tuning) if tuned else {}
        reasons, rules = {}, {}
        for row in rows:
            whys = {
                rule: why
                for rule, why in (
                    (
                        "tuned_values",
                        tuned_values_did_not_vary(
                            row["arm"], tuned, c.baseline.name, diverged_tune
                        ),
                    ),
                    (
                        "seeds",
                        seeds_did_not_vary(
                            row["arm"],
                            identical,
                            c.baseline.name,
                            c.metric.decision_metric,
                            diverged_confirm,
                        ),
                    ),
                )
                if why is not None
            }
            if whys and row["decision"] != "incomplete":
                reasons[row["arm"]], rules[row["arm"]] = " ".join(whys.values()), list(whys)

        def diverged(arm: str, names: dict[str, list[str]]) -> str:
            return (
                f" (their reports hold NaN or infinite {', '.join(names[arm])}: diverged)"
                if arm in names
                else ""
            )

        findings = [
            {
                "kind": "seeds_identical",
                "arm": arm,
                "seeds": n,
                "message": f"every confirmation seed of {arm} ({n} seeds) reported exactly the "
                f"same curves"
                f"{diverged(arm, diverged_confirm)}: the seeds did not vary the run",
            }
            for arm, n in identical.items()
        ]
        findings += [
            {
                "kind": "tuned_values_identical",
                "arm": arm,
                "trials": n,
                "message": f"the tuned values did not vary the run: {n} tuning trials of arm "
                f"{arm} with "
                f"different params reported the same curves of {c.metric.name}"
                + (diverged(arm, diverged_tune) or "; check that the trainable uses them"),
            }
            for arm, n in tuned.items()
        ]
        return mark_invalid(rows, reasons, rules), findings

    def _nothing_confirmed(self, rows: list[dict]) -> list[dict]:
        """An arm (or the baseline) whose tuning selected nothing was never confirmed: say why, not
        "seeds not run yet" (which reads as pending work that --resume would do)."""
        unselected = self.unselected
        if not unselected or any(
            r["phase"] == "confirm" and r["arm"] in unselected for r in self.records.values()
        ):
            return rows
        out = []
        for row in rows:
            said = []
            for arm in (self.contract.baseline.name, row["arm"]):
                if arm in unselected:
                    tuned = [
                        r for r in self.records.values() if r["phase"] == "tune" and r["arm"] == arm
                    ]
                    groups = error_groups(tuned)
                    error = (
                        f"; {groups[0]['error']} in {groups[0]['count']} of them" if groups else ""
                    )
                    said.append(
                        f"{'the baseline ' if arm != row['arm'] else ''}{arm} was never confirmed: "
                        f"{unselected[arm]}{error}"
                    )
            if said and row["decision"] == "incomplete":
                row = {
                    **row,
                    "reason": f"Incomplete: {'; '.join(said)}. Resuming will not change this: fix "
                    f"the "
                    "trainable or the contract and start a new run.",
                }
            out.append(row)
        return out

    def confirm(self, configs: dict[str, dict]) -> StopReason | None:
        """Run the confirmation trials of the arms in `configs`; what stopped the phase early, or
        None."""
        self.skip_unselected(configs)
        if self.contract.confirmation.looks > 1:  # sequential: batches of seeds, looks in between
            self.progress.phase = "confirm"
            looks = confirm_in_looks(self, configs)
            self.stop_if_failing_fast()
            for trial_id in looks.not_needed:  # never run: no longer planned in the live progress
                t = next(p for p in self.plan.confirm if p.trial_id == trial_id)
                self.progress.cell("confirm", t.arm).planned -= 1
            self.sequential, self.not_needed = looks.sequential, looks.not_needed
            return looks.stopped
        with importing_meanwhile(
            decision_rule.SCIPY
        ):  # the decision's SciPy, while the driver waits on trials
            stopped = self._confirm_pass(configs)
        self.stop_if_failing_fast()
        selected = lambda t: t.arm in configs  # noqa: E731 - the arms with a config to confirm
        if stopped is None and self._unrecorded("confirm", {}, selected):
            stopped = self._confirm_pass(configs)
            self.stop_if_failing_fast()
        if stopped is None:
            self._record_never_ran("confirm", {}, selected)
        return stopped

    def _confirm_pass(self, configs: dict[str, dict]) -> StopReason | None:
        specs = [
            self.spec(t, configs[t.arm])
            for t in self.plan.confirm
            if t.trial_id not in self.records and t.arm in configs
        ]
        if not specs:
            return None
        outcome = self.run_batch(specs, f"confirming: {len(specs)} trials")
        return StopReason.BUDGET if outcome is None else outcome.stopped

    def skip_unselected(self, configs: dict[str, dict]) -> None:
        """Log the confirmation trials of arms without a selected config as skipped."""
        skipped = [t.trial_id for t in self.plan.confirm if t.arm not in configs]
        if skipped:
            self.store.event(
                "trials_skipped",
                phase="confirm",
                trial_ids=skipped,
                reason="the arm has no selected config (no tuning trial completed the full "
                "exposure)",
            )

    def run_batch(
        self,
        specs: list[TrialSpec],
        note: str,
        started: dict | None = None,
        ended: dict | None = None,
    ):
        """One batch of confirmation trials as Ray tasks, between phase_started and phase_ended
        events.

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
        self.store.event(
            "phase_ended",
            phase="confirm",
            ended=outcome.ended,
            stopped=outcome.stopped,
            **(ended or {}),
        )
        return outcome

    def decide(self, state: str) -> list[dict]:
        """The decision per arm from the records so far; writes decisions.json."""
        c = self.contract
        extra: dict[str, Any] = {}
        confirm_records = [r for r in self.records.values() if r["phase"] == "confirm"]
        if (
            c.confirmation.looks > 1
        ):  # the decisions come from the looks (planner._dispatch.sequential_confirm)
            sequential = self.sequential or SequentialConfirmation(c)
            rows = sequential.decisions(sequential.evaluate(self.records))
            extra = {"sequential": sequential.describe()}
        else:
            rows = _decide_arms(c, confirm_records)
        rows = _invalid_on_data(c, rows, confirm_records)
        rows = mark_invalid(rows, _budget_not_matched(c, self.plan, self.records), "budget")
        rows = self._nothing_confirmed(rows)
        rows, self.findings = self._did_not_vary(rows)
        if self.findings:
            extra["findings"] = self.findings
        reaches = tuning_reach(c, self.records.values(), self.selected)
        self.tuning_said = reach_said(reaches)
        if reaches:
            extra["tuning"] = {
                "summary": self.tuning_said,
                "arms": [r.as_dict() for r in reaches],
            }
        self.store.write_decisions(
            {
                "run_state": state,
                "metric": c.metric.decision_metric,
                "test": c.acceptance.test,
                "alpha": c.acceptance.alpha,
                "correction": c.acceptance.correction,
                "min_effect": c.acceptance.min_effect,
                "rule": c.acceptance.rule,
                **extra,
                "decisions": rows,
            }
        )
        return rows


# ------------------------------------------------------------------ the phases of `plan run`


def run(
    contract_path: str | os.PathLike,
    *,
    runs_dir: str | os.PathLike = "runs",
    address: str | None = None,
    resume: str | os.PathLike | None = None,
    quiet: bool = False,
    stream=None,
    resume_argv: list[str] | None = None,
    keep_going: bool = False,
    storage: str | None = None,
) -> RunResult:
    """Run a contract end to end. Raises ContractError/UsageError before anything starts.

    `resume_argv` is the contract path and options as the user typed them: an
    interrupted run's result carries the `plan run ... --resume RUN_DIR` that continues it.
    """
    lineage = ProjectLineage(
        Path(resume).resolve().parent.parent if resume is not None else runs_dir
    )
    contract, contract_dir, configs, plan, raw_configs, script_options = load_and_validate(
        contract_path, lineage
    )
    _check_tracking(contract)
    if storage is not None:  # --storage overrides the contract's `storage:`
        check_storage(storage)
    elif contract.storage is not None:
        storage = contract.storage
        check_storage(storage, "the contract's storage")
    remote = (
        resolve_address(address) is not None
    )  # a malformed --address is refused before the run folder
    store, code = _open_store(
        contract, configs, runs_dir=runs_dir, resume=resume, contract_dir=contract_dir
    )
    _announce(store.root, stream or sys.stdout)
    with RunSession(store) as session:
        if resume is not None:
            previous_wall = _resume_folder(
                store, session.took_over, contract, configs, code, storage=storage
            )
        else:
            _create_folder(
                store, contract, contract_path, contract_dir, configs, plan, raw_configs, lineage
            )
            if storage is not None:
                store.event("storage_chosen", storage=storage)
            previous_wall = 0.0
        runner = Runner(
            contract,
            contract_dir,
            configs,
            raw_configs,
            plan,
            store,
            quiet=quiet,
            stream=stream,
            remote=remote,
            previous_wall_s=previous_wall,
            resumed_at=utc_now() if resume is not None else None,
            keep_going=keep_going,
            script_options=script_options,
            storage=storage,
        )
        resumed = _rerun_cut_short(store, plan, runner) if resume is not None else None
        runner.write_state(RunState.RUNNING)
        runner.mlflow = _live_mlflow(store.root, contract.tracking.mlflow)
        session.stop_on_signals()
        end = _End(
            runner,
            session,
            resume=lambda state, reason: _resume_command(
                state, contract_path, resume_argv, store.root, reason
            ),
        )
        session.on_end(end)
        with runner.display:
            end.stopped = _spent_before(runner, resumed)
            if end.stopped is None:
                if _connect(session, runner, address, Path(runs_dir), resumed):
                    runner.dispatch.guard_nodes()  # every node checked before the first trial
                end.stopped = _tune_select_confirm(runner)
                if end.stopped != StopReason.INTERRUPTED:  # else the job's end lets them go
                    runner.dispatch.release_nodes()
        runner.write_live()
        runner.live.close()
    if contract.tracking.mlflow is not None:
        _log_to_mlflow(store.root, contract.tracking.mlflow, stream or sys.stdout)
    return _result(
        runner,
        end,
        resumed,
        resume_command=_resume_command(
            end.state, contract_path, resume_argv, store.root, end.reason
        ),
    )


def expected_steps(contract) -> float | None:
    """The steps of exposure the estimate model expects the whole run to use (the ETA's measure);
    None when it cannot tell."""
    try:
        phases = estimate_contract(contract)["phases"]
    except (ValueError, ArithmeticError):  # a contract the model has no figure for: no ETA
        return None
    total = 0.0
    for phase in phases:
        steps = phase.get("steps_expected")
        if steps is None and phase.get("steps_range"):
            steps = phase["steps_range"][1]  # the median rule: the most, as the estimate plans
        if steps is None:
            return None
        total += float(steps)
    return total


def _announce(root: Path, stream) -> None:
    """Point runs/<name>/latest at this run and print its folder, before Ray starts: a second
    terminal can follow it at once. A `latest` that cannot be written (a folder there) is a note,
    not a stop; a disk that cannot take it (full, read-only) cannot take the run either, and stops
    it with the disk's one sentence."""
    shown = shown_path(root)
    try:
        write_latest(root.parent.parent, root.parent.name, root.name)
        follow = shown_path(root.parent / "latest")
    except (OSError, RunError) as error:
        if disk_error(error):
            raise
        note = f"note: {shown_path(root.parent / 'latest')} not written: {error}"
        print(terminal_safe(note), file=sys.stderr)
        follow = shown
    print(
        terminal_safe(
            f"run folder: {shown} (follow it: plan status {shlex.quote(follow)} --watch)"
        ),
        file=stream,
        flush=True,
    )


def _check_tracking(contract) -> None:
    """A store MLflow refuses fails here, before any compute is spent."""
    tracking = contract.tracking.mlflow
    if tracking is not None:
        check_mlflow_tracking(tracking.tracking_uri, tracking.experiment or contract.name)


def _open_store(
    contract, configs: dict[str, dict], *, runs_dir, resume, contract_dir: Path
) -> tuple[RunStore, dict[str, Any] | None]:
    """The run folder: a new one, or the one --resume names (refused when today's configs compose
    differently or the trainable's source changed), and on --resume today's code identity, which it
    was checked against."""
    redactor = Redactor.for_run(contract.frozen(), *configs.values())
    if resume is None:
        store = RunStore.create(runs_dir, contract.name)
        store.redactor = redactor
        return store, None
    store = RunStore.open(resolve_run_dir(resume, contract))
    store.redactor = redactor
    _check_logged_configs(store.root, configs)  # configs are recorded exactly (never scrubbed)
    return store, _check_trainable_unchanged(store.root, contract, contract_dir)


def _check_trainable_unchanged(run_dir: Path, contract, contract_dir: Path) -> dict[str, Any]:
    """A resumed run runs the code it logged; refuse when the trainable's source, or a local module
    it imports, changed since (a new run). Today's code identity, as it was compared."""
    logged = (RunFolder(run_dir).identity() or {}).get("code", {})
    was = logged.get("trainable_source_sha256") if isinstance(logged, dict) else None
    now_code = run_identity(contract, contract_dir, trainable_search_path(contract_dir))["code"]
    now = now_code.get("trainable_source_sha256")
    if was != now:
        where = now_code.get("trainable_file") or now_code.get("trainable")
        then_text, now_text = (str(h)[:12] if h else "none recorded" for h in (was, now))
        raise RunError(
            f"the trainable's source {where} changed since {shown_path(run_dir)} started (sha256 "
            f"{then_text} then, {now_text} now): changed code is a new run; start it without "
            f"--resume"
        )
    then_local = logged.get("local_sources") if isinstance(logged, dict) else None
    if isinstance(
        then_local, dict
    ):  # a run folder from before local modules were recorded has none to compare
        now_local = now_code.get("local_sources") or {}
        changed = sorted(
            name
            for name in set(then_local) | set(now_local)
            if then_local.get(name) != now_local.get(name)
        )
        if changed:
            shown = ", ".join(changed[:3]) + (
                f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            )
            raise RunError(
                f"a local module the trainable imports changed since {shown_path(run_dir)} started "
                f"({shown}): the trials before and after would have run different code as one "
                f"recipe; "
                "changed code is a new run, start it without --resume"
            )
    # after the code, which says it in its own words: a config file, a configurator, a data file
    refusal = files_read_refusal(run_dir, contract.command_dir(contract_dir), shown_path(run_dir))
    if refusal is not None:
        raise RunError(refusal)
    return now_code


def _create_folder(
    store: RunStore,
    contract,
    contract_path,
    contract_dir: Path,
    configs: dict[str, dict],
    plan: Plan,
    raw_configs: dict[str, dict],
    lineage: ProjectLineage,
) -> None:
    """Freeze the contract, the configs, the plan and the identity in the new (locked) run
    folder."""
    store.write_frozen(
        contract, str(contract_path), configs, plan.as_dict(), VERSION, raw_configs=raw_configs
    )
    store.write_identity(run_identity(contract, contract_dir, trainable_search_path(contract_dir)))
    store.event("run_started", run_id=store.run_id, planned=plan.planned_count, pid=os.getpid())
    # the project ledger (docs/lineage.md): refused before any trial when it cannot be written
    lineage_record.run_started(
        store.root, contract, configs, lineage.resolved.source if lineage.resolved else None
    )


def _resume_folder(
    store: RunStore,
    took_over: dict | None,
    contract,
    configs: dict[str, dict],
    now_code: dict[str, Any] | None,
    *,
    storage: str | None = None,
) -> float:
    """Heal the (locked) run folder and log the resume; the wall time the run had used before.
    `now_code`: today's code identity, which `_check_trainable_unchanged` compared with the logged
    one; `storage`: the trials' storage of this session (refused when it is not the run's)."""
    refuse_in_place(
        store.root, REWRITTEN
    )  # a folder where a file is replaced: refused before anything runs
    cut = heal_files(store.root)
    _check_same_storage(store, storage)
    state = read_state(store.root)
    previous_wall = float(state.get("budget", {}).get("wall_time_s", 0.0))
    logged_code = (RunFolder(store.root).identity() or {}).get("code", {})
    logged_code = logged_code if isinstance(logged_code, dict) else {}
    now_code = now_code or {}
    changed = logged_code.get("trainable_source_sha256") != now_code.get("trainable_source_sha256")
    store.event(
        "run_resumed",
        pid=os.getpid(),
        previous_state=state.get("state"),
        trainable_source_sha256=now_code.get("trainable_source_sha256"),
        trainable_changed=changed,
    )
    if took_over is not None:
        store.event(
            "stale_lock_taken_over",
            pid=took_over.get("pid"),
            host=took_over.get("host"),
            started=took_over.get("started"),
            reason=took_over.get("reason"),
        )
    for name, size in cut.items():
        store.event("torn_record_dropped", file=name, bytes=size)
    if storage is not None:
        store.event("storage_chosen", storage=storage)
    lineage_record.run_started(store.root, contract, configs, None, resumed=True)
    return previous_wall


def run_storage(run_dir: Path) -> str | None:
    """The trials' storage the run's last session used (its last `storage_chosen` event), or None:
    where its trials' checkpoints are."""
    chosen = [e for e in RunFolder(run_dir).events().records if e["event"] == "storage_chosen"]
    return chosen[-1].get("storage") if chosen else None


def _check_same_storage(store: RunStore, storage: str | None) -> None:
    """A --resume keeps the storage its run used: another one (or none) would leave the checkpoints
    of the trials cut short behind, so it is refused (UsageError, exit 2). A run that had none may
    take one: nothing was kept in a storage that could be lost. The run folder holds the URI as its
    redactor wrote it (a part that is the value of a secret variable cut out)."""
    before = run_storage(store.root)
    if before is None or storage is not None and before in (storage, store.redactor_said(storage)):
        return
    now = f"--storage {storage}" if storage is not None else "no storage"
    raise UsageError(
        f"this run keeps its trials' files in the storage {before}; resume it with the same "
        f"storage (--storage {before}, or the contract's `storage:`): with {now} the checkpoints "
        "of the trials cut short would not be found"
    )


def _rerun_cut_short(store: RunStore, plan: Plan, runner: Runner) -> dict[str, int]:
    """On --resume: the trials an earlier driver started and never recorded. One that had ended as
    that driver stopped is recorded from the record its worker kept; the others are logged and run
    again, a tuning trial with the tuned values it first started with. The counts."""
    started = unfinished(store, runner.records)
    recovered = {trial_id for trial_id in started if runner.recover(trial_id)}
    again = [trial_id for trial_id in started if trial_id not in recovered]
    for trial_id in again:
        params = started[trial_id]
        if params is not None:
            runner.dispatch.started_params.setdefault(trial_id, params)
    if again:
        store.event(
            "trials_rerun",
            trial_ids=again,
            reason="started under a driver that stopped before they ended",
        )
    return {**resume_counts(plan, runner.records, again), "recovered": len(recovered)}


def _connect(
    session: RunSession,
    runner: Runner,
    address: str | None,
    runs_dir: Path,
    resumed: dict[str, int] | None,
) -> bool:
    """Join the cluster or start an embedded Ray, saying which and how long it took (True); on a
    --resume where every planned trial has its record already (a finished run resumed), neither
    (False): nothing is left to run, and the run decides again from its records without Ray."""
    if resumed is not None and resumed["rerun"] == 0 and resumed["not_started"] == 0:
        runner.display.note(format_resumed(resumed) + ": nothing left to run, Ray not started")
        return False
    target = address or os.environ.get("RAY_ADDRESS")
    runner.display.note(
        f"connecting to Ray at {target}" if target else "starting an embedded local Ray"
    )
    t_ray = time.monotonic()
    # an embedded Ray's start is mostly waiting: Ray Tune is imported beside it when tuning trials
    # are left
    tunes = not target and any(
        t.phase == "tune" and t.trial_id not in runner.records for t in runner.plan.trials
    )
    with importing_meanwhile("planner._dispatch.tune" if tunes else None):
        session.start_ray(
            address,
            runner.search_path,
            runs_dir,
            log_dir=runner.store.root,
            contract=runner.contract,
            contract_dir=runner.contract_dir,
            keeper_session=runner.dispatch.session,
        )
    runner.display.note(f"Ray ready in {time.monotonic() - t_ray:.1f} s")
    if resumed is not None:
        runner.display.note(format_resumed(resumed))
    return True


def _spent_before(runner: Runner, resumed: dict[str, int] | None) -> StopReason | None:
    """StopReason.BUDGET for a --resume whose earlier sessions spent all of budget.max_wall_time:
    nothing more may run, so Ray is not started and no phase begins (the run ends as it was,
    budget_exhausted, deciding again from its records); else None."""
    remaining = runner.remaining_s()
    if resumed is None or remaining is None or remaining > 0:
        return None
    runner.display.note(
        f"{format_resumed(resumed)}: the earlier sessions spent budget.max_wall_time "
        f"({runner.contract.budget.max_wall_time}, {runner.previous_wall_s:.1f} s used): "
        "nothing more runs, Ray not started"
    )
    return StopReason.BUDGET


def _tune_select_confirm(runner: Runner) -> StopReason | None:
    """The run's phases: tune, select, confirm; what stopped them early, or None. A stopped tuning
    still selects (selection.json says what the trials so far would give) and confirms nothing."""
    if runner.contract.tuning is None:
        return runner.confirm(runner.select())
    stopped = runner.tune()
    if stopped is None:
        return runner.confirm(runner.select())
    runner.select()
    return stopped


@dataclass
class _End:
    """The end of a run, on the way out of its RunSession: the decision, state.json, run_ended, the
    lineage."""

    runner: Runner
    session: Any = None  # the RunSession: whether its Ray session was lost (RunSession.lost)
    stopped: StopReason | None = None  # what stopped the phases early (set when they return)
    state: RunState = RunState.FAILED
    reason: str = ""
    decisions: list[dict] = field(default_factory=list)
    resume: Any = None  # (state, reason) -> the `plan run ... --resume` line, or None

    def emergency_note(self) -> str:
        """What to print when the run ends from the GCS watch's thread (RunSession._lost)."""
        lines = [
            f"run folder: {shown_path(self.runner.store.root)}",
            f"run state:  {self.state} ({self.reason})",
        ]
        line = self.resume(self.state, self.reason) if self.resume is not None else None
        return "\n".join(lines + ([f"to resume:  {line}"] if line else []))

    def __call__(self, error: BaseException | None) -> BaseException | str | None:
        runner, store = self.runner, self.runner.store
        self.state, self.reason, instead = final_state(
            error, self.stopped, run_dir=store.root, budget=runner.contract.budget.max_wall_time
        )
        if isinstance(
            error, FailedFast
        ):  # an ending, not a crash: the result is printed as every run's is
            instead = HANDLED
        lost = self.session.lost if self.session is not None else None
        if (
            lost is not None
        ):  # the GCS went: interrupted, resumable (not Ray's exit 1 with state `running`)
            self.state, self.reason = (
                RunState.INTERRUPTED,
                f"{RAY_LOST}: {lost}; what ended is kept",
            )
            instead = HANDLED if error is not None else None
        if error is None and self.state == RunState.COMPLETED:
            self.reason = _completed_reason(runner)
        decide_error: Exception | None = None
        try:
            self.decisions = runner.decide(self.state)
        # a full disk: the steps below may fail too; the lock is released and Ray stopped
        except OSError as failure:
            if not disk_error(
                failure
            ):  # anything else that kept decisions.json from being written is said
                decide_error = failure
                self.state, self.reason = (
                    RunState.FAILED,
                    (
                        f"every trial that ran is kept, but decisions.json could not be written: "
                        f"{failure}"
                    ),
                )
        except Exception as failure:  # never skip the bookkeeping below; raised once it is done
            decide_error = failure
            self.state, self.reason = (
                RunState.FAILED,
                (
                    f"every trial that ran is kept, but the decision could not be made: "
                    f"{type(failure).__name__}: {failure}"
                ),
            )
        for step in (
            lambda: add_used_packages(store.root, runner.records.values()),
            lambda: add_files_read(store.root, runner.records.values()),
            lambda: runner.write_state(self.state, self.reason),
            lambda: store.event("run_ended", state=self.state, reason=self.reason),
        ):
            try:  # on a full disk each may fail; the lock is released and Ray stopped all the same
                step()
            except OSError:
                pass
        lineage_record.run_ended(
            store.root, self.state, self.reason, self.decisions, runner.contract.acceptance.alpha
        )  # warns, never raises
        if error is None and decide_error is not None:
            return raised_from(
                RunError(
                    f"{self.reason}; the run folder {store.root} is closed and unlocked "
                    "(run with --debug for the trace)"
                ),
                decide_error,
            )
        return instead


def _completed_reason(runner: Runner) -> str:
    """Why a run whose phases all returned is `completed`, naming planned trials that did not
    run."""
    reason = "all planned trials ended"
    not_needed = runner.not_needed  # sequential looks stopped early
    missing = [
        t
        for t in runner.plan.trials
        if t.trial_id not in runner.records and t.trial_id not in not_needed
    ]
    unselected = sorted(
        {t.arm for t in missing if t.phase == "confirm" and t.arm in runner.unselected}
    )
    other = [t for t in missing if not (t.phase == "confirm" and t.arm in runner.unselected)]
    if missing:  # what the run folder shows, never a guessed cause
        said = []
        if unselected:
            n = sum(1 for t in missing if t.arm in unselected and t.phase == "confirm")
            said.append(
                f"{noun('confirmation trial', n)} of {', '.join(unselected)} not run: no config "
                f"was "
                "selected (see selection.json)"
            )
        if other:
            said.append(
                f"{noun('planned trial', len(other))} with no record: "
                f"{', '.join(t.trial_id for t in other[:5])}" + (" ..." if len(other) > 5 else "")
            )
        reason = "every trial that could run ended; " + "; ".join(said)
    if not_needed:
        reason += (
            f"; {len(not_needed)} confirmation trials not needed (the sequential "
            f"confirmation stopped early)"
        )
    return reason


def _resume_command(
    state: RunState, contract_path, resume_argv: list[str] | None, run_dir: Path, reason: str = ""
) -> str | None:
    """How to continue an interrupted run, or one whose Ray session was lost: `plan run ...
    --resume RUN_DIR`."""
    if state != RunState.INTERRUPTED and not (
        state == RunState.FAILED and reason.startswith(RAY_LOST)
    ):
        return None
    argv = list(resume_argv or [str(contract_path)])
    if reason.startswith(RAY_LOST) and "--address" in argv:  # that head is gone: the next one's
        at = argv.index("--address")  # address comes from RAY_ADDRESS or a new --address
        del argv[at : at + 2]
    return shlex.join(["plan", "run", *argv, "--resume", shown_path(run_dir)])


def _result(
    runner: Runner, end: _End, resumed: dict | None, *, resume_command: str | None
) -> RunResult:
    contract = runner.contract
    records = list(runner.records.values())
    failures = [
        {
            "trial_id": r["trial_id"],
            "status": r["status"],
            "message": (r["errors"][-1]["message"] if r.get("errors") else ""),
        }
        for r in records
        if r["status"] in FAILED
    ]
    return RunResult(
        runner.store.root,
        end.state,
        end.reason,
        end.decisions,
        runner.wall_s(),
        len(runner.records),
        failures,
        resume_command=resume_command,
        resumed=resumed,
        errors=error_groups(records),
        no_value_arms=arms_without_value(contract, records),
        heldout_exposures=_heldout_exposures(contract, records),
        heldout=contract.metric.heldout,
        findings=list(runner.findings),
        notes=note_groups(cast(list[TrialRecord], records)),
        tuning=runner.tuning_said,
    )


# the rules an invalid row names (decide.mark_invalid's `invalid_rules`) -> the summary's words
INVALID_WHY = {
    "seeds": "the seeds did not vary the run",  # _stats.decide.seeds_did_not_vary
    # _stats.decide.tuned_values_did_not_vary
    "tuned_values": "the tuned values did not vary the run",
    "budget": "the tuning budget was not matched",  # _budget_not_matched
    "data": "the data broke the contract's data section",  # _data.checks.invalid_reasons
}


def invalid_why(row: dict) -> str:
    """The rules an `invalid` decision row says were broken, in the run summary's words."""
    said = [INVALID_WHY.get(rule, str(rule)) for rule in row.get("invalid_rules") or []]
    return " and ".join(said) or "the run broke the contract"


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
        diverged = r.get("status") == TrialStatus.DIVERGED or (
            value is not None and not math.isfinite(value)
        )
        if (diverged and diverged_value is not None) or (
            r.get("status") == TrialStatus.COMPLETED and not diverged and value is not None
        ):
            usable.add(r.get("arm"))
    return [arm.name for arm in contract.all_arms if arm.name not in usable]


def _heldout_exposures(contract, records: list[dict]) -> int:
    """Tuning trials that reported metric.heldout: one per trial (the ledger's
    `tuning_exposures`)."""
    return len(heldout_tuning_trials(cast(list[TrialRecord], records), contract.metric.heldout))


def resume_counts(plan: Plan, records: dict[str, dict], again: list[str]) -> dict[str, int]:
    """On --resume: the planned trials whose records are kept, those cut short that run again, the
    rest."""
    planned = {t.trial_id for t in plan.trials}
    kept = len(planned & set(records))
    rerun = len(planned & set(again))
    return {"kept": kept, "rerun": rerun, "not_started": len(planned) - kept - rerun}


def format_resumed(counts: dict[str, int]) -> str:
    def trials(n: int) -> str:
        return f"{n} trial{'s' if n != 1 else ''}"

    recovered = counts.get("recovered", 0)
    kept = (
        f" ({recovered} of them ended as the run stopped: recorded now from their trial folders)"
        if recovered
        else ""
    )
    return (
        f"resumed: {trials(counts['kept'])} kept{kept}, {trials(counts['rerun'])} run again (cut "
        f"short when the "
        f"run stopped), {trials(counts['not_started'])} not started yet"
    )


def _live_mlflow(run_dir: Path, tracking) -> LiveMlflow | None:
    """The MLflow logger of trials as they end (None without tracking.mlflow, or when MLflow
    refuses:
    a warning, and the end logs the whole run)."""
    if tracking is None:
        return None
    try:
        return LiveMlflow(run_dir, tracking.tracking_uri, tracking.experiment)
    except MlflowTrackingError as error:
        print(f"warning: trials are not logged to MLflow as they end: {error}", file=sys.stderr)
        return None


def _log_to_mlflow(run_dir: Path, tracking, stream) -> None:
    """Copy the finished run folder to MLflow; a failure is a warning, the run folder stays the
    record."""
    try:
        summary = log_run_to_mlflow(
            run_dir, tracking_uri=tracking.tracking_uri, experiment=tracking.experiment
        )
    except MlflowTrackingError as error:
        print(f"warning: the run was not logged to MLflow: {error}", file=sys.stderr)
        return
    print(f"mlflow: {summary.trials_logged} trials logged to {summary.tracking_uri}", file=stream)


def _check_logged_configs(run_dir: Path, configs: dict[str, dict]) -> None:
    """A resumed run uses the configs it logged; refuse when today's config files compose
    differently."""
    for arm, config in configs.items():
        path = run_dir / "configs" / f"{arm}.yaml"
        logged = read_yaml(path, root=run_dir)
        if logged is None:
            raise RunError(f"{path} is missing; cannot resume this run")
        diff = config_diff(logged, config)
        if diff:
            key, was, now = diff[0]
            raise RunError(
                f"arm {arm!r} composes differently from the run's {path.name} ({key}: "
                f"{yaml_value(was)} "
                f"then, {yaml_value(now)} now): the config files changed, which makes a new run; "
                f"start it "
                "without --resume"
            )


def read_state(run_dir: str | os.PathLike) -> dict[str, Any]:
    return RunFolder(Path(run_dir)).state() or {}


def format_result(result: RunResult) -> str:
    """The end of `plan run`: the run state, then the decision per arm, kept apart."""
    lines = [
        f"run folder: {shown_path(result.run_dir)}",
        f"run state:  {result.state} ({result.reason}); {noun('trial', result.trials_ended)} "
        f"ended in "
        f"{result.wall_time_s:.1f} s",
    ]
    if result.resumed is not None:
        lines.insert(1, format_resumed(result.resumed))
    if (dashboard := dashboard_command(result.run_dir)) is not None:
        lines.append(terminal_safe(f"studies:    {dashboard}"))
    if result.failures:
        lines.append(
            f"failures:   {noun('trial', len(result.failures))}: "
            + ", ".join(f"{f['trial_id']} {f['status']}" for f in result.failures[:5])
            + (" ..." if len(result.failures) > 5 else "")
        )
    for finding in result.findings:
        lines.append(f"warning:    {finding['message']}")
    for group in result.notes[
        :5
    ]:  # a declared metric no row held: said, never dropped (docs/command-trainables.md)
        lines.append(
            f"warning:    {group['note']} (in {noun('trial', group['count'])}, first "
            f"{group['first']})"
        )
    for group in [g for g in result.errors if g["error"] not in result.reason][
        :5
    ]:  # fail fast's names it
        lines.append(
            f"error:      {group['error']} (in {noun('trial', group['count'])}, "
            f"first {group['first']}{on_nodes(group)})"
        )
    if result.heldout_exposures:
        lines.append(
            f"warning:    {result.heldout_exposures} tuning trial(s) reported the held-out metric "
            f"{result.heldout!r}: test exposure (one per trial; see plan status)"
        )
    if result.no_value_arms and result.state == RunState.COMPLETED:
        lines.append(
            f"no value:   arm{'s' if len(result.no_value_arms) > 1 else ''} "
            f"{', '.join(result.no_value_arms)} ended with no usable confirmation value: nothing "
            f"to "
            f"decide on (exit {EXIT_NO_VALUE})"
            + (
                f"; every failure above is {result.errors[0]['error']}"
                if len(result.errors) == 1
                else ""
            )
        )
    invalid: dict[str, list[str]] = {}  # why -> the arms it makes invalid
    for d in result.decisions:
        if d.get("decision") == "invalid":
            invalid.setdefault(invalid_why(d), []).append(d["arm"])
    if invalid and result.state == RunState.COMPLETED:
        lines.append(
            "invalid:    "
            + "; ".join(
                f"arm{'s' if len(arms) > 1 else ''} {', '.join(arms)}: the run completed, but {why}"
                for why, arms in invalid.items()
            )
            + f", so there is no valid decision (exit {EXIT_NO_VALUE})"
        )
    incomplete = [
        d["arm"]
        for d in result.decisions
        if d.get("decision") == "incomplete" and d["arm"] not in result.no_value_arms
    ]
    if incomplete and result.state == RunState.COMPLETED:
        lines.append(
            f"incomplete: arm{'s' if len(incomplete) > 1 else ''} {', '.join(incomplete)}: a "
            f"confirmation "
            "result of the arm or of the baseline is missing, failed or broke the protocol (the "
            "reason "
            f"below), so the comparison tested nothing (exit {EXIT_NO_VALUE})"
        )
    lines.append("decisions:")
    for d in result.decisions:
        if d["effect"] is None:
            lines.append(f"  {d['arm']}: {d['decision']} ({d['reason']})")
        else:

            def num(x, spec):  # None: an unbounded CI, or no fixed-sample p after sequential looks
                return "none" if x is None else format(x, spec)

            looks = f"  at look {len(d['looks'])}" if d.get("looks") else ""
            p = "" if d["p_value"] is None else f"p={d['p_value']:.3g}  "
            lines.append(
                f"  {d['arm']}: {d['decision']}  effect {d['effect']:+.4g}  "
                f"CI [{num(d['ci_low'], '+.4g')}, {num(d['ci_high'], '+.4g')}]  {p}"
                f"n={d['n_arm']} vs {d['n_baseline']}{looks}"
            )
        if d["decision"] == "invalid":  # the data broke the contract's data section (docs/data.md)
            lines.append(
                f"    {d.get('invalid_reason') or d['reason']}"
            )  # the short why (_stats.decide.mark_invalid)
        elif (
            d["effect"] is not None
            and d.get("ci_low") is None
            and d.get("ci_high") is None
            and d.get("reason")
        ):
            lines.append(
                f"    {d['reason']}"
            )  # no CI (a degenerate spread): the numbers alone do not say why
    # the CI covers seed noise only, not how far tuning searched: said beside the decisions
    if result.tuning and result.decisions:
        lines.append(f"tuning:     {result.tuning}")
    lines += [
        f"lineage:    {line}"
        for line in forking_lines(RunFolder(Path(result.run_dir)).json("lineage.json"))
    ]
    if (
        result.resume_command
    ):  # the last line: the exact command that continues the run (docs/commands.md)
        lines.append(f"to resume:  {result.resume_command}")
    return "\n".join(lines)
