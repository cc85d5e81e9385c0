"""The run folder is a boundary, tried on real runs: `plan run` in a subprocess (real Ray, real
Hydra).

A contract cannot hold a credential (P230): `plan run` of one planted in config values, a URL's
userinfo or an override is refused before anything starts, and prints none of it. Credentials reach
a trainable through the environment: there they are planted (and printed whole, in two pieces, a
character at a time, in an exception), for a function trainable and for a `command:` Hydra app;
then every file of the run folder, every report format, `plan status`, the exported CSV and
everything printed on the terminal are searched for them. Keys with credential words that are no
credential (`token_dropout`, tuned, and a tokenizer's `pad_token: <pad>`) are recorded exactly and
reach a resumed trial as they are. The planted links (lock, trials.jsonl, hard links) are tried
with `plan reeval` and `plan run --resume`. Cases and verdicts: docs/reliability.md, "Hostile and
careless run folders".
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests._plan_process import plan
from tests._runs import cut_short

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "hydra_app"
SECRETS = {
    "API_KEY": "sk-live-PLANTED1",
    "DB_PASSWORD": "hunter2-PLANTED2",
    "DATABASE_URL": "postgres://svc:PASSW0RD-PLANTED3@db.example/x",
    "HF_TOKEN": "hf_PLANTED4token",
    "WANDB_TOKEN": "wandb-PLANTED5",
}
MARK = "PLANTED"

FUNCTION_TRAINABLE = """
import os
import sys


def train(config, trial):
    dropout = config["model"]["token_dropout"]
    if not isinstance(dropout, float) or config["tokenizer"]["pad_token"] != "<pad>":
        raise TypeError(f"the trainable received token_dropout={dropout!r}, pad_token={config['tokenizer']['pad_token']!r}")
    key = os.environ["API_KEY"]
    print(key[:7], end="")
    sys.stdout.flush()
    print(key[7:])                                   # two pieces
    for ch in os.environ["DB_PASSWORD"]:             # a character at a time
        sys.stdout.write(ch)
        sys.stdout.flush()
    sys.stdout.write("\\n")
    print("env", os.environ.get("HF_TOKEN"), "db", os.environ["DATABASE_URL"], {"wandb_token": os.environ["WANDB_TOKEN"]})
    print("header", "Authorization: Bearer " + os.environ["API_KEY"], file=sys.stderr)
    if trial.phase == "confirm" and trial.seed == 1 and trial.arm == "wide":
        raise RuntimeError(f"cannot connect to {os.environ['DATABASE_URL']} as {os.environ['DB_PASSWORD']}")
    for step in range(1, trial.budget + 1):
        trial.report(step, loss=1.0 / (step + trial.seed + config["model"]["width"] / 64) + dropout / 100)
"""

APP_LINES = """
    import logging
    logging.getLogger(__name__).info("config: %s", dict(cfg))
    key = os.environ["API_KEY"]
    print("key", key[:5], end="", flush=True)
    print(key[5:], "token", os.environ["WANDB_TOKEN"], "pw", os.environ["DB_PASSWORD"], "env", os.environ.get("HF_TOKEN"))
    print("db", os.environ["DATABASE_URL"], file=sys.stderr)
    logging.getLogger(__name__).info("connecting to %s", os.environ["DATABASE_URL"])
    if seed == 1 and cfg.optimizer.momentum > 0:
        raise SystemExit(f"cannot connect to {os.environ['DATABASE_URL']}")
"""


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(SECRETS)
    return env


def leaks(folder: Path) -> list[str]:
    """Every file under `folder` that holds a planted secret (bytes, so binary files count too)."""
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and MARK.encode() in p.read_bytes()
    ]


def everything_printed(
    run_dir: Path, cwd: Path, env: dict[str, str], tmp_path: Path
) -> tuple[str, list[str]]:
    """The terminal output of status, every report format and an export; and the written files that
    leak."""
    printed = ""
    for args in (
        ["status", str(run_dir)],
        ["report", str(run_dir)],
        ["report", str(run_dir), "--format", "json"],
        ["report", str(run_dir), "--format", "html"],
    ):
        done = plan(*args, cwd=cwd, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        printed += done.stdout + done.stderr
    out = tmp_path / "export"
    done = plan(
        "export", str(run_dir), "--format", "csv", "-o", str(out), cwd=cwd, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return printed + done.stdout + done.stderr, leaks(out)


FUNCTION_CONTRACT = {
    "version": 1,
    "name": "leaky",
    "hypothesis": "wider is better",
    "trainable": "leaky:train",
    "config": {
        "values": {
            "model": {"width": 64, "token_dropout": 0.1, "pad_token_id": 0},
            "tokenizer": {"pad_token": "<pad>"},
        }
    },
    "factor": {"name": "width", "keys": ["model.width"]},
    "baseline": {"name": "narrow", "overrides": ["model.width=64"]},
    "arms": [{"name": "wide", "overrides": ["model.width=128"]}],
    "metric": {"name": "loss", "mode": "min"},
    "acceptance": {"min_effect": 0.01},
    "seeds": [0, 1, 2],
    "budget": {"exposure": 2},
    "tuning": {
        "trials_per_arm": 2,
        "seeds": [1000],
        "sampler": {"name": "random", "seed": 0},
        "space": {"model.token_dropout": {"uniform": [0.0, 0.5]}},
    },
}


@pytest.fixture(scope="module")
def function_run(tmp_path_factory):
    """A run of a function trainable whose environment and output carry planted secrets."""
    home = tmp_path_factory.mktemp("function")
    (home / "leaky.py").write_text(FUNCTION_TRAINABLE)
    (home / "contract.yaml").write_text(yaml.safe_dump(FUNCTION_CONTRACT, sort_keys=False))
    env = environment()
    done = plan("run", "contract.yaml", "--quiet", cwd=home, env=env)
    # a planted trial fails on purpose (its error carries a secret): its arm is incomplete, exit 4
    assert done.returncode in (0, 3, 4), done.stdout + done.stderr
    (run_dir,) = (home / "runs" / "leaky").glob("*/")
    return home, run_dir, env, done.stdout + done.stderr


@pytest.fixture(scope="module")
def command_run(tmp_path_factory):
    """A run of the example Hydra app (a `command:` trainable) with planted secrets in its config
    and output."""
    home = tmp_path_factory.mktemp("command") / "app"
    shutil.copytree(APP, home)
    config = yaml.safe_load((home / "conf" / "config.yaml").read_text())
    config.update(
        {"tokenizer": {"pad_token": "<pad>"}, "token_dropout": 0.1}
    )  # no credential: ordinary keys
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
    # a planted trial fails on purpose (its error carries a secret): its arm is incomplete, exit 4
    assert done.returncode in (0, 3, 4), done.stdout + done.stderr
    (run_dir,) = (home / "runs" / contract["name"]).glob("*/")
    return home, run_dir, env, done.stdout + done.stderr


def test_no_planted_secret_in_a_function_run(function_run, tmp_path):
    home, run_dir, env, terminal = function_run
    assert (run_dir / "trials.jsonl").is_file()
    logs = "".join(p.read_text() for p in run_dir.rglob("output.log"))
    assert logs.count("<redacted>") >= 4  # the output was kept, the secrets cut out of it
    assert "Authorization: <redacted>" in logs  # the scheme and the credential, not just the word
    printed, exported = everything_printed(run_dir, home, env, tmp_path)
    assert leaks(run_dir) == [] and exported == []
    assert MARK not in terminal + printed
    assert (
        "cannot connect to postgres://<redacted>@db.example/x" in printed
    )  # the failure is shown, scrubbed
    assert "<redacted>" not in "".join(p.read_text() for p in (run_dir / "configs").rglob("*.yaml"))


def test_no_planted_secret_in_a_command_run(command_run, tmp_path):
    home, run_dir, env, terminal = command_run
    hydra_files = [p for p in run_dir.rglob("*") if ".hydra" in p.parts and p.is_file()]
    assert hydra_files, "Hydra's own output files are kept, scrubbed"
    assert any(
        p.name == "stdout.log" and "<redacted>" in p.read_text()
        for p in run_dir.rglob("stdout.log")
    )
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
        assert done.returncode == 3 and "trials.jsonl is a symbolic link" in done.stderr, (
            done.stderr
        )
        assert victim.read_bytes() == b'{"a": 1}\nhalf a line'
        assert not (run_dir / "lock").exists()  # the refused resume released its lock
    finally:
        (run_dir / "trials.jsonl").unlink()
        (run_dir / "trials.jsonl").write_bytes(original)


def test_plan_run_refuses_a_credential_in_the_contract(tmp_path):
    """Credentials in config values, a URL's userinfo and an override were redacted in the run
    folder (and the trainable of a resumed run got `<redacted>`); now `plan run` refuses them and
    prints none of them."""
    contract = json.loads(json.dumps(FUNCTION_CONTRACT))
    contract["config"]["values"].update(
        {
            "api_key": "sk-live-PLANTED1",
            "password": "hunter2-PLANTED2",
            "db": {"url": "postgres://svc:PASSW0RD-PLANTED3@db.example/x"},
        }
    )
    contract["config"]["overrides"] = ["+extra_password=ovr-PLANTED6"]
    (tmp_path / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    (tmp_path / "leaky.py").write_text(FUNCTION_TRAINABLE)
    done = plan("run", "contract.yaml", "--quiet", cwd=tmp_path, env=environment(), timeout=300)
    assert done.returncode == 1 and "P230" in done.stdout + done.stderr, done.stdout + done.stderr
    assert MARK not in done.stdout + done.stderr
    assert not (tmp_path / "runs" / "leaky").exists() or not any(
        (tmp_path / "runs" / "leaky").glob("*/")
    )


def _copy_run(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / "leaky" / run_dir.name
    shutil.copytree(run_dir, copy)
    return copy


def test_tuned_values_are_recorded_exactly_and_a_resume_gets_them(function_run, tmp_path):
    """`model.token_dropout` was logged as <redacted> (configs, selection.json, the frozen
    contract's uniform); after a resume every confirmation trial got the string '<redacted>' for
    it."""
    home, run_dir, env, _ = function_run
    frozen = yaml.safe_load((run_dir / "contract.yaml").read_text())
    assert frozen["tuning"]["space"]["model.token_dropout"]["uniform"] == [0.0, 0.5]
    assert (
        yaml.safe_load((run_dir / "configs" / "wide.yaml").read_text())["model"]["token_dropout"]
        == 0.1
    )
    chosen = json.loads((run_dir / "selection.json").read_text())["arms"]["wide"]["params"]
    assert isinstance(chosen["model.token_dropout"], float)
    run = _copy_run(run_dir, tmp_path)
    lines = (run / "trials.jsonl").read_text().splitlines()
    dropped = [
        json.loads(line)["trial_id"]
        for line in lines
        if json.loads(line)["trial_id"].startswith("confirm-wide")
    ]
    assert dropped
    cut_short(run, dropped)
    done = plan("run", "contract.yaml", "--resume", str(run), "--quiet", cwd=home, env=env)
    assert done.returncode in (0, 3, 4), done.stdout + done.stderr
    records = {
        json.loads(line)["trial_id"]: json.loads(line)
        for line in (run / "trials.jsonl").read_text().splitlines()
    }
    rerun = records["confirm-wide-s0"]
    assert rerun["status"] == "completed", rerun.get("errors")
    assert rerun["config"]["model"]["token_dropout"] == chosen["model.token_dropout"]
    assert rerun["config"]["tokenizer"]["pad_token"] == "<pad>"


def test_resume_refuses_hardlinked_files_and_keeps_their_other_names(function_run, tmp_path):
    """`cp -al` / `rsync --link-dest` snapshots: --resume appended records to a hard link's other
    name, cut its last line, and wrote the lock's JSON into the file a planted lock was linked
    to."""
    home, run_dir, env, _ = function_run
    run = _copy_run(run_dir, tmp_path)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for name in ("trials.jsonl", "events.jsonl"):
        shutil.copy(run / name, snapshot / name)
        (run / name).unlink()
        os.link(snapshot / name, run / name)
    (snapshot / "lock").write_text(
        json.dumps({"pid": 2**30, "host": os.uname().nodename, "started": "x"})
    )
    os.link(snapshot / "lock", run / "lock")
    before = {p.name: p.read_bytes() for p in snapshot.iterdir()}
    done = plan(
        "run", "contract.yaml", "--resume", str(run), "--quiet", cwd=home, env=env, timeout=300
    )
    assert done.returncode == 3 and "lock is a file with 2 hard links" in done.stderr, done.stderr
    (run / "lock").unlink()
    done = plan(
        "run", "contract.yaml", "--resume", str(run), "--quiet", cwd=home, env=env, timeout=300
    )
    assert (
        done.returncode == 3 and "hard links" in done.stderr and "Traceback" not in done.stderr
    ), done.stderr
    assert {p.name: p.read_bytes() for p in snapshot.iterdir()} == before
    assert not (run / "lock").exists()  # the refused resume released its lock
