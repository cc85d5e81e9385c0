"""Real processes: the one pass over the process table that ends a trial's processes: parents, zombies, descendants."""

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


def test_a_child_is_seen_with_its_parent_and_becomes_a_zombie_unreaped(tmp_path):
    # a command name with ") Z 1 (" in it: the state and the parent are read after the last ")"
    odd = tmp_path / "x) Z 1 (y"
    os.symlink(shutil.which("sleep"), odd)
    child = subprocess.Popen([str(odd), "0.3"])
    try:
        table = supervisor.process_table()
        assert table[child.pid] == (os.getpid(), False)
        assert child.pid in supervisor.descendants(table, os.getpid())
        assert _wait_until(lambda: supervisor.process_table()[child.pid][1]), "an exited, unreaped child is a zombie"
    finally:
        child.wait()
    assert child.pid not in supervisor.process_table()


def test_end_descendants_ends_and_reaps_a_grandchild_but_spares_what_was_there(tmp_path):
    spared = subprocess.Popen(["sleep", "30"])
    # a child that starts a grandchild and waits: both are new, both end
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        assert _wait_until(lambda: len(supervisor.descendants(supervisor.process_table(), parent.pid)) == 1)
        grandchild = supervisor.descendants(supervisor.process_table(), parent.pid)[0]
        supervisor.end_descendants(2.0, spare=frozenset({spared.pid}))
        table = supervisor.process_table()
        assert parent.pid not in table, "the ended child was reaped by pid"
        assert grandchild not in table or table[grandchild][1], "the grandchild was ended too"
        assert spared.poll() is None, "a process in spare is left alone"
    finally:
        spared.kill()
        spared.wait()
        if parent.poll() is None:
            parent.kill()
            parent.wait()
