"""Why a trial ended short of what the protocol asks: its decision metric never reported, a split
`data.require` needs not logged, or its reports stopping before the budget (with what most often
causes that, as a clause of the protocol error)."""

from __future__ import annotations

import sys
import types

from planner._data.checks import missing_required
from planner._trial.reports import nearest_name
from planner._trial.spec import TrialSpec
from planner._trial.trial import Trial


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


def report_steps(trial: Trial) -> list[int]:
    return [r["step"] for r in trial.reports if isinstance(r.get("step"), int)]


def _one_interval(steps: list[int]) -> int | None:
    """The interval the reports came at, when two or more came at one positive interval."""
    gaps = {b - a for a, b in zip(steps, steps[1:], strict=False)}
    every = gaps.pop() if len(steps) >= 2 and len(gaps) == 1 else None
    return every if every is not None and every > 0 else None


def _reported(every: int, steps: list[int]) -> str:
    return f"; the script reported every {every} steps (at {', '.join(map(str, steps[-3:]))})"


def _interval_short(budget: int, steps: list[int]) -> str:
    """When the reports came at one interval and the next would have passed the budget: the clause
    that says so ('' otherwise). nanoGPT evaluates at multiples of eval_interval: 75 into 200 ends
    at 150."""
    every = _one_interval(steps)
    if every is None or steps[-1] + every <= budget:
        return ""
    return (
        f"{_reported(every, steps)}, and "
        f"the budget of {budget} is not a multiple of {every}: its next evaluation would have been "
        "at step "
        f"{steps[-1] + every}, past the budget. Make budget.exposure a multiple of the evaluation "
        f"interval (or the interval a divisor of {budget}), or evaluate at the last step too"
    )


def _last_evaluation_missed(spec: TrialSpec, steps: list[int]) -> str:
    """When the reports came at one interval (a single report: at its own step from 0) and the next
    would have been at the budget itself: the clause that says the script stopped before its last
    evaluation ('' otherwise). A loop over range(N) steps ends at step N-1 and never reaches its
    evaluation at step N (makemore's `step % 500 == 0` before `step += 1`)."""
    every = _one_interval(steps) or (steps[0] if len(steps) == 1 and steps[0] > 0 else None)
    budget = spec.budget
    if every is None or steps[-1] + every != budget:
        return ""
    command = spec.extra.get("command") or {}
    key = command.get("budget_key")
    way_out = (
        f"or leave {key} out of command.budget_key and set it in config.values one past the "
        f"budget ({key}: {budget + 1}), so that its last evaluation is at step {budget}"
        if key
        else f"or have it train one step past the budget, so that it evaluates at step {budget}"
    )
    return (
        f"{_reported(every, steps)} and stopped one interval short: its next evaluation would "
        f"have been at step {budget}, the budget itself. A loop over range(N) steps ends at step "
        "N-1 and never reaches its evaluation at step N: have the script evaluate after its last "
        f"step too, {way_out}"
    )


def why_short(
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
        # a script whose evaluations came at one interval and stopped one interval short printed
        # its training steps past the last one too: that clause names the way out
        if steps and (missed := _last_evaluation_missed(spec, steps)):
            return missed
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
    if steps and (missed := _last_evaluation_missed(spec, steps)):
        return missed
    if last_step is not None and last_step < spec.budget:
        return (
            "; a script that ends its training early by itself (Lightning's EarlyStopping, "
            "Hugging Face's "
            "EarlyStoppingCallback, a patience loop) gives the arms unequal budgets: remove that, "
            "and let "
            "tuning.early_stop stop trials by one rule for every arm"
        )
    return ""


def never_reported(spec: TrialSpec, trial: Trial) -> str | None:
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


def missing_splits(spec: TrialSpec, trial: Trial) -> str | None:
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
