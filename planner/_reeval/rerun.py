"""`plan reeval RUN_DIR --arm NAME`: re-run an arm's selected config exactly as logged.

    run folder -> logged identity and effective config -> dispatch -> compare with the log

`prepare(run_dir, arm, ...)` (planner._reeval.prepare) reads the run folder alone, no Ray, and
plans. `run_reeval(plan)` here dispatches the trials through Ray the way `plan run` confirms (the
driver's `Dispatch`: the same specs, limits, hooks and Ray tasks; phase `reeval`, full exposure, no
early stopping), appends them to trials.jsonl and one record to reevals.jsonl, and returns the
comparison (planner._reeval.comparison: pure functions of values). Only the CLI prints.

Exit codes (ReevalResult.exit_code): 0 the logged results reproduce within the
tolerance (or only new seeds ran, and all ran); 1 a logged seed does not
reproduce; 3 trials failed to run. An interrupted reeval (Ctrl-C, SIGTERM) is
logged with verdict `interrupted` and ends as a KeyboardInterrupt (130). Refusals raise: UsageError
(2) for an unknown arm, a bad option or the held-out cap; RunError (3) for a run folder
that cannot be re-evaluated.
"""

from __future__ import annotations

import os

from planner._core.errors import EXIT_INTERRUPTED, RunError, UsageError
from planner._core.redact import Redactor
from planner._core.status import StopReason
from planner._core.text import utc_now
from planner._core.version import VERSION
from planner._dispatch.cluster import resolve_address
from planner._dispatch.session import RunSession
from planner._dispatch.specs import Dispatch
from planner._plan.trials import PlannedTrial
from planner._reeval.comparison import ReevalResult, result_of
from planner._reeval.prepare import ReevalPlan, heldout_refusal, next_reeval_number, prepare
from planner._store import facts
from planner._store import read as rf
from planner._store.writer import RunStore


def run_reeval(plan: ReevalPlan, *, address: str | None = None) -> ReevalResult:
    """Run the planned reeval trials through Ray, log them, compare them with the log.

    The RunSession `plan run` uses holds the folder: its lock (as `plan reeval`), SIGTERM stopping
    a reeval like Ctrl-C, and Ray, shut down with the lock released whatever happens.
    """
    c = plan.contract
    store = RunStore.open(plan.run_dir)
    store.redactor = Redactor.for_run(
        c.frozen(), *plan.arm_configs.values()
    )  # what a run scrubs, a reeval scrubs
    started = utc_now()
    with RunSession(store, command="plan reeval") as session:
        session.stop_on_signals()
        _recheck_under_lock(plan)
        # the driver's own way to spec, send and log trials; a command trainable is built from the
        # logged configs, and on a cluster the code ships (no driver paths)
        raw_configs = rf.open_run(
            plan.run_dir
        ).unresolved_configs()  # a key that interpolates the seed follows it
        dispatch = Dispatch.open(
            c,
            plan.contract_dir,
            plan.arm_configs,
            store,
            contract_sha256=plan.contract_sha256,
            raw_configs=raw_configs,
            search_path=plan.search_path,
            remote=resolve_address(address) is not None,
        )
        specs = [
            dispatch.spec(
                PlannedTrial(plan.trial_id(seed), "reeval", plan.arm, seed, 0),
                plan.config,
                params=plan.params,
            )
            for seed in plan.seeds
        ]
        try:
            session.start_ray(
                address,
                plan.search_path,
                plan.run_dir.parent.parent,
                log_dir=plan.run_dir,
                contract=c,
                contract_dir=plan.contract_dir,
                keeper_session=dispatch.session,
            )
        except RunError:
            raise
        except (
            Exception
        ) as error:  # a local Ray that cannot start (an overloaded machine): a sentence
            raise RunError(
                f"cannot start a local Ray for the reeval: {error}; nothing ran"
            ) from None
        store.event(
            "reeval_started",
            reeval=plan.reeval_number,
            arm=plan.arm,
            seeds=plan.seeds,
            tolerance=plan.tolerance,
        )
        outcome = dispatch.run_fixed(specs)
        result = result_of(plan, dispatch.records)
        if outcome.stopped == StopReason.INTERRUPTED:
            result.verdict = result.record["verdict"] = "interrupted"
            result.exit_code = result.record["exit_code"] = EXIT_INTERRUPTED
        result.record.update(started=started, ended=utc_now(), planner_version=VERSION)
        store.append("reevals.jsonl", result.record)
        store.event("reeval_ended", reeval=plan.reeval_number, verdict=result.verdict)
        if outcome.stopped == StopReason.INTERRUPTED:
            raise KeyboardInterrupt
        return result
    # not reached: a session swallows an error only when an `on_end` bookkeeping says it handled it,
    # and a reeval gives none
    raise AssertionError("plan reeval's session swallowed an error")


def _recheck_under_lock(plan: ReevalPlan) -> None:
    """Another reeval may have ended between `prepare` and the lock: re-count the ledger and
    renumber."""
    folder = rf.RunFolder(plan.run_dir)
    frozen = folder.contract()
    plan.ledger = facts.heldout_ledger(folder.trials(slim=frozen).records, frozen)
    refusal = heldout_refusal(plan.ledger, len(plan.seeds))
    if refusal:
        raise UsageError(refusal)
    plan.reeval_number = next_reeval_number(
        folder.reevals().records, folder.trials(slim=frozen).records
    )


def reeval(
    run_dir: str | os.PathLike,
    arm: str,
    *,
    seeds: list[int] | None = None,
    tolerance: float = 0.0,
    address: str | None = None,
) -> ReevalResult:
    """`plan reeval RUN_DIR --arm ARM` from Python: plan (refusing early, before Ray), run, compare.

    `prepare_reeval` alone reads the folder and plans without running anything.
    """
    return run_reeval(prepare(run_dir, arm, seeds=seeds, tolerance=tolerance), address=address)
