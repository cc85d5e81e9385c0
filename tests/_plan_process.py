"""`plan` as a user runs it: `python -m planner` in a subprocess, its output captured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def plan(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
