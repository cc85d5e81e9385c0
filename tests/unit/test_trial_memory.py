"""What a trial leaves in a cycle is freed when it ends, whether its worker then runs a full
collection (a trial long beside one) or only the young generations (a trivial one)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from planner._trial import worker_process
from planner._trial.loading import load_trainable
from planner._trial.protocol import run_trial
from planner._trial.spec import TrialSpec
from tests.trainables.cycles_left import LEFT

REPO = str(Path(__file__).resolve().parents[2])


def _spec(tmp_path, tid: str, sleep: float) -> TrialSpec:
    return TrialSpec(
        trial_id=tid,
        phase="confirm",
        arm="a",
        seed=1,
        index=0,
        params={},
        config={"sleep": sleep},
        budget=1,
        dir=str(tmp_path / tid),
        trainable="tests.trainables.cycles:train",
        metric="score",
        path=(REPO,),
        extra={},
    )


@pytest.fixture
def no_automatic_collection(monkeypatch):
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize("full_collection_s, expect_full", [(0.0, True), (10.0, False)])
def test_a_trials_cyclic_garbage_is_freed_when_it_ends(
    tmp_path, monkeypatch, no_automatic_collection, full_collection_s, expect_full
):
    monkeypatch.setattr(worker_process, "_FULL_COLLECTION_S", [full_collection_s])
    collected = []
    real = gc.collect
    monkeypatch.setattr(
        worker_process.gc,
        "collect",
        lambda *generation: collected.append(generation) or real(*generation),
    )
    record = run_trial(_spec(tmp_path, f"t{int(expect_full)}", 0.01))
    assert record["status"] == "completed"
    assert LEFT[-1]() is None  # the 1 MiB cycle is gone
    assert collected == ([()] if expect_full else [(1,)])
    if expect_full:  # what the full collection took is what the next trial's choice weighs
        assert worker_process._FULL_COLLECTION_S[0] > 0


@pytest.mark.parametrize("trim_s, expect_trim", [(0.0, True), (10.0, False)])
def test_the_c_heap_is_trimmed_after_a_trial_only_when_that_is_cheap_beside_it(
    monkeypatch, trim_s, expect_trim
):
    trimmed = []

    class Libc:
        def malloc_trim(self, pad):
            trimmed.append(pad)

    monkeypatch.setattr(worker_process, "_TRIM_S", [trim_s])
    monkeypatch.setattr(worker_process.supervisor, "libc", lambda: Libc())
    worker_process.release_memory(0.5)
    assert trimmed == ([0] if expect_trim else [])


@pytest.mark.parametrize("in_worker", [True, False])
def test_a_ray_worker_freezes_what_its_first_trial_left_alive_once_and_weighs_its_collections_afresh(  # noqa: E501
    monkeypatch, in_worker
):
    """Issue 23: after a worker's first full collection, what is still alive (its imports) leaves
    the collector's sight, once, so that later full collections walk only what trials made; the
    driver, a test or a user's own process never freezes (the real freeze, in a Ray worker:
    tests/e2e/test_worker_memory_e2e.py)."""
    frozen = []
    monkeypatch.setattr(worker_process, "_FULL_COLLECTION_S", [0.0])
    monkeypatch.setattr(worker_process, "_FROZEN", [False])
    monkeypatch.setattr(worker_process, "_in_ray_worker", lambda: in_worker)
    monkeypatch.setattr(worker_process.gc, "freeze", lambda: frozen.append(True))
    worker_process.release_memory(5.0)
    assert frozen == ([True] if in_worker else [])
    assert (
        worker_process._FULL_COLLECTION_S[0] == 0.0
    ) is in_worker  # the next one measures what it walks now
    worker_process.release_memory(5.0)
    worker_process.release_memory(5.0)
    assert frozen == ([True] if in_worker else [])  # once a process


def test_a_trainable_executed_anew_is_its_packages_module_too_so_the_earlier_copy_is_freed():
    """`load_trainable` executes the module anew for each trial; the package's attribute kept the
    first copy (and its globals, a dataset loaded at import) alive for the worker's life."""
    import sys
    import weakref

    import tests.trainables as package

    first = load_trainable("tests.trainables.module_globals:train")
    copy = weakref.ref(sys.modules["tests.trainables.module_globals"].HELD)
    del first
    load_trainable("tests.trainables.module_globals:train")
    assert package.module_globals is sys.modules["tests.trainables.module_globals"]
    gc.collect()
    assert copy() is None


def test_a_trainable_in_a_package_executed_anew_still_reaches_its_submodules_as_attributes(
    tmp_path,
):
    """A package's __init__ executed anew for the second trial lacked the attributes its
    still-loaded submodules had given it: `import pkg.sub; pkg.sub.x` raised AttributeError from
    the second trial on."""
    spec = TrialSpec(
        trial_id="p0",
        phase="confirm",
        arm="a",
        seed=1,
        index=0,
        params={},
        config={},
        budget=1,
        dir=str(tmp_path / "p0"),
        trainable="tests.trainables.pkg_trainable:train",
        metric="score",
        path=(REPO,),
        extra={},
    )
    first = run_trial(spec)
    second = run_trial(
        TrialSpec(**{**spec.__dict__, "trial_id": "p1", "dir": str(tmp_path / "p1")})
    )
    assert [first["status"], second["status"]] == ["completed", "completed"], second.get("errors")
