"""optuna-dashboard on a running run: its server, started on loopback against the run folder's
studies.log while `plan run` still tunes, answers with one study per arm, their trials' params,
states and intermediate values, and its page in headless Chromium lists the arms' studies (its
screenshot is docs/img/dashboard.png, refreshed with PLANNER_UPDATE_SCREENSHOTS=1).

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

import planner
from tests._browser import CHROMIUM, chromium, screenshot_path
from tests._runs import ROOT, end_plan_run, start_plan_run, synthetic_contract

pytestmark = [pytest.mark.browser, pytest.mark.ray]

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


def _studies(base: str) -> dict[str, dict]:
    """The studies the dashboard's API lists, by name: each one's detail and id."""
    summaries = _get(f"{base}/api/studies")["study_summaries"]
    return {
        s["study_name"]: {**_get(f"{base}/api/studies/{s['study_id']}"), "id": s["study_id"]}
        for s in summaries
    }


def _curve(trial: dict) -> dict[int, float]:
    return {v["step"]: v["value"] for v in trial["intermediate_values"]}


def _running_curve(base: str):
    """A trial the dashboard shows running with a curve so far, else None."""
    for study in _studies(base).values():
        for trial in study["trials"]:
            if trial["state"] == "Running" and trial["intermediate_values"]:
                return trial
    return None


def _ended_in_each_arm(base: str):
    """The arms' studies once each has a trial ended: {name: its detail}, else None."""
    studies = _studies(base)
    ended = all(
        any(t["state"] in ("Complete", "Pruned") for t in s["trials"]) for s in studies.values()
    )
    return studies if set(studies) == ARMS and ended else None


def _dashboard_of_status(tmp_path: Path, run_dir: Path, port: int) -> subprocess.Popen:
    """optuna-dashboard started as `plan status` says (the command it prints, from the folder it
    was printed in), on loopback at `port`."""
    status = subprocess.run(
        [sys.executable, "-m", "planner", "status", str(run_dir)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert DASHBOARD is not None  # else the module was skipped
    shown = f"optuna-dashboard {(run_dir / 'studies.log').relative_to(tmp_path)}"
    assert f"tuning studies: {shown}\n" in status.stdout, status.stdout
    return subprocess.Popen(
        [DASHBOARD, *shown.split()[1:], "--host", "127.0.0.1", "--port", str(port), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "dashboard.err").open("w"),
        start_new_session=True,
    )


def test_optuna_dashboard_follows_a_running_run(tmp_path):
    data = synthetic_contract(
        name="dashboard",
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
        _until((run_dir / "studies.log").is_file, proc, "no studies.log")
        port = _free_port()
        server = _dashboard_of_status(tmp_path, run_dir, port)
        base = f"http://127.0.0.1:{port}"

        # (a) while the run goes: a running trial's curve so far, then each arm's ended trials
        running = _until(lambda: _running_curve(base), proc, "no running trial with a curve")
        assert min(_curve(running)) == 1 and max(_curve(running)) < 30
        studies = _until(lambda: _ended_in_each_arm(base), proc, "no arm with an ended trial")
        assert proc.poll() is None
        assert [s["directions"] for s in studies.values()] == [["maximize"]] * 2
        records = planner.load_run(run_dir)
        for name, study in studies.items():
            assert study["objective_names"] == ["val_acc"], study.keys()
            assert 1 <= len(study["trials"]) <= TUNING["trials_per_arm"], name
            for trial in study["trials"]:
                attrs = {a["key"]: a["value"] for a in trial["user_attrs"]}
                assert attrs["trial_id"].startswith(f"tune-{name}-s100-t"), attrs
                assert [p["name"] for p in trial["params"]] == ["recipe.lr"]
                assert 0.001 <= float(trial["params"][0]["param_external_value"]) <= 0.1
                if trial["state"] != "Complete":
                    continue
                # an ended trial's curve in the dashboard is its record's
                rows = records.reports[
                    (records.reports["trial_id"] == attrs["trial_id"])
                    & (records.reports["metric"] == "val_acc")
                ]
                stored = dict(zip(rows["step"], rows["value"], strict=True))
                assert _curve(trial) == pytest.approx(stored)
                assert len(_curve(trial)) == 30

        # (b) the page, drawn by Chromium, lists the arms' studies
        dom = chromium(
            tmp_path,
            f"--window-size={WIDTH},900",
            "--dump-dom",
            f"{base}/dashboard",
            budget_ms=15000,
        )
        assert dom.returncode == 0, dom.stderr[-2000:]
        for name in ARMS:
            card = f">{studies[name]['id']}. {name}</h5>"  # a study's card: "<id>. <name>"
            assert card in dom.stdout, (card, dom.stdout[-3000:])

        shot = tmp_path / "shot.png"
        page = f"{base}/dashboard/studies/{studies['treat']['id']}"
        done = chromium(
            tmp_path, f"--window-size={WIDTH},1000", f"--screenshot={shot}", page, budget_ms=15000
        )
        assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
        from PIL import Image

        image = Image.open(shot).convert("RGB")
        colors = image.resize((WIDTH // 8, 1000 // 8)).getcolors(maxcolors=1 << 16)
        assert colors is not None and len(colors) > 50, "the page looks blank"
        image.save(screenshot_path(tmp_path, "dashboard.png"), optimize=True)
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        end_plan_run(proc, ray_tmp)
