"""Real processes: the one pass over the process table that ends a trial's processes: parents,
zombies, descendants."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from planner._core import supervisor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")


def _wait_until(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _in_a_fresh_process(code: str) -> str:
    """What `code` prints, run in a fresh Python: this process may hold the tier's session Ray as
    children."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ).stdout


def test_a_child_is_seen_with_its_parent_and_becomes_a_zombie_unreaped(tmp_path):
    # a command name with ") Z 1 (" in it: the state and the parent are read after the last ")"
    odd = tmp_path / "x) Z 1 (y"
    os.symlink(shutil.which("sleep"), odd)
    child = subprocess.Popen([str(odd), "0.3"])
    try:
        table = supervisor.process_table()
        assert table[child.pid] == (os.getpid(), False)
        assert child.pid in supervisor.descendants(table, os.getpid())
        assert _wait_until(lambda: supervisor.process_table()[child.pid][1]), (
            "an exited, unreaped child is a zombie"
        )
    finally:
        child.wait()
    assert child.pid not in supervisor.process_table()


def test_end_descendants_ends_and_reaps_a_grandchild_but_spares_what_was_there():
    # in a fresh process: ending "every descendant" here would end the tier's session Ray
    code = """
import subprocess, time
from planner._core import supervisor
spared = subprocess.Popen(["sleep", "30"])
parent = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
while len(supervisor.descendants(supervisor.process_table(), parent.pid)) != 1:
    time.sleep(0.02)
grandchild = supervisor.descendants(supervisor.process_table(), parent.pid)[0]
supervisor.end_descendants(2.0, spare=frozenset({spared.pid}))
table = supervisor.process_table()
print([parent.pid in table, grandchild not in table or table[grandchild][1], spared.poll() is None])
spared.kill()
spared.wait()
"""
    out = _in_a_fresh_process(code)
    # the ended child reaped by pid (gone from the table), the grandchild ended too, the spared one
    # alive
    assert out.strip() == "[False, True, True]", out


def test_has_children_sees_a_living_and_an_unreaped_child_and_reaps_nothing():
    # in a fresh process: this one may hold the tier's session Ray as children
    code = """
import subprocess, time
from planner._core import supervisor
seen = [supervisor.has_children()]
child = subprocess.Popen(["sleep", "0.2"])
seen.append(supervisor.has_children())
while not supervisor.process_table()[child.pid][1]:
    time.sleep(0.02)
seen += [supervisor.has_children(), supervisor.process_table()[child.pid][1]]
child.wait()
seen.append(supervisor.has_children())
print(seen)
"""
    out = _in_a_fresh_process(code)
    # none at first; the living child; still a child once ended, not reaped by the look; none once
    # waited for
    assert out.strip() == "[False, True, True, True, False]", out
