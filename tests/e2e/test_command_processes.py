"""A trial's processes end with it: real scripts whose children try to outlive them.

The script starts a `setsid` child and four double-forked children (re-parented away from it), each
holding memory; the planner's supervisor (planner._core.supervisor), their child subreaper, counts
them in `max_trial_memory` and ends every one when the run ends: it exits, is stopped, or its
worker dies.
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from planner._core.errors import CommandMemoryError
from planner._trial.command import run_command
from tests.trial_double import StopTrial, TrialDouble

ROOT = Path(__file__).resolve().parents[2]

ESCAPING = """
import os, subprocess, sys, time
import planner

MB = int(sys.argv[1])
AFTER = sys.argv[2]  # exit | sleep
TRIAL = os.environ["PLANNER_TRIAL_DIR"]
# each child waits for `go` (all five exist, their pids written), takes its memory, says `ready`, sleeps
HOLD = ("import os, sys, time\\n"
        "while not os.path.exists(os.path.join(sys.argv[1], 'go')): time.sleep(0.01)\\n"
        "b = b'x' * ({mb} << 20)\\n"
        "open(os.path.join(sys.argv[1], sys.argv[2] + '.ready'), 'w').close()\\n"
        "time.sleep(600)\\n").format(mb=MB)

def write_pid(name, pid):
    with open(os.path.join(TRIAL, name + ".pid.tmp"), "w") as f:
        f.write(str(pid))
    os.replace(os.path.join(TRIAL, name + ".pid.tmp"), os.path.join(TRIAL, name + ".pid"))

# a child in a session (and process group) of its own
child = subprocess.Popen([sys.executable, "-c", HOLD, TRIAL, "setsid"], start_new_session=True)
write_pid("setsid", child.pid)
# four double-forked children: the middle process exits, the grandchild is re-parented
for i in range(4):
    if os.fork() == 0:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-c", HOLD, TRIAL, f"fork{i}"])
        write_pid(f"fork{i}", pid)
        os._exit(0)
    os.wait()
open(os.path.join(TRIAL, "go"), "w").close()
names = ["setsid"] + [f"fork{i}" for i in range(4)]
while not all(os.path.exists(os.path.join(TRIAL, n + ".ready")) for n in names):
    time.sleep(0.02)
planner.report(1, acc=0.5)
time.sleep(3 if AFTER == "exit" else 600)
"""


def _script(tmp_path: Path) -> str:
    (tmp_path / "escape.py").write_text(textwrap.dedent(ESCAPING))
    return "escape.py"


def _pids(trial_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(trial_dir.glob("*.pid"))]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _none_alive(pids: list[int], within_s: float = 0.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def cleanup(tmp_path):
    """Whatever a failing test left alive is ended, so it cannot disturb the machine."""
    seen: list[int] = []
    yield seen
    for pid in {*seen, *_pids(tmp_path / "trial")}:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def test_no_child_outlives_a_script_that_exits(tmp_path, cleanup):
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=1)
    result = run_command(
        f"python {_script(tmp_path)} 1 exit",
        [],
        trial,
        cwd=tmp_path,
        timeout_s=60,
        hydra_run_dir=False,
    )
    pids = _pids(tmp_path / "trial")
    cleanup.extend(pids)
    assert result.returncode == 0 and trial.steps == [1]
    assert len(pids) == 5
    assert _none_alive(pids), [pid for pid in pids if _alive(pid)]


def test_the_whole_tree_counts_against_max_trial_memory_and_none_outlives_the_trial(
    tmp_path, cleanup
):
    """Each child holds 120 MiB, under the 200 MiB cap alone; together they are over it."""
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=1)
    with pytest.raises(CommandMemoryError, match="over its limit of 200 MiB"):
        run_command(
            f"python {_script(tmp_path)} 120 exit",
            [],
            trial,
            cwd=tmp_path,
            timeout_s=60,
            max_memory_bytes=200 << 20,
            memory_check_s=0.2,
            hydra_run_dir=False,
        )
    pids = _pids(tmp_path / "trial")
    cleanup.extend(pids)
    assert len(pids) == 5
    assert _none_alive(pids), [pid for pid in pids if _alive(pid)]


def test_no_child_outlives_a_trial_its_scheduler_stops(tmp_path, cleanup):
    trial = TrialDouble(
        dir=str(tmp_path / "trial"), budget=10, stop_after=1
    )  # as ASHA stops a trial
    with pytest.raises(StopTrial):
        run_command(
            f"python {_script(tmp_path)} 1 sleep",
            [],
            trial,
            cwd=tmp_path,
            timeout_s=60,
            hydra_run_dir=False,
        )
    pids = _pids(tmp_path / "trial")
    cleanup.extend(pids)
    assert len(pids) == 5
    assert _none_alive(pids), [pid for pid in pids if _alive(pid)]


def _worker(runner: Path) -> subprocess.Popen:
    """`runner` started as the process running the trial (a Ray worker's stand-in)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen([sys.executable, str(runner)], env=env, cwd=ROOT)


def _children_started(tmp_path: Path, worker: subprocess.Popen, cleanup: list[int]) -> list[int]:
    """Once the script's five children hold their memory: their pids (also left to `cleanup`)."""
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "trial").glob("*.ready"))) < 5:
        assert time.monotonic() < deadline and worker.poll() is None, (
            "the script did not start its children"
        )
        time.sleep(0.05)
    pids = _pids(tmp_path / "trial")
    cleanup.extend(pids)
    return pids


def test_no_child_outlives_a_worker_that_dies(tmp_path, cleanup):
    """The process running the trial (a Ray worker) is SIGKILLed mid-run: the supervisor ends the
    tree."""
    script = _script(tmp_path)
    runner = tmp_path / "runner.py"
    runner.write_text(
        textwrap.dedent(f"""
        from planner._trial.command import run_command
        from tests.trial_double import TrialDouble
        trial = TrialDouble(dir={str(tmp_path / "trial")!r}, budget=10)
        run_command("python {script} 1 sleep", [], trial, cwd={str(tmp_path)!r}, timeout_s=120, hydra_run_dir=False)
    """)
    )
    worker = _worker(runner)
    try:
        pids = _children_started(tmp_path, worker, cleanup)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        assert _none_alive(pids, within_s=15), [pid for pid in pids if _alive(pid)]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_no_child_outlives_a_worker_that_kills_its_children_as_it_exits(tmp_path, cleanup):
    """F9: a Ray worker that exits (its driver stopped: `plan run` got SIGTERM) SIGKILLs its direct
    children (Ray's kill_child_processes_on_worker_exit). The worker's child is the supervisor's
    relay, never the supervisor itself, which ends the tree: the script, its setsid child and its
    double-forked grandchildren."""
    script = _script(tmp_path)
    runner = tmp_path / "runner.py"
    runner.write_text(
        textwrap.dedent(f"""
        import os, signal, threading
        import psutil
        from planner._trial.command import run_command
        from tests.trial_double import TrialDouble
        trial = TrialDouble(dir={str(tmp_path / "trial")!r}, budget=10)
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM}})
        threading.Thread(target=run_command, daemon=True, args=("python {script} 1 sleep", [], trial),
                         kwargs=dict(cwd={str(tmp_path)!r}, timeout_s=120, hydra_run_dir=False)).start()
        signal.sigwait({{signal.SIGTERM}})
        for child in psutil.Process().children():  # what Ray's worker does on exit
            child.kill()
        os._exit(0)
    """)
    )
    worker = _worker(runner)
    try:
        pids = _children_started(tmp_path, worker, cleanup)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        assert _none_alive(pids, within_s=15), [pid for pid in pids if _alive(pid)]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


DAEMONS_AT_TOP = """
import os, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
def write_pid(name, pid):
    with open(os.path.join(HERE, name + ".tmp"), "w") as f:
        f.write(str(pid))
    os.replace(os.path.join(HERE, name + ".tmp"), os.path.join(HERE, name + ".pid"))
if os.fork() == 0:  # a double-forked daemon, in a session of its own
    os.setsid()
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/sleep", ["sleep", "605"])
    write_pid("fork", pid)
    os._exit(0)
os.wait()
write_pid("setsid", subprocess.Popen(["sleep", "606"], start_new_session=True).pid)
if sys.argv[1:] == ["--help"] and os.environ.get("HANG") != "1":
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float)
    parser.parse_args()
time.sleep(60)
"""


@pytest.mark.parametrize("hang", [False, True], ids=["prints-help", "times-out"])
def test_no_daemon_outlives_the_help_probe_of_an_argparse_script(
    tmp_path, cleanup, monkeypatch, hang
):
    """F9: `plan validate` runs `<command> --help`; what the script starts at its top level ends
    with it, when it prints its usage and exits, and when it is killed for taking too long."""
    from planner._contract.command_help import read_help

    folder = tmp_path / "trial"  # where `cleanup` looks for pids
    folder.mkdir()
    (folder / "train.py").write_text(DAEMONS_AT_TOP)
    monkeypatch.setenv("HANG", "1" if hang else "0")
    found, why = read_help([sys.executable, "train.py"], folder, timeout_s=3.0 if hang else 30.0)
    pids = _pids(folder)
    cleanup.extend(pids)
    assert (found is None and "took over 3 s" in why) if hang else (why == "" and found.kind("lr"))
    assert len(pids) == 2
    assert _none_alive(pids, within_s=10), [pid for pid in pids if _alive(pid)]


@pytest.mark.ray
def test_no_daemon_of_a_function_trainable_outlives_its_trial(tmp_path, cleanup):
    """F10: a function trainable leaves a `setsid` child, a plain child and a double-forked
    grandchild that ignores SIGTERM; a real `plan run` (embedded Ray, tuning and confirmation):
    each ends with its trial, the Ray worker being their subreaper. Before: they outlived the run,
    re-parented to init."""
    from tests._runs import end_plan_run, start_plan_run, synthetic_contract

    data = synthetic_contract(
        name="daemons",
        trainable="tests.trainables.worker_ends:leaves_daemons",
        seeds=[0, 1],
        budget={"exposure": 2},
        tuning={
            "trials_per_arm": 1,
            "seeds": [100],
            "sampler": {"name": "random", "seed": 0},
            "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
        },
    )
    proc, runs, ray_tmp = start_plan_run(tmp_path, data, "dm")
    try:
        out, err = proc.communicate(timeout=300)
        trials = sorted(runs.glob("*/*/trials/*"))
        pids = [int(p.read_text()) for t in trials for p in t.glob("*.pid")]
        cleanup.extend(pids)
    finally:
        end_plan_run(proc, ray_tmp)
    assert proc.returncode == 0, (out[-2000:], err[-2000:])
    assert len(trials) == 6 and len(pids) == 18, (trials, pids)
    assert _none_alive(pids, within_s=10), [pid for pid in pids if _alive(pid)]
