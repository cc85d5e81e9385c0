"""`plan run` with a `command:` trainable: the example Hydra app, unchanged but for
its planner.report line, run once per trial as a subprocess inside Ray workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import load_run, run
from tests._runs import hydra_app

pytestmark = pytest.mark.ray


def test_a_command_contract_runs_tunes_and_decides_through_ray(ray_local, tmp_path):
    contract = hydra_app(tmp_path, seeds=[0, 1], exposure=3, trials_per_arm=2)

    result = run(contract, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = load_run(result.run_dir).records
    assert sorted(r["phase"] for r in trials) == ["confirm"] * 4 + ["tune"] * 4
    assert all(r["status"] == "completed" and r["exposure"] == 3 for r in trials), trials
    # the arm's group choice reached the app: sgd and momentum give different curves at one seed
    final = {
        (r["arm"], r["seed"]): r["reports"][-1]["metrics"]["val_acc"]
        for r in trials
        if r["phase"] == "confirm"
    }
    assert final[("sgd", 0)] != final[("momentum", 0)]
    # sampled learning rates reached the app: the tuning trials of one arm differ
    tuned = [
        r["reports"][-1]["metrics"]["val_acc"]
        for r in trials
        if r["phase"] == "tune" and r["arm"] == "sgd"
    ]
    assert len(set(tuned)) == 2
    # every attempt kept the app's own output under the trial's folder
    assert all(
        any(Path(r_dir).rglob("stdout.log"))
        for r_dir in (result.run_dir / "trials" / r["trial_id"] for r in trials)
    )
    assert {d["arm"] for d in result.decisions} == {"momentum"}


APP = """
import os, signal, subprocess, sys, time
import hydra
from hydra.core.hydra_config import HydraConfig
import planner

SLEEPER = "import time; time.sleep(600)"


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg):
    trial, out = os.environ["PLANNER_TRIAL_DIR"], HydraConfig.get().runtime.output_dir
    # a daemon the script forgets: double-forked, in a session of its own
    if os.fork() == 0:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER])
        open(os.path.join(trial, f"daemon-{pid}.pid"), "w").write(str(pid))
        os._exit(0)
    os.wait()
    os.makedirs(os.path.join(out, "ckpt"), exist_ok=True)

    def save_as_stopped(signum, frame):  # a script that saves once more when it is stopped
        open(os.path.join(out, "ckpt", "stopped.ckpt"), "wb").write(os.urandom(20000))
        os._exit(143)

    signal.signal(signal.SIGTERM, save_as_stopped)
    budget = int(os.environ["PLANNER_BUDGET"])
    for epoch in range(1, budget + 1):
        open(os.path.join(out, "ckpt", f"epoch={epoch}.ckpt"), "wb").write(os.urandom(20000))
        planner.report(epoch, val_acc=cfg.width / 10 - cfg.lr * abs(epoch - 2) / 10, test_acc=0.5)
        time.sleep(0.2)
    time.sleep(1.0)  # the final evaluation and saving, after the last budget step
    open(os.path.join(trial, "finished"), "w").write(str(budget))


main()
"""


def test_scripts_end_on_their_own_leave_no_process_and_keep_their_last_checkpoint(
    ray_local, tmp_path
):
    """Through `plan run` (Ray Tune with ASHA, then confirmation): every script got past its last
    budget step to its own end, no daemon it forgot outlives its trial, one checkpoint is left a
    trial, also for a script that saves once more as it is stopped (after the scheduler's stop,
    which Tune does not wait for)."""
    import os
    import time

    import yaml

    app = tmp_path / "app"
    (app / "conf").mkdir(parents=True)
    (app / "conf" / "config.yaml").write_text("lr: 0.1\nwidth: 1\n")
    (app / "train.py").write_text(APP)
    contract = {
        "version": 1,
        "name": "ends-on-its-own",
        "hypothesis": "A wider model is better.",
        "command": {
            "run": "python train.py",
            "checkpoint": {"file": "ckpt/*.ckpt", "keep": "last"},
        },
        "config": {"dir": "conf", "name": "config"},
        "factor": {"name": "width", "keys": ["width"]},
        "baseline": {"name": "one", "overrides": ["width=1"]},
        "arms": [{"name": "two", "overrides": ["width=2"]}],
        "metric": {"name": "val_acc", "mode": "max", "heldout": "test_acc"},
        "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1],
        "budget": {"unit": "epoch", "exposure": 3, "max_trial_time": "2m"},
        "tuning": {
            "trials_per_arm": 3,
            "seeds": [100],
            "sampler": {"name": "random", "seed": 0},
            "space": {"lr": {"uniform": [0.05, 0.3]}},
            "early_stop": {"rule": "asha", "grace": 1},
        },
    }
    path = app / "contract.yaml"
    path.write_text(yaml.safe_dump(contract))

    result = run(path, runs_dir=tmp_path / "runs", quiet=True)

    trials = load_run(result.run_dir).records
    assert len(trials) == 10, [t["trial_id"] for t in trials]
    by_id = {t["trial_id"]: t for t in trials}
    for trial_id, record in by_id.items():
        folder = result.run_dir / "trials" / trial_id
        if record["status"] == "completed":
            assert (folder / "finished").read_text() == "3", (
                trial_id
            )  # not stopped at its last report
        else:
            assert record["status"] == "early_stopped", record
        assert len(list(folder.glob("attempt-*/hydra/ckpt/*.ckpt"))) <= 1, trial_id  # keep: last
        assert isinstance(record["disk_bytes"], int) and record["disk_bytes"] > 0
    assert all(by_id[t]["status"] == "completed" for t in by_id if t.startswith("confirm-"))
    daemons = [int(p.read_text()) for p in (result.run_dir / "trials").glob("*/daemon-*.pid")]
    assert len(daemons) == 10
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in daemons) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in daemons if _alive(pid)]
    for pid in left:  # never leave them to the machine, even when the test fails
        os.kill(pid, 9)
    assert not left


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
