"""The plain percentile bootstrap: the uncalibrated method the statistics calibration must catch
(tests/unit/test_statistics_calibration.py), and whose rates bench/bench_statistics.py prints."""

from __future__ import annotations

import numpy as np


def percentile_bootstrap(
    base: np.ndarray, arm: np.ndarray, alpha: float, n_boot: int, rng_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain percentile bootstrap CI of the difference of means (rows = experiments): (effect,
    low, high) a row. NOT calibrated at small n."""
    rng = np.random.default_rng(rng_seed)
    rows, n_b = base.shape
    n_a = arm.shape[1]
    pick_b = rng.integers(0, n_b, size=(n_boot, n_b))
    pick_a = rng.integers(0, n_a, size=(n_boot, n_a))
    counts_b = (pick_b[:, :, None] == np.arange(n_b)).sum(axis=1) / n_b  # (boot, n_b) weights
    counts_a = (pick_a[:, :, None] == np.arange(n_a)).sum(axis=1) / n_a
    diffs = arm @ counts_a.T - base @ counts_b.T  # (rows, boot)
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2], axis=1)
    return arm.mean(axis=1) - base.mean(axis=1), low, high
