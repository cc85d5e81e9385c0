"""Headless Chromium as the browser tier drives it: a fresh profile, nothing fetched beside the
page."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "img"


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a screenshot is saved: docs/img/`name` when PLANNER_UPDATE_SCREENSHOTS=1 (refreshing
    the docs' images is a deliberate act), else beside the test's other files, so that a test run
    leaves the repository as it found it."""
    if os.environ.get("PLANNER_UPDATE_SCREENSHOTS") == "1":
        return DOCS_IMAGES / name
    return tmp_path / name


def chromium(tmp_path: Path, *args: str, budget_ms: int = 20000) -> subprocess.CompletedProcess:
    """Chromium run headless on `args` (a page, --dump-dom or --screenshot=...), with a profile
    under `tmp_path`, letting the page's scripts run for `budget_ms` of virtual time."""
    assert CHROMIUM is not None  # a test module skips when it is missing
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        f"--virtual-time-budget={budget_ms}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)
