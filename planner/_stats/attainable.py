"""What the bootstrap (permutation) test can reach at a given number of seeds.

Pure and dependency-free (math only), so `plan validate` can flag a design that
can never accept without importing numpy or scipy; `planner._stats.decide`
uses these same functions.
"""

from __future__ import annotations

import math

# Permutation test: enumerate every split up to this many, else draw random ones (a valid p at any
# level).
MAX_ENUMERATED_SPLITS = 20_000


def attainable_alpha(n_arm: int, n_baseline: int, alpha: float) -> float:
    """The two-sided level the bootstrap (permutation) test really has at nominal alpha.

    Its one-sided p takes values k / C(n_a + n_b, n_a), so "CI low > 0" happens
    with probability floor(alpha / 2 * C) / C under no effect; 0 means never.
    With random splits (large C) the level is alpha.
    """
    splits = math.comb(n_arm + n_baseline, n_arm)
    if splits > MAX_ENUMERATED_SPLITS:
        return alpha
    return 2 * math.floor(alpha / 2 * splits + 1e-9) / splits


def smallest_p_value(n_arm: int, n_baseline: int) -> float:
    """The smallest two-sided p the bootstrap (permutation) test can give."""
    return min(1.0, 2 / math.comb(n_arm + n_baseline, n_arm))


def fewest_seeds_to_accept(alpha: float, most: int = 100) -> int:
    """The fewest seeds per arm (the same in both) at which the bootstrap test can accept at
    two-sided `alpha`."""
    return next(n for n in range(2, most + 1) if smallest_p_value(n, n) <= alpha)
