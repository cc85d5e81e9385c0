"""The tuning space of an arm, and its Optuna form.

An arm's space is `tuning.space` overlaid with `tuning.arm_space[arm]`: the
same dimensions for every arm, with an arm's own range where the contract
gives one. The run builds it from the contract model (`arm_space`); a report
reads it back from the frozen contract of a run folder (`frozen_space`). Both
give dimensions with a `kind` and `bounds`, which `to_optuna` turns into
Optuna distributions (Optuna is imported on first use).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from planner._core.lazy import lazy_import

optuna = lazy_import("optuna")

KINDS = ("log_uniform", "uniform", "int", "choice")


class Dimensional(Protocol):
    """What a dimension shows: the contract model's `Dimension`, or a `FrozenDimension`."""

    @property
    def kind(self) -> str: ...

    @property
    def bounds(self) -> Any: ...


@dataclass(frozen=True)
class FrozenDimension:
    """One dimension as a frozen contract writes it: `{kind: bounds}`."""

    kind: str
    bounds: tuple[Any, ...]


def arm_space(tuning, arm: str) -> dict[str, Any]:
    """{dotted key: Dimension} for `arm`: the shared space, then the arm's own ranges."""
    return tuning.space_for(arm)


def frozen_space(contract: Mapping[str, Any], arm: str) -> dict[str, FrozenDimension]:
    """{dotted key: dimension} for `arm` from a frozen contract (a run folder's contract.yaml).

    A dimension that is not exactly one known kind with usable bounds (a damaged folder) is left
    out: a report draws what it can read.
    """
    tuning = contract.get("tuning")
    if not isinstance(tuning, Mapping):
        return {}
    shared, own = tuning.get("space"), (tuning.get("arm_space") or {}).get(arm)
    out: dict[str, FrozenDimension] = {}
    for space in (shared, own):
        for key, spec in (space or {}).items() if isinstance(space, Mapping) else ():
            dim = _frozen_dimension(spec)
            if dim is not None:
                out[str(key)] = dim
    return out


def _frozen_dimension(spec: Any) -> FrozenDimension | None:
    given = [k for k in KINDS if isinstance(spec, Mapping) and spec.get(k) is not None]
    if len(given) != 1:
        return None
    kind, bounds = given[0], spec[given[0]]
    if not isinstance(bounds, list | tuple) or not bounds:
        return None
    if kind == "choice":
        return FrozenDimension(kind, tuple(bounds))
    numbers = [
        b
        for b in bounds
        if isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b)
    ]
    if (
        len(numbers) != 2
        or not numbers[0] < numbers[1]
        or (kind == "log_uniform" and numbers[0] <= 0)
    ):
        return None
    return FrozenDimension(kind, (numbers[0], numbers[1]))


def to_optuna(space: Mapping[str, Dimensional]) -> dict[str, Any]:
    """{dotted key: optuna distribution} for a space of dimensions."""
    out: dict[str, Any] = {}
    for key, dim in space.items():
        kind, bounds = dim.kind, dim.bounds
        if kind == "log_uniform":
            out[key] = optuna.distributions.FloatDistribution(
                float(bounds[0]), float(bounds[1]), log=True
            )
        elif kind == "uniform":
            out[key] = optuna.distributions.FloatDistribution(float(bounds[0]), float(bounds[1]))
        elif kind == "int":
            out[key] = optuna.distributions.IntDistribution(int(bounds[0]), int(bounds[1]))
        else:
            out[key] = optuna.distributions.CategoricalDistribution(list(bounds))
    return out


def grid(space: dict[str, Any]) -> dict[str, list[Any]]:
    """{dotted key: options} for the grid sampler (which takes only `choice` dimensions)."""
    bad = [key for key, dim in space.items() if dim.kind != "choice"]
    if bad:
        raise ValueError(f"the grid sampler takes only choice dimensions; {', '.join(bad)} are not")
    return {key: list(dim.bounds) for key, dim in space.items()}
