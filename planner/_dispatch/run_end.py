"""The end of `plan run`, on the way out of its session whatever stopped it: the decision,
state.json, run_ended and the lineage (`RunEnd`), how to resume, and the `RunResult`."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from planner._core.errors import (
    EXIT_INCOMPLETE,
    EXIT_NO_VALUE,
    EXIT_OK,
    FailedFast,
    RunError,
    disk_failed,
)
from planner._core.records import TrialRecord, error_groups, final_value, note_groups
from planner._core.status import FAILED, RunState, StopReason, TrialStatus
from planner._core.text import noun, shown_path
from planner._dispatch.runner import Runner
from planner._dispatch.session import HANDLED, RAY_LOST, final_state, raised_from
from planner._lineage import record as lineage_record
from planner._store.facts import heldout_tuning_trials
from planner._store.identity import add_files_read, add_used_packages

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


@dataclass
class RunEnd:
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
            # anything else that kept decisions.json from being written is said
            if not disk_failed(failure):
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


def resume_command(
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


def run_result(
    runner: Runner, end: RunEnd, resumed: dict | None, *, resume_command: str | None
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
