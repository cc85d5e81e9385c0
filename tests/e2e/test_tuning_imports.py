"""What tuning's start no longer imports: Tune's callback usage tag without the logger integrations, and
SciPy's optimize and stats outside sequential looks (issue 23)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_recorder_is_tagged_as_ray_tags_it_without_importing_the_integrations():
    got = _fresh("""
import json, sys
from ray.air._internal import usage
from planner._dispatch.hooks import Hooks
from planner._dispatch.tune import Recorder, TuneState, callbacks_tagged_without_integrations
recorded = {}
usage.record_extra_usage_tag = lambda key, value: recorded.update({usage.TagKey.Name(key): value})
noop = lambda *a, **k: None
callbacks = [Recorder(TuneState([], "score", "max", 1, Hooks(noop, noop, noop)))]
with callbacks_tagged_without_integrations():
    usage.tag_callbacks(callbacks)
imported = sorted(m for m in ("mlflow", "ray.air.integrations.mlflow", "ray.air.integrations.wandb") if m in sys.modules)
restored = usage.tag_callbacks.__module__ == usage.__name__
ray_count = dict(usage._count_callbacks(callbacks))  # Ray's own count (this imports the integrations)
print(json.dumps({"recorded": recorded, "imported": imported, "restored": restored, "ray": ray_count}))
""")
    assert got["imported"] == []
    assert got["restored"]
    assert got["recorded"] == {"AIR_CALLBACKS": json.dumps(got["ray"])} and got["ray"] == {"CustomCallback": 1}


def test_any_other_callback_list_goes_to_rays_own_tag():
    got = _fresh("""
import json
from ray import tune
from ray.air._internal import usage
from planner._dispatch.tune import callbacks_tagged_without_integrations
seen = []
usage._count_callbacks = lambda callbacks: seen.append(len(callbacks)) or {}
with callbacks_tagged_without_integrations():
    usage.tag_callbacks([tune.Callback()])
print(json.dumps({"seen": seen}))
""")
    assert got["seen"] == [1]


@pytest.mark.parametrize("module", ["planner._dispatch.driver", "planner._stats.sequential"])
def test_a_run_without_sequential_looks_never_loads_scipy_optimize_or_stats(module):
    got = _fresh(f"""
import json, sys
import {module}
print(json.dumps(sorted(m for m in ("scipy.optimize", "scipy.stats") if m in sys.modules)))
""")
    assert got == []

