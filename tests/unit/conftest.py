"""The unit tier's promise, enforced: no subprocess and no running Ray (docs/architecture.md).

The one process allowed is `git`: the code identity asks it for the commit of a trainable's folder.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._run_folders import OUTSIDE, pristine_run

# platform.platform() (the host identity) asks `uname -p` once per process and caches the answer:
# ask it here, before the guard, so a unit test that records a host identity does not depend on
# which test ran first.
platform.platform()
# matplotlib (imported by Lightning) runs `fc-list` once per machine to build its font cache: build
# it here, so that on a new machine the first unit test to import Lightning does not trip the guard.
try:
    import matplotlib.font_manager  # noqa: F401
except ImportError:
    pass


@pytest.fixture(autouse=True)
def _no_subprocess_no_ray(monkeypatch):
    popen = subprocess.Popen.__init__

    def only_git(self, args, *rest, **kwargs):
        program = args[0] if isinstance(args, list | tuple) else str(args).split()[0]
        if str(program).rsplit("/", 1)[-1] != "git":
            raise AssertionError(
                f"a unit test started {program!r}: a subprocess belongs in tests/e2e"
            )
        popen(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", only_git)
    # In `make test` the e2e tier's session Ray may already be up: only a Ray this test started
    # counts.
    before = _ray_up()
    yield
    assert before or not _ray_up(), "a unit test started Ray: it belongs in tests/e2e"


def _ray_up() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.fixture(scope="session")
def pristine(tmp_path_factory) -> Path:
    """A completed run folder, written once per test process (no test writes to it: each copies it,
    `run`, before planting)."""
    return pristine_run(tmp_path_factory.mktemp("runs"))


@pytest.fixture
def run(pristine, tmp_path) -> Path:
    """A fresh copy of a completed run folder, and a file outside it that must stay untouched."""
    copy = tmp_path / "runs" / "demo" / pristine.name
    shutil.copytree(pristine, copy)
    (tmp_path / "outside.txt").write_text(OUTSIDE)
    return copy
