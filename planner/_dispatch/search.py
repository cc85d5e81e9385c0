"""The Optuna boundary: an arm's tuning space and sampler as Optuna objects.

The space itself is pure (planner._plan.space); only this module imports Optuna.
"""

from __future__ import annotations

import hashlib
from typing import Any

from planner._core.lazy import lazy_import
from planner._plan.space import grid

optuna = lazy_import("optuna")  # imported when a run builds its first study


def to_optuna(space: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: optuna distribution} for a space of `Dimension`s."""
    out: dict[str, Any] = {}
    for key, dim in space.items():
        kind, bounds = dim.kind, dim.bounds
        if kind == "log_uniform":
            out[key] = optuna.distributions.FloatDistribution(float(bounds[0]), float(bounds[1]), log=True)
        elif kind == "uniform":
            out[key] = optuna.distributions.FloatDistribution(float(bounds[0]), float(bounds[1]))
        elif kind == "int":
            out[key] = optuna.distributions.IntDistribution(int(bounds[0]), int(bounds[1]))
        else:
            out[key] = optuna.distributions.CategoricalDistribution(list(bounds))
    return out


def make_sampler(sampler, space: dict[str, Any], finished: int = 0):
    """The declared Optuna sampler (tpe | random | grid), seeded for a sweep with `finished` trials already ended.

    A new sweep (`finished` 0) gets the declared seed. A resumed one gets a seed drawn from (declared seed,
    finished): the declared seed's sequence would start over and draw the finished trials' params again.
    """
    seed = sampler.seed if not finished else resumed_seed(sampler.seed, finished)
    if sampler.name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if sampler.name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.GridSampler(grid(space), seed=seed)


def resumed_seed(seed: int, finished: int) -> int:
    """The seed of a sweep resumed after `finished` ended trials: reproducible, and distinct for each count."""
    digest = hashlib.sha256(f"planner-resumed-sweep:{seed}:{finished}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
