"""The unit tier's promise, enforced: no subprocess and no running Ray (docs/architecture.md).

The one process allowed is `git`: the code identity asks it for the commit of a trainable's folder.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(autouse=True)
def _no_subprocess_no_ray(monkeypatch):
    popen = subprocess.Popen.__init__

    def only_git(self, args, *rest, **kwargs):
        program = args[0] if isinstance(args, list | tuple) else str(args).split()[0]
        if str(program).rsplit("/", 1)[-1] != "git":
            raise AssertionError(f"a unit test started {program!r}: a subprocess belongs in tests/e2e")
        popen(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", only_git)
    yield
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized(), "a unit test started Ray: it belongs in tests/e2e"
