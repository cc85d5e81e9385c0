"""Shell completion of `plan` (argcomplete): the shell code it prints, and the answers it gives."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from tests._runs import ROOT


def _complete(line: str) -> list[str]:
    """What argcomplete answers on file descriptor 8, as a shell's completion function reads it."""
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    done = subprocess.run(
        ["bash", "-c", f"{shlex.quote(sys.executable)} -m planner 8>&1 9>/dev/null 1>/dev/null"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [w.strip() for w in done.stdout.split("\n") if w.strip()]


def test_plan_completes_commands_and_options():
    assert "status" in _complete("plan sta")
    assert "--watch" in _complete("plan status --w")


def test_plan_completion_prints_the_shell_code():
    done = subprocess.run(
        [sys.executable, "-m", "planner", "completion", "bash"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "complete" in done.stdout and "plan" in done.stdout
