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


def pytest_collection_modifyitems(config, items):
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        try:
            tier = Path(str(item.fspath)).resolve().relative_to(tests_dir).parts[0]
        except ValueError:
            continue
        for marker in TIERS.get(tier, ()):
            item.add_marker(marker)
