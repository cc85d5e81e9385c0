"""The tuning space of an arm: pure (its Optuna form is planner._dispatch.search).

An arm's space is `tuning.space` overlaid with `tuning.arm_space[arm]`: the
same dimensions for every arm, with an arm's own range where the contract
gives one.
"""

from __future__ import annotations

from typing import Any


def arm_space(tuning, arm: str) -> dict[str, Any]:
    """{dotted key: Dimension} for `arm`: the shared space, then the arm's own ranges."""
    return tuning.space_for(arm)


def grid(space: dict[str, Any]) -> dict[str, list[Any]]:
    """{dotted key: options} for the grid sampler (which takes only `choice` dimensions)."""
    bad = [key for key, dim in space.items() if dim.kind != "choice"]
    if bad:
        raise ValueError(f"the grid sampler takes only choice dimensions; {', '.join(bad)} are not")
    return {key: list(dim.bounds) for key, dim in space.items()}
