"""The run folder is a boundary, tried on real runs: `plan run` in a subprocess (real Ray, real Hydra).

Secrets are planted in config values, a URL's userinfo, an override, an environment variable and the
output of the trainable (printed whole, in two pieces, a character at a time, in an exception), for a
function trainable and for a `command:` Hydra app. Then every file of the run folder, every report
format, `plan status`, the exported CSV and everything printed on the terminal are searched for them.
The planted links (lock, trials.jsonl) are tried with `plan reeval` and `plan run --resume`.
Cases and verdicts: docs/reliability.md, "Hostile and careless run folders".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "hydra_app"
SECRETS = {"api_key": "sk-live-PLANTED1", "password": "hunter2-PLANTED2", "db_pass": "PASSW0RD-PLANTED3",
           "env": "hf_PLANTED4token", "wandb_token": "wandb-PLANTED5", "override": "ovr-PLANTED6"}
MARK = "PLANTED"

FUNCTION_TRAINABLE = '''
import os
import sys


def train(config, trial):
    key = config["api_key"]
    print(key[:7], end="")
    sys.stdout.flush()
    print(key[7:])                                   # two pieces
    for ch in config["password"]:                    # a character at a time
        sys.stdout.write(ch)
        sys.stdout.flush()
    sys.stdout.write("\\n")
    print("env", os.environ.get("HF_TOKEN"), "db", config["db"]["url"], {"wandb_token": config["wandb_token"]})
    print("override", config["extra_password"], file=sys.stderr)
    if trial.phase == "confirm" and trial.seed == 1 and trial.arm == "wide":
        raise RuntimeError(f"cannot connect to {config['db']['url']} as {config['password']}")
    for step in range(1, trial.budget + 1):
        trial.report(step, loss=1.0 / (step + trial.seed + config["model"]["width"] / 64))
'''

APP_LINES = '''
    import logging
    logging.getLogger(__name__).info("config: %s", dict(cfg))
    print("key", cfg.api_key[:5], end="", flush=True)
    print(cfg.api_key[5:], "token", cfg.wandb_token, "pw", cfg.password, "env", os.environ.get("HF_TOKEN"))
    print("db", cfg.db.url, file=sys.stderr)
    if seed == 1 and cfg.optimizer.momentum > 0:
        raise SystemExit(f"cannot connect to {cfg.db.url}")
'''


def plan(*args: str, cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = str(ROOT)
    env["HF_TOKEN"] = SECRETS["env"]
    return env


def leaks(folder: Path) -> list[str]:
    """Every file under `folder` that holds a planted secret (bytes, so binary files count too)."""
    return [str(p.relative_to(folder)) for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and MARK.encode() in p.read_bytes()]


def everything_printed(run_dir: Path, cwd: Path, env: dict[str, str], tmp_path: Path) -> tuple[str, list[str]]:
    """The terminal output of status, every report format and an export; and the written files that leak."""
    printed = ""
    for args in (["status", str(run_dir)], ["report", str(run_dir)], ["report", str(run_dir), "--format", "json"],
                 ["report", str(run_dir), "--format", "html"]):
        done = plan(*args, cwd=cwd, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        printed += done.stdout + done.stderr
    out = tmp_path / "export"
    done = plan("export", str(run_dir), "--format", "csv", "-o", str(out), cwd=cwd, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return printed + done.stdout + done.stderr, leaks(out)


@pytest.fixture(scope="module")
def function_run(tmp_path_factory):
    """A run of a function trainable whose config, environment and output carry planted secrets."""
    home = tmp_path_factory.mktemp("function")
    (home / "leaky.py").write_text(FUNCTION_TRAINABLE)
    contract = {
        "version": 1, "name": "leaky", "hypothesis": "wider is better", "trainable": "leaky:train",
        "config": {"values": {"model": {"width": 64}, "api_key": SECRETS["api_key"], "password": SECRETS["password"],
                              "wandb_token": SECRETS["wandb_token"],
                              "db": {"url": f"postgres://svc:{SECRETS['db_pass']}@db.example/x"}},
                   "overrides": [f"+extra_password={SECRETS['override']}"]},
        "factor": {"name": "width", "keys": ["model.width"]},
        "baseline": {"name": "narrow", "overrides": ["model.width=64"]},
        "arms": [{"name": "wide", "overrides": ["model.width=128"]}],
        "metric": {"name": "loss", "mode": "min"}, "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1, 2], "budget": {"exposure": 2},
    }
    (home / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    env = environment()
    done = plan("run", "contract.yaml", "--quiet", cwd=home, env=env)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    (run_dir,) = (home / "runs" / "leaky").iterdir()
    return home, run_dir, env, done.stdout + done.stderr


@pytest.fixture(scope="module")
def command_run(tmp_path_factory):
    """A run of the example Hydra app (a `command:` trainable) with planted secrets in its config and output."""
    home = tmp_path_factory.mktemp("command") / "app"
    shutil.copytree(APP, home)
    config = yaml.safe_load((home / "conf" / "config.yaml").read_text())
    config.update({"api_key": SECRETS["api_key"], "wandb_token": SECRETS["wandb_token"],
                   "password": SECRETS["password"], "db": {"url": f"postgres://svc:{SECRETS['db_pass']}@db/x"}})
    (home / "conf" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    source = (home / "train.py").read_text().replace("import os\n", "import os\nimport sys\n", 1)
    anchor = "    x_train, y_train, x_val, y_val = make_data(cfg)\n"
    assert anchor in source
    (home / "train.py").write_text(source.replace(anchor, APP_LINES + anchor))
    contract = yaml.safe_load((home / "contract.yaml").read_text())
    contract["seeds"] = [0, 1]
    contract["budget"]["exposure"] = 2
    contract.pop("tuning")
    (home / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    env = environment()
    done = plan("run", "contract.yaml", "--quiet", cwd=home, env=env)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    (run_dir,) = (home / "runs" / contract["name"]).iterdir()
    return home, run_dir, env, done.stdout + done.stderr


def test_no_planted_secret_in_a_function_run(function_run, tmp_path):
    home, run_dir, env, terminal = function_run
    assert (run_dir / "trials.jsonl").is_file()
    logs = "".join(p.read_text() for p in run_dir.rglob("output.log"))
    assert logs.count("<redacted>") >= 4  # the output was kept, the secrets cut out of it
    printed, exported = everything_printed(run_dir, home, env, tmp_path)
    assert leaks(run_dir) == [] and exported == []
    assert MARK not in terminal + printed
    assert "cannot connect to postgres://<redacted>@db.example/x" in printed  # the failure is shown, scrubbed


def test_no_planted_secret_in_a_command_run(command_run, tmp_path):
    home, run_dir, env, terminal = command_run
    hydra_files = [p for p in run_dir.rglob("*") if ".hydra" in p.parts and p.is_file()]
    assert hydra_files, "Hydra's own output files are kept, scrubbed"
    assert any(p.name == "stdout.log" and "<redacted>" in p.read_text() for p in run_dir.rglob("stdout.log"))
    printed, exported = everything_printed(run_dir, home, env, tmp_path)
    assert leaks(run_dir) == [] and exported == []
    assert MARK not in terminal + printed


def test_reeval_refuses_a_symlinked_lock_and_keeps_its_target(function_run, tmp_path):
    home, run_dir, env, _ = function_run
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (run_dir / "lock").symlink_to(victim)
    try:
        done = plan("reeval", str(run_dir), "--arm", "wide", cwd=home, env=env)
        assert done.returncode == 3 and "lock is a symbolic link" in done.stderr, done.stderr
        assert victim.read_text() == "keep me\n" and (run_dir / "lock").is_symlink()
    finally:
        (run_dir / "lock").unlink()


def test_resume_refuses_a_symlinked_trials_jsonl_and_keeps_its_target(function_run, tmp_path):
    home, run_dir, env, _ = function_run
    victim = tmp_path / "victim.jsonl"
    original = (run_dir / "trials.jsonl").read_bytes()
    victim.write_bytes(b'{"a": 1}\nhalf a line')
    (run_dir / "trials.jsonl").rename(tmp_path / "kept.jsonl")
    (run_dir / "trials.jsonl").symlink_to(victim)
    try:
        done = plan("run", "contract.yaml", "--resume", str(run_dir), "--quiet", cwd=home, env=env)
        assert done.returncode == 3 and "trials.jsonl is a symbolic link" in done.stderr, done.stderr
        assert victim.read_bytes() == b'{"a": 1}\nhalf a line'
        assert not (run_dir / "lock").exists()  # the refused resume released its lock
    finally:
        (run_dir / "trials.jsonl").unlink()
        (run_dir / "trials.jsonl").write_bytes(original)
