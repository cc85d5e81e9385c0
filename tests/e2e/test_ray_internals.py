"""What tuning's start no longer imports: Tune's callback usage tag without the logger
integrations, and SciPy's optimize and stats outside sequential looks."""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._runs import write_contract_data

REPO = Path(__file__).resolve().parents[2]


def _fresh(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_recorder_is_tagged_as_ray_tags_it_without_importing_the_integrations():
    got = _fresh("""
import json, sys
from ray.air._internal import usage
from planner._dispatch.hooks import Hooks
from planner._dispatch.compat import callbacks_tagged_without_integrations
from planner._dispatch.tune import Recorder, TuneState
recorded = {}
usage.record_extra_usage_tag = lambda key, value: recorded.update({usage.TagKey.Name(key): value})
noop = lambda *a, **k: None
callbacks = [Recorder(TuneState([], "score", "max", 1, Hooks(noop, noop, noop)))]
with callbacks_tagged_without_integrations(Recorder):
    usage.tag_callbacks(callbacks)
imported = sorted(m for m in ("mlflow", "ray.air.integrations.mlflow", "ray.air.integrations.wandb") if m in sys.modules)
restored = usage.tag_callbacks.__module__ == usage.__name__
ray_count = dict(usage._count_callbacks(callbacks))  # Ray's own count (this imports the integrations)
print(json.dumps({"recorded": recorded, "imported": imported, "restored": restored, "ray": ray_count}))
""")
    assert got["imported"] == []
    assert got["restored"]
    assert got["recorded"] == {"AIR_CALLBACKS": json.dumps(got["ray"])} and got["ray"] == {
        "CustomCallback": 1
    }


def test_any_other_callback_list_goes_to_rays_own_tag():
    got = _fresh("""
import json
from ray import tune
from ray.air._internal import usage
from planner._dispatch.compat import callbacks_tagged_without_integrations
from planner._dispatch.tune import Recorder
seen = []
usage._count_callbacks = lambda callbacks: seen.append(len(callbacks)) or {}
with callbacks_tagged_without_integrations(Recorder):
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


def test_an_embedded_ray_started_with_the_polled_wait_runs_and_leaves_no_process_when_shut_down():
    """The Ray internals the start and the shutdown lean on are there (a Ray without them would
    only be slower), the node wait is the polled one, the head starts only the GCS and the raylet
    (no autoscaler monitor, log monitor or dashboard API server; its dashboard agent minimal), and the shutdown leaves none of Ray's processes."""
    got = _fresh("""
import inspect, json, os, sys
import psutil, ray
import ray._private.services as services
from planner._dispatch import compat, ray_shutdown, ray_start
assert list(inspect.signature(services.get_node).parameters) == ["gcs_address", "node_id"]
calls = []
original = compat.node_registration_polled
def counted(*a, **k):
    calls.append(1)
    return original(*a, **k)
compat.node_registration_polled = counted  # before ray_start's first use of compat reads it
ray_start.start_local_ray()
node = ray._private.worker._global_node
kinds = sorted(node.all_processes)
pids = [info.process.pid for infos in node.all_processes.values() for info in infos]
agents = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)
          if any("dashboard/agent.py" in part for part in p.cmdline())]
minimal = bool(agents) and all("--minimal" in a for a in agents)
restored = (ray._private.utils.get_dashboard_dependency_error.__module__ == "ray._private.utils"
            and services.get_node.__module__ == services.__name__
            and ray._private.parameter.RayParams.__module__ == "ray._private.parameter"
            and ray._private.node.Node.start_api_server.__module__ == "ray._private.node")
answer = ray.get(ray.remote(lambda: 41 + 1).remote())
ray_shutdown._shutdown()
def running(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # gone between the listing and the look
        return False
alive = [p for p in pids if running(p)]
print(json.dumps({"calls": len(calls), "kinds": kinds, "restored": restored, "answer": answer, "alive": alive,
                  "minimal": minimal, "dashboard_packages": "aiohttp" in sys.modules}))
""")
    assert got["calls"] == 1 and got["kinds"] == ["gcs_server", "raylet"], got
    assert got["restored"] and got["answer"] == 42
    assert got["alive"] == [], got
    # the raylet's dashboard agent runs minimal, and the driver never imported the dashboard's
    # packages
    assert got["minimal"] and not got["dashboard_packages"], got


WHAT_TUNE_KEEPS = """
import gc, json, sys
import planner._dispatch.tune as T
seen = {}

def on_experiment_end(self, trials, **info):
    gc.collect()
    controller = next(o for o in gc.get_objects() if type(o).__name__ == "TuneController")
    manager = controller._actor_manager
    queued = [a for a in manager._pending_actors_to_enqueued_actor_tasks if a not in manager._pending_actors_to_attrs]
    ended = [t for t in trials if t.is_finished()]
    search = controller._search_alg.searcher
    actor_envs = [cls._default_options.get("runtime_env") for cls in controller._class_cache._cache.values()]
    seen.update(trials=len(trials), ended=len(ended),
                with_config=sum(1 for t in ended if t.config or t.evaluated_params),
                with_result=sum(1 for t in ended if t.run_metadata.last_result or t.run_metadata.metric_analysis),
                requests=len({id(t.placement_group_factory) for t in ended}),
                last_results=[t.last_result for t in ended[:3]],
                queued_for_cancelled=len(queued),
                asked_left=len(search.asked) + sum(len(s.running) + len(s.reported) for s in search.studies),
                told=sum(len(s.study.trials) for s in search.studies), actor_envs=actor_envs,
                unresolved=[bool(t._Trial__unresolved_config) for t in ended if hasattr(t, "_Trial__unresolved_config")],
                snapshot=[list(map(json.loads, t.get_json_state())) for t in ended])

T.Recorder.on_experiment_end = on_experiment_end
from ray.tune import registry
reads = []
read = registry._internal_kv_get
registry._internal_kv_get = lambda key, *a, **k: reads.append(key) or read(key, *a, **k)
from planner._cli.main import main
seen["exit"] = main(["run", sys.argv[1], "--runs-dir", sys.argv[2], "--quiet"])
seen["registry_reads"] = len(reads)
print(json.dumps(seen))
"""


def test_tune_lets_go_of_what_an_ended_trial_held_and_the_run_still_records_every_trial(tmp_path):
    """Issue 23: the driver's memory per trial, and Tune's actors on an embedded Ray's own workers.
    An ended trial keeps nothing Tune would read again (its config, last result and the numbers'
    summaries are gone; one resource request is shared); a cancelled actor request leaves no queued
    task behind; Optuna's asked trials are let go once told; and the run itself is whole: every
    planned trial has its record and the study was told of every tuning trial. The trial actor
    class has no runtime_env, and every trial (tuning and confirmation) ran with the variable Tune
    would have given its actors. Tune's registry reads the trainable from the GCS once."""
    (tmp_path / "trivial.py").write_text(
        "import os\n"
        "def train(config, trial):\n"
        "    assert os.environ.get('PL_DISABLE_FORK') == '1'  # Tune's actor variable, in every "
        "trial\n"
        "    for step in range(1, 4):\n"
        "        trial.report(step, score=config['lr'] * step + trial.seed * 1e-6)\n"
    )
    contract = write_contract_data(
        tmp_path,
        {
            "version": 1,
            "name": "forget",
            "hypothesis": "Overhead only.",
            "trainable": "trivial:train",
            "config": {"values": {"lr": 0.1, "arm": "a"}},
            "factor": {"name": "arm"},
            "baseline": {"name": "a", "overrides": ["arm=a"]},
            "arms": [{"name": "b", "overrides": ["arm=b"]}],
            "metric": {"name": "score", "mode": "max"},
            "acceptance": {"min_effect": 0.01},
            "seeds": [0, 1, 2],
            "budget": {"exposure": 3},
            "tuning": {
                "trials_per_arm": 12,
                "seeds": [100],
                "sampler": {"name": "random", "seed": 0},
                "space": {"lr": {"log_uniform": [1.0e-4, 1.0]}},
            },
        },
    )
    out = subprocess.run(
        [sys.executable, "-c", WHAT_TUNE_KEEPS, str(contract), str(tmp_path / "runs")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["trials"] == got["ended"] == 24, got
    assert got["with_config"] == 0 and got["with_result"] == 0 and got["requests"] == 1, got
    assert all(set(result) <= {"trial_id"} for result in got["last_results"]), (
        got
    )  # read without the actor
    assert got["queued_for_cancelled"] == 0 and got["asked_left"] == 0 and got["told"] == 24, got
    assert got["actor_envs"] == [None], (
        got
    )  # Tune's actors on the workers Ray started: no runtime_env
    assert got["unresolved"] == [False] * 24, got  # the name `forget` uses
    # the trainable is read from the GCS once, not three times a trial
    assert 1 <= got["registry_reads"] <= 3, got["registry_reads"]
    # each ended trial's entry in Tune's snapshot is its id, status and folder (a few hundred
    # bytes, not 4.4 KB)
    assert [state["status"] for state, _ in got["snapshot"]] == ["TERMINATED"] * 24, got[
        "snapshot"
    ][:2]
    assert all(
        state["trial_id"] == state["relative_logdir"]
        and "storage" not in state
        and "checkpoint_manager" not in meta
        for state, meta in got["snapshot"]
    ), got["snapshot"][:2]
    records = [
        json.loads(line)
        for line in next((tmp_path / "runs").glob("*/*/trials.jsonl")).read_text().splitlines()
    ]
    assert len(records) == 24 + 6 and {r["status"] for r in records} == {"completed"}


def test_the_workers_environment_holds_what_tune_gives_its_trial_actors():
    """Tune's actors drop their runtime_env only when the workers already have its variables:
    planner's WORKER_ENV must carry Ray Tune's defaults (a Ray that adds one runs its actors as
    before, only slower)."""
    got = _fresh("""
import json
from ray.tune.execution import class_cache
from planner._dispatch.worker import WORKER_ENV
print(json.dumps({"defaults": class_cache.DEFAULT_ENV_VARS, "held": {k: WORKER_ENV.get(k) for k in class_cache.DEFAULT_ENV_VARS}}))
""")
    assert got["defaults"] == got["held"], got


def test_an_embedded_rays_worker_warmed_while_the_cpus_are_held_serves_the_next_trial_task():
    """Issue 23: the confirmation's warm-ups (no resources asked, sent while the tuning's actors
    hold every CPU) leave idle workers that the confirmation's first tasks take, instead of each
    waiting for a new worker process: an embedded Ray keeps them idle longer than its one second
    (EMBEDDED_SYSTEM_CONFIG)."""
    got = _fresh("""
import json, os, time
import ray
from planner._dispatch import ray_shutdown, ray_start
ray_start.start_local_ray(_system_config=ray_start.EMBEDDED_SYSTEM_CONFIG)
cpus = int(ray.cluster_resources()["CPU"])
@ray.remote(num_cpus=1)
class Holder:
    def pid(self): return os.getpid()
@ray.remote
def warm(): return os.getpid()
@ray.remote(num_cpus=1)
def trial():
    time.sleep(1.0)  # the trials overlap, one a CPU: an instant one let the next reuse its worker
    return os.getpid()
holders = [Holder.remote() for _ in range(cpus)]
ray.get([h.pid.remote() for h in holders])
warmed = ray.get([warm.options(num_cpus=0).remote() for _ in range(cpus)])
time.sleep(2.5)  # idle past Ray's own one second
for h in holders:
    ray.kill(h)
ran = ray.get([trial.remote() for _ in range(cpus)])
ray_shutdown._shutdown()
print(json.dumps({"warmed": sorted(warmed), "ran": sorted(ran)}))
""")
    assert got["ran"] == got["warmed"], got


def test_an_embedded_rays_local_connections_are_retried_often_for_rays_own_ten_seconds():
    """Issue 23: the raylet's first connection to its object store (started a moment before, in a
    thread) slept Ray's whole one-second retry in about half the starts. The embedded Ray retries
    every 20 ms, for the same ten seconds in all: the driver and the workers take those values (a
    Ray that renamed them would refuse or ignore them, and this fails)."""
    got = _fresh("""
import json
import ray
from planner._dispatch import ray_shutdown, ray_start
ray_start.start_local_ray(_system_config=ray_start.EMBEDDED_SYSTEM_CONFIG)
def values():
    c = ray._config
    return [c.raylet_client_connect_timeout_milliseconds(), c.raylet_client_num_connect_attempts()]
worker = ray.get(ray.remote(values).remote())
driver = values()
ray_shutdown._shutdown()
print(json.dumps({"driver": driver, "worker": worker, "every": ray_start.CONNECT_EVERY_MS,
                  "wait": ray_start.RAY_CONNECT_WAIT_MS}))
""")
    assert got["driver"] == got["worker"] == [got["every"], got["wait"] // got["every"]], got
    assert got["every"] < 1000 and got["wait"] >= 10_000, got
