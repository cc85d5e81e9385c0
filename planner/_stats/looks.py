"""How the confirmation seeds split into the looks of a sequential confirmation.

Pure and dependency-free, so `plan validate` can check `confirmation.looks`
without importing numpy or scipy. `planner._stats.sequential` uses this same function
(re-exported there as `look_sizes`).
"""

from __future__ import annotations


def look_sizes(n_seeds: int, looks: int) -> list[int]:
    """Cumulative seeds per arm at each look: K (nearly) equal batches, at least 2 at the first."""
    if looks < 1:
        raise ValueError("looks must be at least 1")
    sizes = _sizes(n_seeds, looks)
    if sizes is None:
        if n_seeds < 2:
            raise ValueError(f"a confirmation needs at least 2 seeds per arm, got {n_seeds}")
        fewer = next(k for k in range(looks - 1, 0, -1) if _sizes(n_seeds, k) is not None)
        raise ValueError(
            f"{n_seeds} seeds cannot make {looks} looks: every look needs new seeds and the first "
            f"at least 2; "
            f"use at most {fewer} look{'s' if fewer > 1 else ''} or more seeds"
        )
    return sizes


def _sizes(n_seeds: int, looks: int) -> list[int] | None:
    sizes = [round(n_seeds * (k + 1) / looks) for k in range(looks)]
    return sizes if sizes[0] >= 2 and len(set(sizes)) == looks else None


def look_batches(seeds: list[int], looks: int) -> list[list[int]]:
    """The seeds each look adds, in contract order."""
    out, previous = [], 0
    for size in look_sizes(len(seeds), looks):
        out.append(list(seeds[previous:size]))
        previous = size
    return out
