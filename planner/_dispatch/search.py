"""The Optuna boundary of a run: an arm's sampler, and the finished trials a resumed study is told.

The space and its Optuna form (`to_optuna`) are planner._plan.space's.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
from typing import Any

from planner._core.lazy import lazy_import
from planner._core.records import final_value, finite_final_value
from planner._core.status import TrialStatus
from planner._plan.space import grid

optuna = lazy_import("optuna")  # imported when a run builds its first study


def make_sampler(sampler, space: dict[str, Any], drawn: int = 0):
    """The declared Optuna sampler (tpe | random | grid), seeded for a sweep whose sampler already drew values
    for `drawn` trials (those that started in an earlier session: ended, or run again with their values).

    A new sweep (`drawn` 0) gets the declared seed. A resumed one gets a seed drawn from (declared seed,
    drawn): the declared seed's sequence would start over and draw the earlier trials' params again (a trial
    cut short by the interrupt, run again with its own values, had its point tested twice).
    """
    seed = sampler.seed if not drawn else resumed_seed(sampler.seed, drawn)
    if sampler.name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if sampler.name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.GridSampler(grid(space), seed=seed)


def resumed_seed(seed: int, drawn: int) -> int:
    """The seed of a sweep resumed after `drawn` trials had their values: reproducible, distinct for each count."""
    digest = hashlib.sha256(f"planner-resumed-sweep:{seed}:{drawn}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def finished_trial(record: dict[str, Any], metric: str, space: dict[str, Any]) -> Any:
    """A finished trial of a resumed sweep (its record) as its rebuilt study takes it (`study.add_trial`).

    Every status is told, as a running study was told it: `completed` with its final value (COMPLETE),
    `early_stopped` as PRUNED, any other end (failed, diverged, ...) as FAIL; the values of `metric` its
    record holds by step go with it. None when its params do not fit `space` (the study goes without it)."""
    state = optuna.trial.TrialState
    value = (
        finite_final_value(record, metric)
        if record.get("status") == TrialStatus.COMPLETED
        else None
    )
    how = (
        state.COMPLETE
        if value is not None
        else state.PRUNED
        if record.get("status") == TrialStatus.EARLY_STOPPED
        else state.FAIL
    )
    steps = {}
    for report in record.get("reports") or []:
        step, at = report.get("step"), final_value({"reports": [report]}, metric)
        if isinstance(step, int) and at is not None and math.isfinite(at):
            steps[step] = at
    try:
        return optuna.trial.create_trial(
            state=how,
            value=value,
            params=dict(record.get("params") or {}),
            distributions=space,
            intermediate_values=steps or None,
        )
    except (ValueError, TypeError):
        return None


def grid_left(
    sampler, space: dict[str, Any], records: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The grid points no finished trial of a resumed grid sweep ran, in the sampler's own (seeded) order:
    what the rebuilt study is given to run next (`enqueue_trial`), each once. [] for another sampler.

    A GridSampler hands trial number i the i-th point of its shuffled grid (and only then looks at what
    ran): the finished trials, told first, take the first numbers, so the points it would give the rest
    are not those left, and a point that has a record (completed, stopped early or failed) would run again."""
    if not isinstance(sampler, optuna.samplers.GridSampler):
        return []
    names = sorted(space)  # `space`: the sweep's Optuna distributions, all categorical for a grid
    options = [list(space[name].choices) for name in names]
    points = getattr(
        sampler, "_all_grids", None
    )  # Optuna's shuffled grid, values in sorted names' order
    if points is None or len(points) != math.prod(len(o) for o in options):
        points = list(itertools.product(*options))
    ran: Any = [
        tuple(_key(record.get("params", {}).get(name)) for name in names) for record in records
    ]
    with contextlib.suppress(
        TypeError
    ):  # a set when every value can be hashed: a large resumed grid is not
        ran = set(ran)  # quadratic then (a grid of lists stays a list, compared one by one)
    return [
        dict(zip(names, point, strict=True))
        for point in points
        if tuple(_key(value) for value in point) not in ran
    ]


def _key(value: Any) -> Any:
    """A grid value as compared: a NaN choice equals itself."""
    return "nan" if isinstance(value, float) and math.isnan(value) else value
