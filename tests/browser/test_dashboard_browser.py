"""optuna-dashboard on a running run: its server, started on loopback against the run folder's
studies.log while `plan run` still tunes, answers with one study per arm, their trials' params,
states and intermediate values, and its page in headless Chromium lists the arms' studies (its
screenshot is docs/img/dashboard.png).

The command is the one `plan status` prints: `optuna-dashboard RUN_DIR/studies.log`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests._runs import ROOT, end_plan_run, start_plan_run, synthetic_contract

pytestmark = [pytest.mark.browser, pytest.mark.ray]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# the console script optuna-dashboard installs, beside this Python or on PATH
DASHBOARD = next(
    (
        str(p)
        for p in (
            Path(sys.executable).parent / "optuna-dashboard",
            shutil.which("optuna-dashboard"),
        )
        if p and os.access(p, os.X_OK)
    ),
    None,
)
ARMS = {"base", "treat"}
TUNING = {
    "trials_per_arm": 3,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
}
WIDTH = 1280


@pytest.fixture(scope="module", autouse=True)
def _tools_installed():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    if DASHBOARD is None:
        pytest.skip("optuna-dashboard is not installed (pip install planner[dashboard])")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _until(check, proc: subprocess.Popen, what: str, timeout_s: float = 300):
    """check()'s first true answer while the run still runs; fails when the run ended first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            found = check()
        except (OSError, urllib.error.URLError):  # the server not listening yet
            found = None
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what} before the run ended (exit {proc.poll()})")


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        "--virtual-time-budget=15000",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _studies_with_curves(base: str):
    """The arms' studies once each has a trial ended with its curve: {name: its detail}, else None."""
    summaries = {s["study_name"]: s for s in _get(f"{base}/api/studies")["study_summaries"]}
    if set(summaries) != ARMS:
        return None
    details = {n: _get(f"{base}/api/studies/{s['study_id']}") for n, s in summaries.items()}
    for detail in details.values():
        if not any(t["intermediate_values"] for t in detail["trials"]):
            return None
    return {n: {**details[n], "study_id": summaries[n]["study_id"]} for n in details}


def test_optuna_dashboard_follows_a_running_run(tmp_path):
    data = synthetic_contract(
        name="dashboard",
        trainable="tests.trainables.synthetic:slow",
        seeds=[0, 1],
        budget={"exposure": 30},
        tuning=TUNING,
    )
    data["config"]["values"]["recipe"]["sleep"] = 0.2
    proc, runs, ray_tmp = start_plan_run(tmp_path, data, "db")
    server = None
    try:
        first = proc.stdout.readline()
        assert first.startswith("run folder: "), first
        run_dir = runs / "dashboard" / (runs / "dashboard" / "latest").read_text().strip()
        studies = run_dir / "studies.log"
        _until(studies.is_file, proc, "no studies.log")

        status = subprocess.run(
            [sys.executable, "-m", "planner", "status", str(run_dir)],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert status.returncode == 0, status.stderr
        # the command it prints, run as printed (from the folder it was printed in)
        shown = f"optuna-dashboard {studies.relative_to(tmp_path)}"
        assert f"tuning studies: {shown}\n" in status.stdout, status.stdout

        port = _free_port()
        server = subprocess.Popen(
            [DASHBOARD, *shown.split()[1:], "--host", "127.0.0.1", "--port", str(port), "--quiet"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        found = _until(
            lambda: _studies_with_curves(base), proc, "no study of each arm with a curve"
        )
        assert proc.poll() is None  # (a) answered while the run still runs
        for name, detail in found.items():
            trials = detail["trials"]
            assert 1 <= len(trials) <= TUNING["trials_per_arm"], name
            ended = [t for t in trials if t["intermediate_values"]]
            for trial in ended:
                assert trial["state"] in ("Complete", "Pruned"), trial["state"]
                assert [p["name"] for p in trial["params"]] == ["recipe.lr"]
                assert 0.001 <= float(trial["params"][0]["param_external_value"]) <= 0.1
                steps = [v["step"] for v in trial["intermediate_values"]]
                assert steps == sorted(steps) and steps[0] == 1, steps
                assert {v["value"] for v in trial["intermediate_values"]} == {0.5}  # `slow`
            user_attrs = [{a["key"]: a["value"] for a in t["user_attrs"]} for t in trials]
            assert all(a["trial_id"].startswith(f"tune-{name}-") for a in user_attrs)

        # (b) the page, drawn by Chromium, lists the arms' studies
        dom = _chromium(tmp_path, f"--window-size={WIDTH},900", "--dump-dom", f"{base}/dashboard")
        assert dom.returncode == 0, dom.stderr[-2000:]
        for name in ARMS:
            assert f">{name}<" in dom.stdout, name

        shot = tmp_path / "shot.png"
        page = f"{base}/dashboard/studies/{found['treat']['study_id']}"
        done = _chromium(tmp_path, f"--window-size={WIDTH},1000", f"--screenshot={shot}", page)
        assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
        from PIL import Image

        image = Image.open(shot).convert("RGB")
        colors = image.resize((WIDTH // 8, 1000 // 8)).getcolors(maxcolors=1 << 16)
        assert colors is not None and len(colors) > 50, "the page looks blank"
        image.save(ROOT / "docs" / "img" / "dashboard.png", optimize=True)
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        end_plan_run(proc, ray_tmp)
