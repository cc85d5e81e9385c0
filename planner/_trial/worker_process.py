"""The worker process between trials: the Ray node it runs on, and the memory a trial freed given
back to the system so a reused worker starts its next trial small."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable

from planner._core import supervisor
from planner._trial.loading import let_go

_FULL_COLLECTION_S = [0.0]  # the CPU seconds this process's last full collection took
_TRIM_S = [0.0]  # and its last malloc_trim
_AT_MOST = (
    20  # a release runs after a trial only when its last run took at most 1/20 of the trial's time
)


def release_memory(trial_s: float, trainable_module: str | None = None) -> None:
    """Give freed memory back to the system, so a reused worker starts its next trial small.

    A full collection walks every object of the process (Ray, Tune, torch...), and malloc_trim
    walks the C heap, so each runs after a trial only when it costs at most a twentieth of the
    trial's own time (`trial_s`); after a shorter trial the young generations are collected, and
    the interpreter's own collections do the rest. A thousand trivial trials no longer spend most
    of their workers' time in the collector.

    In a Ray worker, what is still alive after its first trial's full collection (the modules it
    imported: Ray, Tune, the trainable's torch or Lightning, and their caches) is moved out of the
    collector's sight (`gc.freeze`), once: those objects live as long as the process, and every
    later full collection walks only what trials made since (docs/speed.md measures it), so it runs
    after nearly every trial. Objects frozen are still freed when nothing refers to them; only a
    cycle among them would stay: a module is one (its functions refer to its globals), so the
    function trainable's module (`trainable_module`), which the next trial executes anew anyway,
    is let go and collected first, its globals with it (a dataset it loaded at import), never
    frozen."""
    if not _if_cheap(trial_s, _FULL_COLLECTION_S, gc.collect):
        gc.collect(1)
    elif not _FROZEN[0] and _in_ray_worker():
        if trainable_module and let_go(trainable_module):
            gc.collect()
        gc.freeze()
        _FROZEN[0] = True
        _FULL_COLLECTION_S[0] = (
            0.0  # the next full collection walks only what trials made: it weighs itself
        )
    _if_cheap(trial_s, _TRIM_S, _malloc_trim)


_FROZEN = [False]  # whether this worker froze what its first trial left alive


def _in_ray_worker() -> bool:
    """True inside a Ray worker's task or actor (never the driver, a test or a user's own
    process)."""
    return ray_node_id() is not None


def _if_cheap(trial_s: float, last_s: list[float], release: Callable[[], object]) -> bool:
    """Run `release` when its last run (`last_s[0]`, CPU seconds of this thread) took at most
    1/_AT_MOST of `trial_s`, keeping what this run took; False when it was too dear to run."""
    if trial_s < _AT_MOST * last_s[0]:
        return False
    t0 = (
        time.thread_time()
    )  # its own CPU: a collection the scheduler paused (Ray's processes on 2 cores) is not
    release()  # dearer, and a wall-clock figure once skipped the next trial's collection for that
    last_s[0] = time.thread_time() - t0
    return True


def _malloc_trim() -> None:
    try:
        supervisor.libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass


def ray_node_id() -> str | None:
    """The Ray node running this trial: several nodes can share a host. None outside a Ray task or
    actor."""
    ray = sys.modules.get(
        "ray"
    )  # never imported here: only asked when the worker already runs in Ray
    if ray is None or not ray.is_initialized():
        return None
    # the driver (SCRIPT_MODE) has no task; asking it for one makes Ray log a warning on stderr
    try:
        context = ray.get_runtime_context()
        if context.worker.mode != ray.WORKER_MODE:
            return None
        return context.get_node_id() if context.get_task_id() is not None else None
    except Exception:  # an older or partial Ray: the record just lacks the node
        return None
