"""How `plan` ends its process (planner._cli.main._exit_now): as Python's own exit does, less the
teardown of every module. What a normal exit guarantees still holds: the exit code is
the command's, every exit handler runs, every byte printed reaches a pipe, a thread that is not a
daemon is waited for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VALID = REPO / "examples" / "contracts" / "valid" / "optimizer-tuned.yaml"
TYPO = REPO / "examples" / "contracts" / "invalid" / "typo.yaml"

# loaded by every Python started with this folder on PYTHONPATH: an exit handler, a weak-reference
# finalizer and a thread that is not a daemon, each writing a line when it has run
SITECUSTOMIZE = """
import atexit, os, threading, time, weakref
out = os.environ["EXIT_PROBE"]
def note(what):
    with open(out, "a") as f:
        f.write(what + "\\n")
atexit.register(note, "atexit")
class Held: pass
held = Held()
weakref.finalize(held, note, "finalizer")
def late():
    time.sleep(0.5)
    note("thread")
threading.Thread(target=late).start()
"""


def _plan(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    probe = tmp_path / "probe.txt"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "EXIT_PROBE": str(probe)}
    out = subprocess.run(
        [sys.executable, "-m", "planner", *args],
        cwd=VALID.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out, sorted(probe.read_text().split()) if probe.exists() else []


def test_a_command_ends_with_its_exit_code_after_every_handler_thread_and_byte(tmp_path):
    out, ran = _plan(tmp_path, "schema")  # about 30 KB of JSON through a pipe
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["title"]
    assert ran == ["atexit", "finalizer", "thread"]


def test_a_refused_contract_keeps_its_exit_code(tmp_path):
    out, ran = _plan(tmp_path, "validate", str(TYPO))
    assert out.returncode == 1, (
        out.returncode,
        out.stdout,
        out.stderr,
    )  # docs/commands.md: 1, refused
    assert out.stdout.rstrip().endswith("typo.yaml: invalid (1 error)")
    assert ran == ["atexit", "finalizer", "thread"]
