"""How a cost grows with its input, for tests that guard against quadratic work without a
wall-clock limit.

A limit in seconds flakes on a loaded machine; the ratio of the CPU time of the same work at two
sizes does not, since the load slows both alike. Linear work grows about 4x from n to 4n, quadratic
work 16x.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable


def cpu_seconds(work: Callable[[], object], repeat: int = 3) -> float:
    """The least process CPU time of `repeat` runs of `work` (the least is the one least
    disturbed)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def growth(make: Callable[[int], Callable[[], object]], n: int, factor: int = 4) -> float:
    """CPU time at `factor * n` over CPU time at `n` (a floor of 1 ms on the small one keeps it
    finite)."""
    small = max(cpu_seconds(make(n)), 1e-3)
    return cpu_seconds(make(factor * n)) / small


def peak_bytes(work: Callable[[], object]) -> int:
    """The peak of Python's allocations while `work` runs (tracemalloc: the same count on any
    machine)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
