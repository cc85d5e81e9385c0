"""`plan run`: one contract from the YAML file to a decision per arm.

    run(contract)
      prepare      validate the contract, open (resume) or create the run folder
                   (planner._dispatch.run_folder)
      session      RunSession: the lock, the stop signals, Ray, the end's bookkeeping
      tune         every sweep through one Ray Tune Tuner (Runner.tune: planner._dispatch.runner,
                   planner._dispatch.tune)
      select       each arm's confirmation config; selection.json
      confirm      fixed-config Ray tasks (planner._dispatch.fixed), in looks when
                   confirmation.looks > 1 (planner._dispatch.sequential_confirm)
      decide       decisions.json, on the way out, whatever stopped the run
                   (planner._dispatch.decision)
      finish       state.json, run_ended, the lineage; the RunResult (planner._dispatch.run_end)

Every ended trial is written as it ends; the run state (completed /
budget_exhausted / interrupted / failed) is kept apart from the decisions.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from planner._contract.validate import load_contract
from planner._core.errors import MlflowTrackingError, UsageError
from planner._core.status import RunState, StopReason
from planner._core.text import utc_now
from planner._dispatch.cluster import resolve_address
from planner._dispatch.ray_shutdown import (
    ray_shutdown_deferred,  # noqa: F401 - the CLI's name for it (it imports only the driver)
)
from planner._dispatch.ray_start import importing_meanwhile
from planner._dispatch.run_end import RunEnd, RunResult, resume_command, run_result
from planner._dispatch.run_folder import (
    announce,
    create_folder,
    open_store,
    rerun_cut_short,
    resume_folder,
    resumed_said,
)
from planner._dispatch.runner import Runner
from planner._dispatch.session import RunSession
from planner._dispatch.specs import at_budget
from planner._lineage.resolve import ProjectLineage
from planner._plan.trials import make_plan
from planner._results.mlflow import LiveMlflow, check_mlflow_tracking, log_run_to_mlflow
from planner._trial.storage import check_storage


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
    store, code = open_store(
        contract, configs, runs_dir=runs_dir, resume=resume, contract_dir=contract_dir
    )
    with RunSession(store) as session:
        if resume is not None:
            previous_wall = resume_folder(
                store, session.took_over, contract, configs, code, storage=storage
            )
        else:
            create_folder(
                store, contract, contract_path, contract_dir, configs, plan, raw_configs, lineage
            )
            if storage is not None:
                store.event("storage_chosen", storage=storage)
            previous_wall = 0.0
        # once the folder holds its run (run.json): a `plan status` of what this prints reads it
        announce(store.root, stream or sys.stdout)
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
        resumed = rerun_cut_short(store, plan, runner) if resume is not None else None
        runner.write_state(RunState.RUNNING)
        runner.mlflow = _live_mlflow(store.root, contract.tracking.mlflow)
        session.stop_on_signals()
        end = RunEnd(
            runner,
            session,
            resume=lambda state, reason: resume_command(
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
    return run_result(
        runner,
        end,
        resumed,
        resume_command=resume_command(
            end.state, contract_path, resume_argv, store.root, end.reason
        ),
    )


def _check_tracking(contract) -> None:
    """A store MLflow refuses fails here, before any compute is spent."""
    tracking = contract.tracking.mlflow
    if tracking is not None:
        check_mlflow_tracking(tracking.tracking_uri, tracking.experiment or contract.name)


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
        runner.display.note(resumed_said(resumed) + ": nothing left to run, Ray not started")
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
        runner.display.note(resumed_said(resumed))
    return True


def _spent_before(runner: Runner, resumed: dict[str, int] | None) -> StopReason | None:
    """StopReason.BUDGET for a --resume whose earlier sessions spent all of budget.max_wall_time:
    nothing more may run, so Ray is not started and no phase begins (the run ends as it was,
    budget_exhausted, deciding again from its records); else None."""
    remaining = runner.remaining_s()
    if resumed is None or remaining is None or remaining > 0:
        return None
    runner.display.note(
        f"{resumed_said(resumed)}: the earlier sessions spent budget.max_wall_time "
        f"({runner.contract.budget.max_wall_time}, {runner.previous_wall_s:.1f} s used): "
        "nothing more runs, Ray not started"
    )
    return StopReason.BUDGET


def _tune_select_confirm(runner: Runner) -> StopReason | None:
    """The run's phases: tune, select, confirm; what stopped them early, or None. A stopped tuning
    still selects (selection.json says what the trials so far would give) and confirms nothing."""
    if runner.contract.tuning is None:
        return runner.confirm(runner.select())
    try:
        stopped = runner.tune()
        if stopped is None:
            return runner.confirm(runner.select())
        runner.select()
        return stopped
    finally:
        runner.tidy_stopped()


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
