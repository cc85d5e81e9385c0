"""A/A false-accept rates on quantized metrics, for every offered test, fixed and sequential.

A coarse metric (accuracy on 100 test examples moves in steps of 0.01) makes
ties and zero spreads common; the degenerate-spread rule of
`planner._stats.decide` keeps them from reading as certainty. This measures
what the rule buys, through the same vectorized code that decides: the
statistics tests (tests/unit/test_quantized_calibration.py) check each rate
against alpha / 2 plus its Monte Carlo error, and bench/bench_statistics.py
prints the table docs/statistics.md shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner._stats.looks import _sizes

# The setting of the issue that found the defect: accuracy on 100 examples, seed sd 0.01, min_effect 0.01.
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
    """The most looks (up to `most`) that n seeds can make: 1 at n = 2 (a sequential design needs 2 per look)."""
    return max(k for k in range(1, most + 1) if _sizes(n, k) is not None)


def quantized_false_accept(test: str, n: int, *, sequential: bool, alpha: float = 0.05, sims: int = 20_000,
                           grid: float = GRID, sd: float = SD, min_effect: float = MIN_EFFECT,
                           correlation: float = 0.0, rng_seed: int = 0) -> FalseAccept:  # fmt: skip
    """P(accept) of `test` at n seeds per arm when the arms do not differ, on a metric quantized to `grid`.

    sequential: the design with the most looks (up to 3) n seeds can make, O'Brien-Fleming spending,
    monitored as `plan run` does (the bootstrap test is monitored with Welch's t).
    """
    if sequential:
        from planner._stats.sequential import plan_design, simulate_design

        looks = sequential_looks(n)
        design = plan_design(n, looks, alpha, "obrien_fleming", test=test)
        rate = simulate_design(design, 0.0, min_effect=min_effect, sd=sd, sims=sims, grid=grid,
                               correlation=correlation, rng_seed=rng_seed, level=LEVEL).accept
    else:
        from planner._stats.power import simulate

        looks = 1
        rate = simulate(test, n, 0.0, alpha=alpha, min_effect=min_effect, sd=sd, sims=sims, grid=grid,
                        correlation=correlation, rng_seed=rng_seed, permutations=999, level=LEVEL).accept
    return FalseAccept(test, n, looks, sims, rate, math.sqrt(max(rate * (1 - rate), 1 / sims) / sims))
