"""A/A false-accept rates at the edges: quantized metrics, diverged seeds, ties, a large offset.

A coarse metric (accuracy on 100 test examples moves in steps of 0.01) makes
ties and zero spreads common, and so do diverged seeds counted as
failures.diverged_value (an all-diverged side is a constant); the
degenerate-spread rule of `planner._stats.decide` keeps them from reading as
certainty, and must not fire on a real spread far from 0. This measures what
the rule buys, through the same vectorized code that decides: the statistics
tests (tests/unit/test_quantized_calibration.py, test_statistics_edges.py)
check each rate against alpha / 2 plus its Monte Carlo error with few
experiments, and bench/bench_statistics.py prints the tables
docs/statistics.md shows. Only they use it, so it lives beside them, not in
planner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from planner._stats.looks import _sizes

# A coarse metric where ties are common: accuracy on 100 examples, seed sd 0.01, min_effect 0.01.
GRID, SD, MIN_EFFECT, LEVEL = 0.01, 0.01, 0.01, 0.9


@dataclass(frozen=True)
class FalseAccept:
    test: str
    n: int
    looks: int  # 1: fixed; more: sequential
    sims: int
    rate: float  # P(accept) when both arms are the same
    mc_error: float  # its Monte Carlo standard error

    def within(self, alpha: float, sigmas: float = 3.0) -> bool:
        """rate <= alpha / 2 up to `sigmas` Monte Carlo standard errors of a rate of alpha / 2."""
        return self.rate <= alpha / 2 + sigmas * math.sqrt(alpha / 2 * (1 - alpha / 2) / self.sims)


def sequential_looks(n: int, most: int = 3) -> int:
    """The most looks (up to `most`) that n seeds can make: 1 at n = 2 (a sequential design needs 2
    per look)."""
    return max(k for k in range(1, most + 1) if _sizes(n, k) is not None)


def quantized_false_accept(
    test: str,
    n: int,
    *,
    sequential: bool,
    alpha: float = 0.05,
    sims: int = 20_000,
    grid: float = GRID,
    sd: float = SD,
    min_effect: float = MIN_EFFECT,
    correlation: float = 0.0,
    rng_seed: int = 0,
) -> FalseAccept:
    """P(accept) of `test` at n seeds per arm when the arms do not differ, on a metric quantized to
    `grid`.

    sequential: the design with the most looks (up to 3) n seeds can make, O'Brien-Fleming spending,
    monitored as `plan run` does (the bootstrap test is monitored with Welch's t).
    """
    if sequential:
        from planner._stats.sequential import plan_design, simulate_design

        looks = sequential_looks(n)
        design = plan_design(n, looks, alpha, "obrien_fleming", test=test)
        rate = simulate_design(
            design,
            0.0,
            min_effect=min_effect,
            sd=sd,
            sims=sims,
            grid=grid,
            correlation=correlation,
            rng_seed=rng_seed,
            level=LEVEL,
        ).accept
    else:
        from planner._stats.power import simulate

        looks = 1
        rate = simulate(
            test,
            n,
            0.0,
            alpha=alpha,
            min_effect=min_effect,
            sd=sd,
            sims=sims,
            grid=grid,
            correlation=correlation,
            rng_seed=rng_seed,
            permutations=999,
            level=LEVEL,
        ).accept
    return FalseAccept(
        test, n, looks, sims, rate, math.sqrt(max(rate * (1 - rate), 1 / sims) / sims)
    )


# The edge cases the degenerate-spread rule must get right (simulate's keywords); values around
# LEVEL with seed sd SD unless said.
OFFSET, OFFSET_SD = (
    1e10,
    1e-3,
)  # a metric far from 0 with a real spread: about 500 float steps at 1e10


class EdgeCase(TypedDict, total=False):
    """What an edge case sets of `simulate`'s keywords."""

    diverged: float
    diverged_value: float
    grid: float
    offset: float
    sd: float
    min_effect: float
    level: float


EDGES: dict[str, EdgeCase] = {
    "diverged 30 %": {"diverged": 0.3, "diverged_value": 0.0},
    "diverged 50 %": {"diverged": 0.5, "diverged_value": 0.0},
    "ties (grid 0.03)": {"grid": 0.03},
    "offset 1e10, sd 0.001": {"offset": OFFSET, "sd": OFFSET_SD, "min_effect": OFFSET_SD},
}


def edge_false_accept(
    case: str, test: str, n: int, *, alpha: float = 0.05, sims: int = 20_000, rng_seed: int = 0
) -> FalseAccept:
    """P(accept) of `test` at n seeds per arm when the arms do not differ, in the edge case `case`
    (EDGES)."""
    from planner._stats.power import simulate

    kwargs: EdgeCase = {"sd": SD, "min_effect": MIN_EFFECT, "level": LEVEL, **EDGES[case]}
    rate = simulate(
        test, n, 0.0, alpha=alpha, sims=sims, rng_seed=rng_seed, permutations=999, **kwargs
    ).accept
    return FalseAccept(test, n, 1, sims, rate, math.sqrt(max(rate * (1 - rate), 1 / sims) / sims))


@dataclass(frozen=True)
class OffsetCheck:
    """The same experiments decided at offset 0 and at OFFSET (sd OFFSET_SD, true effect
    `effect`)."""

    test: str
    n: int
    sims: int
    effect: float
    accept_at_0: float
    accept_at_offset: float
    degenerate_at_offset: (
        int  # experiments the degenerate-spread rule finds at the offset (a side, or none at all)
    )
    changed: int  # experiments whose decision differs between the two


def offset_check(
    test: str,
    n: int,
    *,
    effect: float = 0.0,
    alpha: float = 0.05,
    sims: int = 20_000,
    rng_seed: int = 0,
) -> OffsetCheck:
    """Decide the same values at offset 0 and OFFSET: a real spread stays a spread (the rule does
    not fire); what differs is float rounding at 1e10 (a float step there is 1.9e-6, 0.2 % of the
    sd)."""
    from planner._stats.decide import (
        _paired_t,
        _permutation,
        _welch_t,
        degenerate_rows,
        flat_rows,
        permutation_splits,
        verdict,
    )

    rng = np.random.default_rng(rng_seed)
    base = OFFSET_SD * rng.standard_normal((sims, n))
    arm = effect + OFFSET_SD * rng.standard_normal((sims, n))
    splits = permutation_splits(n, n, rng_seed, 999) if test == "bootstrap" else None

    def decided(b, a):
        if test == "bootstrap":
            return verdict(*_permutation(b, a, alpha, splits)[:3], OFFSET_SD, flat=flat_rows(b, a))
        return verdict(
            *(_paired_t if test == "paired" else _welch_t)(b, a, alpha)[:3],
            OFFSET_SD,
            flat=flat_rows(b, a),
        )

    at_0, at_offset = decided(base, arm), decided(base + OFFSET, arm + OFFSET)
    return OffsetCheck(
        test,
        n,
        sims,
        effect,
        float((at_0 == "accept").mean()),
        float((at_offset == "accept").mean()),
        int(
            (
                flat_rows(base + OFFSET, arm + OFFSET)
                | degenerate_rows(base + OFFSET, arm + OFFSET, test)
            ).sum()
        ),
        int((at_0 != at_offset).sum()),
    )
