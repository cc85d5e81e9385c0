"""A reused Ray worker freezes what its first trial left alive, and still frees what later trials
leave in a cycle (a full collection after each trial would walk all of Ray, Tune and the
trainable's imports)."""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import gc, json, os, sys
import ray
from planner._dispatch import ray_shutdown, ray_start
from planner._dispatch.worker import confirm_task
from planner._trial.spec import TrialSpec

def spec(tid):
    return TrialSpec(trial_id=tid, phase="confirm", arm="a", seed=1, index=0, params={}, config={"sleep": 0.5},
                     budget=1, dir=os.path.join(sys.argv[1], tid), trainable=sys.argv[3],
                     metric="score", path=(sys.argv[2],), extra={}).__dict__

@ray.remote(num_cpus=1, max_retries=0)
def trial(s):
    record = confirm_task(s)
    from tests.trainables.cycles_left import LEFT
    from planner._trial import worker_process
    return {"status": record["status"], "pid": os.getpid(), "frozen": gc.get_freeze_count(),
            "collection_s": worker_process._FULL_COLLECTION_S[0],
            "left_alive": sum(ref() is not None for ref in LEFT), "left": len(LEFT)}

ray_start.start_local_ray(num_cpus=1, _system_config=ray_start.EMBEDDED_SYSTEM_CONFIG)
out = [ray.get(trial.remote(spec(f"t{i}"))) for i in range(3)]
ray_shutdown._shutdown()
print(json.dumps(out))
"""


def _trials(tmp_path, trainable: str) -> list[dict]:
    """Three trials of `trainable` in one Ray worker: what each saw as it ended."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), str(REPO), trainable],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_reused_worker_freezes_once_and_frees_each_later_trials_cycles(tmp_path):
    out = _trials(tmp_path, "tests.trainables.cycles:train")
    assert [o["status"] for o in out] == ["completed"] * 3, out
    assert len({o["pid"] for o in out}) == 1, out  # one worker ran the three trials
    assert out[0]["frozen"] > 1000, out  # its imports, frozen after the first trial
    # once: later trials' objects are not frozen (the count only falls, as frozen objects are freed)
    assert out[0]["frozen"] >= out[1]["frozen"] >= out[2]["frozen"] > 1000, out
    assert [o["left_alive"] for o in out] == [0, 0, 0], (
        out
    )  # every trial's 1 MiB cycle was freed as it ended


def test_the_trainables_module_of_the_first_trial_is_freed_not_frozen(tmp_path):
    """Each trial executes the trainable's module anew; the first trial's copy (a cycle: its
    functions refer to its globals) was alive when the worker froze what was left, and would have
    stayed for good (a dataset loaded at import, held twice). Once the next trial has its own, each
    earlier copy is gone."""
    out = _trials(tmp_path, "tests.trainables.module_globals:train")
    assert [o["status"] for o in out] == ["completed"] * 3, out
    assert len({o["pid"] for o in out}) == 1, out
    assert out[0]["frozen"] > 1000, out
    assert [o["left"] for o in out] == [1, 2, 3], out
    # after the first trial its module is let go (the next trial executes it anew); after a later
    # one, its own module is the one alive (the next trial's replaces it), every earlier one is gone
    assert [o["left_alive"] for o in out] == [0, 1, 1], out


def test_a_trainable_in_a_package_reaches_its_submodules_in_every_trial_and_each_earlier_copy_is_freed(  # noqa: E501
    tmp_path,
):
    """The package is let go after the first trial (before the freeze) and executed anew for each
    later one; its submodule, still loaded, is its attribute again each time (`import pkg.sub;
    pkg.sub.x`)."""
    out = _trials(tmp_path, "tests.trainables.pkg_trainable:train")
    assert [o["status"] for o in out] == ["completed"] * 3, out
    assert len({o["pid"] for o in out}) == 1, out
    assert [o["left_alive"] for o in out] == [0, 1, 1], out
