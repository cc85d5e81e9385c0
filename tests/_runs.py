"""Shared fixtures of the run tests: the synthetic contract and its files, a synthetic run folder.

- `synthetic_contract(**patch)`: the two-arm contract on `tests.trainables.synthetic`
  (a recipe factor, baseline `base`, arm `treat`), as data; `patch` replaces
  top-level keys; `RUN_CONTRACT` is it as the run tests run it. `write_contract_data(folder, data)`
  writes one as YAML; `contract_writer(base)`
  is the `write(folder, **patch)` of a test module (a patched copy of `base`, written);
  `write_yaml(path, data)` is the one writer of a test's YAML file under all of them.
- `lineage_contract(**patch)`: the two-arm contract on `tests.trainables.lineage` the lineage tests
  run.
- `synthetic_run(folder, **options)`: the run folder the report, results and
  browser tests read (`bench.synthetic_run.make_run`: 3 arms, 5 seeds, 8 tuning
  trials a sweep, 10 reports a trial), options overriding.
- `example_app(name, folder, edit)`: a copy of examples/<name> in `folder/app`, its contract edited
  in place by `edit(contract)`; `hydra_app(folder, **edits)` is examples/hydra_app with a smaller
  contract.
- `start_plan_run(tmp_path, data, prefix)`: `plan run` of a contract (as data) in a subprocess with
  its own embedded Ray; `ray_processes(ray_tmp)` lists what is alive of that Ray, `end_plan_run`
  kills what is left.
- `cut_short(run_dir, trial_ids)`: a finished run folder made as if the driver had stopped while
  those trials ran (their records gone, and the records their workers kept), so that a `--resume`
  runs them again.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

SYNTHETIC_CONTRACT: dict[str, Any] = {
    "version": 1,
    "name": "synthetic",
    "hypothesis": "The treatment raises val_acc.",
    "trainable": "tests.trainables.synthetic:train",
    "config": {
        "values": {
            "recipe": {"name": "a", "level": 0.5, "lr": 0.01, "best_lr": 0.01, "noise": 0.01}
        }
    },
    "factor": {"name": "recipe", "keys": ["recipe.name", "recipe.level"]},
    "baseline": {"name": "base", "overrides": ["recipe.name=a"]},
    "arms": [{"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.7"]}],
    "metric": {"name": "val_acc", "mode": "max", "heldout": "test_acc"},
    # welch: the synthetic trainable draws a seed's noise alike in every arm and its effect is
    # exact, so the per-seed differences show no spread; the paired test (the default) then decides
    # by the sign rule over seeds, which needs 6 seeds at alpha 0.05, and this contract has 5
    "acceptance": {"min_effect": 0.05, "test": "welch"},
    "seeds": [0, 1, 2, 3, 4],
    "budget": {"exposure": 3},
}


def synthetic_contract(**patch: Any) -> dict[str, Any]:
    """A fresh copy of SYNTHETIC_CONTRACT with top-level keys replaced by `patch`; an `acceptance`
    that names no test keeps welch (see SYNTHETIC_CONTRACT's note)."""
    data = copy.deepcopy(SYNTHETIC_CONTRACT)
    data.update(copy.deepcopy(patch))
    if isinstance(data.get("acceptance"), dict):
        data["acceptance"].setdefault("test", "welch")
    return data


# The synthetic contract as the run tests run it (named e2e): its factor moves recipe.best_lr too.
RUN_CONTRACT = synthetic_contract(
    name="e2e", factor={"name": "recipe", "keys": ["recipe.name", "recipe.level", "recipe.best_lr"]}
)


def write_yaml(path: Path, data: Any, *, sort_keys: bool = True) -> Path:
    """`data` as YAML at `path`, its folders made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=sort_keys))
    return path


def write_contract_data(
    folder: Path, data: dict[str, Any], name: str = "contract.yaml", *, sort_keys: bool = True
) -> Path:
    return write_yaml(Path(folder) / name, data, sort_keys=sort_keys)


def contract_writer(base: dict[str, Any], *, file: str = "contract.yaml") -> Callable[..., Path]:
    """`write(folder, file=..., **patch) -> Path`: a copy of `base` with top-level keys replaced by
    `patch`, written as folder/file."""

    def write(folder: Path, file: str = file, **patch: Any) -> Path:
        return write_contract_data(folder, {**copy.deepcopy(base), **copy.deepcopy(patch)}, file)

    return write


LINEAGE_CONTRACT: dict[str, Any] = {
    "version": 1,
    "name": "tiny",
    "hypothesis": "A higher level raises val_acc.",
    "trainable": "tests.trainables.lineage:train",
    "config": {"values": {"recipe": {"name": "a", "level": 0.5, "lr": 0.01, "width": 1}}},
    "factor": {"name": "level", "keys": ["recipe.name", "recipe.level"]},
    "baseline": {"name": "base", "overrides": ["recipe.name=a"]},
    "arms": [{"name": "high", "overrides": ["recipe.name=b", "recipe.level=0.7"]}],
    "metric": {"name": "val_acc", "mode": "max"},
    # welch: the trainable's noise is the seed's alone, so the arms differ by an exact shift, which
    # the paired test's sign rule shows only from 6 seeds (see SYNTHETIC_CONTRACT's note)
    "acceptance": {"min_effect": 0.05, "test": "welch"},
    "seeds": [0, 1, 2],
    "budget": {"exposure": 2},
}


def lineage_contract(**patch: Any) -> dict[str, Any]:
    """A fresh copy of LINEAGE_CONTRACT with top-level keys replaced by `patch`; an `acceptance`
    that names no test keeps welch."""
    data = copy.deepcopy(LINEAGE_CONTRACT)
    data.update(copy.deepcopy(patch))
    if isinstance(data.get("acceptance"), dict):
        data["acceptance"].setdefault("test", "welch")
    return data


SYNTHETIC_ARMS = ("sgd", "adam", "adamw")
SYNTHETIC_RUN_ID = "20261129-181700-a3f2"


def synthetic_run(folder: Path, **options: Any) -> Path:
    """A synthetic run folder `folder/<run id>` (bench.synthetic_run.make_run); `options` override
    its shape."""
    from bench.synthetic_run import make_run

    shape = {"arms": SYNTHETIC_ARMS, "seeds": 5, "tune_trials": 8, "reports_per_trial": 10}
    return make_run(Path(folder) / SYNTHETIC_RUN_ID, **{**shape, **options})


def example_app(
    name: str,
    folder: Path,
    edit: Callable[[dict], None] | None = None,
    *,
    dest: str = "app",
    sort_keys: bool = False,
) -> Path:
    """examples/<name> copied into `folder/dest`, its contract.yaml edited in place by
    `edit(contract)` (when given) and written back; the contract's path."""
    app = Path(folder) / dest
    shutil.copytree(ROOT / "examples" / name, app)
    path = app / "contract.yaml"
    if edit is not None:
        contract = yaml.safe_load(path.read_text())
        edit(contract)
        write_yaml(path, contract, sort_keys=sort_keys)
    return path


def hydra_app(folder: Path, *, seeds: list[int], exposure: int, trials_per_arm: int) -> Path:
    """examples/hydra_app copied into `folder/app`, its contract made small; the contract's path."""

    def edit(contract: dict) -> None:
        contract["seeds"] = list(seeds)
        contract["budget"]["exposure"] = exposure
        contract["tuning"]["trials_per_arm"] = trials_per_arm

    return example_app("hydra_app", folder, edit, sort_keys=True)


def cut_short(run_dir: Path, trial_ids) -> None:
    """As if the driver had stopped while `trial_ids` ran: their lines dropped from trials.jsonl
    and the records their workers kept removed from their folders, so `--resume` runs them again.
    (With the kept record there, a trial that had ended is recorded from it instead:
    docs/reliability.md, "Resume".)"""
    from planner._trial.checkpoints import KEPT_RECORD

    run_dir, ids = Path(run_dir), set(trial_ids)
    lines = (run_dir / "trials.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "trials.jsonl").write_text(
        "".join(line for line in lines if json.loads(line)["trial_id"] not in ids)
    )
    for trial_id in ids:
        (run_dir / "trials" / trial_id / KEPT_RECORD).unlink(missing_ok=True)


def start_plan_run(
    tmp_path: Path, data: dict[str, Any], prefix: str
) -> tuple[subprocess.Popen, Path, str]:
    """`plan run` of the contract `data` (written to tmp_path/contract.yaml) in a subprocess of its
    own session, with its own embedded Ray under a fresh RAY_TMPDIR; (the process, the runs folder,
    that RAY_TMPDIR)."""
    path = write_yaml(tmp_path / "contract.yaml", data, sort_keys=False)
    runs = tmp_path / "runs"
    ray_tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # Ray's socket paths must fit 107 bytes
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner", "run", str(path), "--runs-dir", str(runs)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return proc, runs, ray_tmp


def interrupt_joined_run(
    path: Path, runs: Path, address: str, pattern: str, records: int, poll_s: float = 0.2
) -> tuple[Path, str, str]:
    """`plan run path --quiet` joined to the Ray at `address` in a subprocess, sent SIGINT once the
    first trials.jsonl under `runs` matching `pattern` holds `records` lines; it must end with exit
    3. (the run folder, its stdout, its stderr)."""
    proc, out, err, run_dir = _interrupted(path, runs, address, pattern, records, poll_s)
    assert proc.returncode == 3, _exit_said(proc, out, err, run_dir)
    return run_dir, out, err


def _interrupted(
    path: Path, runs: Path, address: str, pattern: str, records: int, poll_s: float
) -> tuple[subprocess.Popen, str, str, Path]:
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "planner", "run", str(path), "--runs-dir", str(runs)]
    proc = subprocess.Popen(
        [*command, "--quiet", "--address", address],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline, trials = time.monotonic() + 180, []
    while time.monotonic() < deadline and proc.poll() is None:
        trials = list(runs.glob(pattern))
        if trials and len(trials[0].read_text().splitlines()) >= records:
            break
        time.sleep(poll_s)
    assert proc.poll() is None, ("ended before the signal", proc.returncode, proc.communicate())
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc, out, err, trials[0].parent


def _exit_said(proc: subprocess.Popen, out: str, err: str, run_dir: Path) -> str:
    return f"exit {proc.returncode}, stderr {err[-600:]!r}, stdout {out[-300:]!r}\n" + _ray_side(
        run_dir, proc.pid
    )


def _ray_side(run_dir: Path, pid: int) -> str:
    """What was left about the driver `pid` of the run in `run_dir`, for a failed assert, shortest
    first (CI shows the head of a failure): the run's state, the ends of the run folder's ray.log
    (where Ray's C++ core writes once the run holds a cluster's Ray, not the terminal) and of Ray's
    own log of that driver, found in any Ray session under RAY_TMPDIR (with several test workers,
    session_latest may be another worker's Ray)."""
    state = run_dir / "state.json"
    found = [f"state.json: {state.read_text()[:300] if state.exists() else '<absent>'}"]
    ray_log = run_dir / "ray.log"
    found.append(f"ray.log: ...{ray_log.read_text()[-1200:] if ray_log.exists() else '<absent>'}")
    ray_tmp = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
    for log in Path(ray_tmp, "ray").glob(f"session_2*/logs/python-core-driver-*_{pid}.log"):
        found.append(
            f"{log.parent.parent.name}/{log.name}: ...{log.read_text(errors='replace')[-2000:]}"
        )
    return "\n".join(found)


def ray_processes(ray_tmp: str) -> list:
    """The live (not zombie) processes of the Ray that runs under `ray_tmp`."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if (
                ray_tmp in " ".join(p.info["cmdline"] or [])
                and p.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except psutil.Error:
            pass
    return found


def end_plan_run(proc: subprocess.Popen, ray_tmp: str) -> None:
    """Kill what is left of a `start_plan_run`: its process group, its Ray's processes, its
    RAY_TMPDIR."""
    import psutil

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for p in ray_processes(ray_tmp):
        try:
            p.kill()
        except psutil.Error:
            pass
    shutil.rmtree(ray_tmp, ignore_errors=True)


# The module-scoped fixtures of the tests that read that run; tests/conftest.py offers them to
# every tier.


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """The synthetic run folder, once per test module."""
    return synthetic_run(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def results(run_dir):
    """`load_run` of it."""
    from planner import load_run

    return load_run(run_dir)


HOSTILE_ARM = "</script><script>document.body.dataset.pwned='arm'</script>"
HOSTILE_PARAM = "<img src=x onerror=\"document.body.dataset.pwned='param'\">"
HOSTILE_METRIC = "<b>val</b>&acc'\""


def hostile_names_run(folder: Path, **options: Any) -> Path:
    """A synthetic two-arm run whose treatment arm, a tuned parameter and the tuning metric are
    named with HTML and script (HOSTILE_ARM, HOSTILE_PARAM, HOSTILE_METRIC): a report must show
    them as text. The arm has no configs/ file (a name with `/` is no file name)."""
    from bench.synthetic_run import make_run

    shape = {"arms": ("sgd", "lion"), "seeds": 4, "tune_trials": 12, "reports_per_trial": 8}
    run = make_run(Path(folder) / SYNTHETIC_RUN_ID, **{**shape, **options})
    swaps = {
        '"lion"': json.dumps(HOSTILE_ARM),
        '"model.dropout"': json.dumps(HOSTILE_PARAM),
        '"val_acc"': json.dumps(HOSTILE_METRIC),
    }
    for name in ("trials.jsonl", "decisions.json", "selection.json", "plan.json", "events.jsonl"):
        path = run / name
        text = path.read_text()
        for old, new in swaps.items():
            text = text.replace(old, new)
        path.write_text(text)
    contract = yaml.safe_load((run / "contract.yaml").read_text())
    contract["arms"][0]["name"] = HOSTILE_ARM
    space = contract["tuning"]["space"]
    space[HOSTILE_PARAM] = space.pop("model.dropout")
    contract["metric"]["name"] = HOSTILE_METRIC
    write_yaml(run / "contract.yaml", contract, sort_keys=False)
    (run / "configs" / "lion.yaml").unlink()
    return run
