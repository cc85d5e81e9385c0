"""The tuning space of an arm, and its Optuna form.

Pure except for importing Optuna, which only the conversion functions do.
An arm's space is `tuning.space` overlaid with `tuning.arm_space[arm]`: the
same dimensions for every arm, with an arm's own range where the contract
gives one.
"""

from __future__ import annotations

from typing import Any


def arm_space(tuning, arm: str) -> dict[str, Any]:
    """{dotted key: Dimension} for `arm`: the shared space, then the arm's own ranges."""
    space = dict(tuning.space)
    space.update(tuning.arm_space.get(arm, {}))
    return space


def to_optuna(space: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: optuna distribution} for a space of `Dimension`s."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    out: dict[str, Any] = {}
    for key, dim in space.items():
        kind, bounds = dim.kind, dim.bounds
        if kind == "log_uniform":
            out[key] = FloatDistribution(float(bounds[0]), float(bounds[1]), log=True)
        elif kind == "uniform":
            out[key] = FloatDistribution(float(bounds[0]), float(bounds[1]))
        elif kind == "int":
            out[key] = IntDistribution(int(bounds[0]), int(bounds[1]))
        else:
            out[key] = CategoricalDistribution(list(bounds))
    return out


def grid(space: dict[str, Any]) -> dict[str, list[Any]]:
    """{dotted key: options} for the grid sampler (which takes only `choice` dimensions)."""
    bad = [key for key, dim in space.items() if dim.kind != "choice"]
    if bad:
        raise ValueError(f"the grid sampler takes only choice dimensions; {', '.join(bad)} are not")
    return {key: list(dim.bounds) for key, dim in space.items()}


def make_sampler(sampler, space: dict[str, Any]):
    """The declared Optuna sampler (tpe | random | grid) with the declared seed."""
    import optuna

    if sampler.name == "tpe":
        return optuna.samplers.TPESampler(seed=sampler.seed)
    if sampler.name == "random":
        return optuna.samplers.RandomSampler(seed=sampler.seed)
    return optuna.samplers.GridSampler(grid(space), seed=sampler.seed)
