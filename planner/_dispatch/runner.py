"""The state of one `plan run` between its phases (`Runner`): the live progress and state.json as
trials end, and the phases it runs: tune, select, confirm, decide."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

# called through its module (tests swap the rule there)
import planner._stats.decide as decision_rule
from planner._contract.paths import apply_params
from planner._core.errors import FailedFast, MlflowTrackingError, RunError
from planner._core.lazy import lazy_import
from planner._core.status import RunState, StopReason, TrialStatus
from planner._core.text import noun, utc_now
from planner._data.checks import data_violations
from planner._dispatch.decision import (
    NEVER_RAN,
    budget_not_matched,
    decide_arms,
    did_not_vary,
    invalid_on_data,
    nothing_confirmed,
    tuning_reach,
)
from planner._dispatch.failfast import FailFast
from planner._dispatch.progress import Progress, make_display
from planner._dispatch.ray_start import importing_meanwhile
from planner._dispatch.sequential_confirm import SequentialConfirmation, confirm_in_looks
from planner._dispatch.specs import Dispatch
from planner._plan.estimate import estimate as estimate_contract
from planner._plan.explored import reach_said
from planner._plan.space import arm_space, to_optuna
from planner._plan.trials import Plan
from planner._results.mlflow import LiveMlflow
from planner._stats.decide import mark_invalid
from planner._stats.select import select
from planner._store.live import STUDIES_FILE, LiveWriter, new_progress
from planner._store.schema import check_trial
from planner._store.writer import RunStore
from planner._trial import checkpoints
from planner._trial.attempts import Ledger
from planner._trial.protocol import make_record
from planner._trial.spec import TrialSpec

# Ray Tune and Optuna, loaded when tuning starts (a run without tuning never loads them)
tuning_pieces = lazy_import("planner._dispatch.tune")


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

    def tidy_stopped(self) -> None:
        """The checkpoints of the tuning trials the scheduler stopped, tidied once more as the run
        ends (`command.checkpoint.keep`). Each was tidied when Tune stopped it, but Tune does not
        wait for the trial's worker, and its script, until the worker ends it, could still save one
        more. On another node's disk nothing is found here, and nothing is removed."""
        checkpoint = (self.dispatch.command or {}).get("checkpoint")
        for record in self.records.values():
            if record["phase"] == "tune" and record["status"] == TrialStatus.EARLY_STOPPED:
                with contextlib.suppress(OSError):  # housekeeping: the records stand either way
                    checkpoints.tidy(self.store.trial_dir(record["trial_id"]), checkpoint)

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
            rows = decide_arms(c, confirm_records)
        rows = invalid_on_data(c, rows, confirm_records)
        rows = mark_invalid(rows, budget_not_matched(c, self.plan, self.records), "budget")
        rows = nothing_confirmed(c, self.records, self.unselected, rows)
        rows, self.findings = did_not_vary(c, self.records, rows)
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
