"""Shared fixtures. `ray_local`: ONE local Ray (2 CPUs) for the whole test session.

`run_dir` and `results` (from tests/_runs.py): the synthetic run folder and its
`load_run`, made once per test module that asks for them.

Use it in any test that needs Ray (mark the test `@pytest.mark.ray`); never
call ray.init/ray.shutdown in a test. Workers get the repository root on
their PYTHONPATH, so `tests.trainables.*` and `planner` import there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._runs import results, run_dir  # noqa: F401 (fixtures shared by every tier)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ray_local():
    import ray

    from planner._dispatch.tune import WORKER_ENV

    if ray.is_initialized():
        yield ray
        return
    pythonpath = os.pathsep.join(
        [str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    from planner._dispatch.ray_start import start_local_ray

    start_local_ray(
        num_cpus=2,
        log_to_driver=False,
        runtime_env={"env_vars": {**WORKER_ENV, "PYTHONPATH": pythonpath}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def in_repo(monkeypatch):
    """Run from the repository root (the trainables of tests/ import as tests.trainables.*)."""
    monkeypatch.chdir(REPO)
    return REPO


# Tiers by folder (docs/architecture.md): unit (no Ray, no subprocess, no browser), e2e (a real
# local Ray and real subprocesses), cluster (real `ray start` nodes; implies ray), browser
# (headless Chromium).
TIERS = {"unit": (), "e2e": ("e2e",), "cluster": ("cluster", "ray"), "browser": ("browser",)}


# The e2e modules that take longest (pytest --durations, 2026-12-05), collected first. `make test`
# hands the e2e tier out a module at a time (`--dist loadfile --no-loadscope-reorder`), in this
# order: with the longest first, the two workers end together. Sorted by their number of tests
# (xdist's default), the one-test framework modules (a minute or more each) came last, and one
# worker ran them alone. A module missing from the list only goes after these.
SLOW_FIRST = (
    "e2e/test_faults.py",
    "e2e/test_lightning_callback.py",
    "e2e/test_unchanged_app_e2e.py",
    "e2e/test_run_e2e.py",
    "e2e/test_hf_trainer_e2e.py",
    "e2e/test_accounting_e2e.py",
    "e2e/test_lightning_e2e.py",
    "e2e/test_command_checkpoints.py",
    "e2e/test_resumed_tuning_e2e.py",
    "e2e/test_boundary_e2e.py",
    "e2e/test_worker_dies_after_trial_e2e.py",
    "e2e/test_argparse_app_e2e.py",
    "e2e/test_ray_internals.py",
    "e2e/test_pytorch_e2e.py",
    "e2e/test_command_processes.py",
    "e2e/test_lightning_tensorboard_e2e.py",
)


def pytest_collection_modifyitems(config, items):
    tests_dir = Path(__file__).resolve().parent
    where = {}
    for item in items:
        try:
            where[item] = Path(str(item.fspath)).resolve().relative_to(tests_dir)
        except ValueError:
            continue
        for marker in TIERS.get(where[item].parts[0], ()):
            item.add_marker(marker)
    rank = {module: index for index, module in enumerate(SLOW_FIRST)}
    items.sort(
        key=lambda item: rank.get(where[item].as_posix(), len(rank)) if item in where else len(rank)
    )
