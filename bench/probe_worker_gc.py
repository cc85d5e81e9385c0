"""Probe: what a full garbage collection costs a Ray worker after a trial, before and after
`gc.freeze`.

A worker imports Ray, Ray Tune and planner's worker module (what a tuning trial's actor holds); a
full collection then walks every object of the process. planner freezes what a worker's first trial
leaves alive (planner._trial.worker_process.release_memory), so later collections walk only what
trials made. Printed: the milliseconds of three full collections before the freeze, and of three
after it with 20,000 new objects.

    PYTHONPATH=. python bench/probe_worker_gc.py
"""

from __future__ import annotations

import gc
import time


def _collect_ms() -> float:
    start = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    import ray  # noqa: F401
    import ray.tune.trainable.function_trainable  # noqa: F401

    import planner._dispatch.worker  # noqa: F401

    before = [_collect_ms() for _ in range(3)]
    gc.freeze()
    made = [{"a": [i]} for i in range(20_000)]  # what a trial leaves
    after = [_collect_ms() for _ in range(3)]
    print(
        f"full collection, ms: {', '.join(f'{t:.1f}' for t in before)} before the freeze; "
        f"{', '.join(f'{t:.1f}' for t in after)} after it ({gc.get_freeze_count()} objects frozen, "
        f"{len(made)} made since)"
    )


if __name__ == "__main__":
    main()
