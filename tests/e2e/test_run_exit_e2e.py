"""`plan run` prints its result before it shuts its embedded Ray down, and exits only
after: a real `plan run` subprocess with its own Ray. When the result's first line is on stdout,
the run folder is already closed: state.json and run_ended say `completed`, the lock is gone. The
process then exits 0 with none of its Ray's processes left, also when SIGTERM and SIGINT arrive
while Ray shuts down (they neither change the exit code nor put anything of Ray's on the
terminal)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from planner import load_run
from tests._runs import end_plan_run, ray_processes, start_plan_run, synthetic_contract

pytestmark = pytest.mark.ray


def _start(tmp_path):
    """`plan run` of a small confirmation-only contract in a subprocess with its own embedded
    Ray."""
    return start_plan_run(
        tmp_path, synthetic_contract(name="exit", seeds=[0, 1], budget={"exposure": 2}), "rx"
    )


def _until_result(proc) -> list[str]:
    """stdout's lines up to and with the result's first line ("run folder: ...")."""
    lines = []
    for line in proc.stdout:
        lines.append(line)
        # the result's first line; the run's own first line names the folder to follow it by
        if line.startswith("run folder:") and "(follow it" not in line:
            return lines
    raise AssertionError(
        ("no result printed", proc.wait(timeout=60), "".join(lines), proc.stderr.read()[-3000:])
    )


def _rest(proc) -> tuple[str, str]:
    """The rest of stdout (what the line reader buffered included; communicate would skip it) and
    stderr."""
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=120)
    return out, err


def _folder_closed_at_print(runs: Path) -> None:
    (run_dir,) = runs.glob("*/*/")
    assert json.loads((run_dir / "state.json").read_text())["state"] == "completed"
    assert load_run(run_dir).events[-1]["event"] == "run_ended"
    assert not (run_dir / "lock").exists()


def _no_ray_left(ray_tmp: str) -> None:
    deadline = time.monotonic() + 30  # a process Ray sent its signal may take a moment to go
    while ray_processes(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [" ".join(p.cmdline())[:200] for p in ray_processes(ray_tmp)]
    assert not left, left


def test_the_result_comes_with_the_folder_closed_and_the_process_ends_with_its_ray(tmp_path):
    proc, runs, ray_tmp = _start(tmp_path)
    try:
        before = "".join(_until_result(proc))
        _folder_closed_at_print(runs)
        out, err = _rest(proc)
        out = before + out
        _no_ray_left(ray_tmp)
    finally:
        end_plan_run(proc, ray_tmp)
    assert proc.returncode == 0, (proc.returncode, out[-2000:], err[-2000:])
    assert "run state:  completed" in out and "treat" in out, out


def test_sigterm_and_sigint_while_ray_shuts_down_change_nothing(tmp_path):
    proc, runs, ray_tmp = _start(tmp_path)
    try:
        _until_result(proc)
        os.kill(proc.pid, signal.SIGTERM)  # the driver alone, as `kill PID` does
        os.killpg(
            proc.pid, signal.SIGINT
        )  # and Ctrl-C, which the terminal sends to the whole group
        out, err = _rest(proc)
        _no_ray_left(ray_tmp)
    finally:
        end_plan_run(proc, ray_tmp)
    assert proc.returncode == 0, (proc.returncode, out[-2000:], err[-2000:])
    for noise in ("Traceback", "SIGTERM", "KeyboardInterrupt", "interrupted", "ray"):
        assert noise not in err, err[-3000:]
    _folder_closed_at_print(runs)
