"""A configurator-style script (nanoGPT's) run by CommandTrainable with `args: literal`: the flags
it parses are the config's values, and a script without a seed setting gets the two ways out."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from planner import CommandTrainable
from planner._core.errors import CommandArgumentsError
from tests.trial_double import TrialDouble

SCRIPT = """
import json, sys
from ast import literal_eval
compile = True
dropout = 0.0
device = "cuda"
wandb_run_name = None
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    if key not in globals():
        raise ValueError(f"Unknown config key: {key}")
    try:
        attempt = literal_eval(val)
    except (SyntaxError, ValueError):
        attempt = val
    assert type(attempt) == type(globals()[key]) or globals()[key] is None
    globals()[key] = attempt
print(json.dumps({"compile": compile, "dropout": dropout, "device": device}))
print("step 1: val loss 2.5")
"""


def trainable(tmp_path: Path, seed_key: str | None = None) -> CommandTrainable:
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    return CommandTrainable(
        command=f"{sys.executable} train.py",
        cwd=str(tmp_path),
        arm_overrides={"baseline": ()},
        args="literal",
        seed_key=seed_key,
        metrics={
            "file": None,
            "format": "stdout",
            "step": "step",
            "names": {"val_loss": "val_loss"},
            "require": "val_loss",
            "step_base": 1,
            "pattern": r"^step (?P<step>\d+): val loss (?P<val_loss>\S+)",
        },
    )


def test_the_script_parses_each_value_as_the_config_holds_it(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "t"), budget=1)
    config = {"compile": False, "dropout": 0.1, "device": "cpu", "wandb_run_name": None}
    trainable(tmp_path)(config, trial)
    assert trial.reports == [(1, {"val_loss": 2.5})]
    (attempt,) = Path(trial.dir).glob("attempt-*")
    parsed = (attempt / "stdout.log").read_text().splitlines()[0]
    assert parsed == '{"compile": false, "dropout": 0.1, "device": "cpu"}'
    assert trial.inputs["argv"] == [
        "--compile=False",
        "--dropout=0.1",
        "--device=cpu",
        "--wandb_run_name=None",
    ]


def test_a_script_without_a_seed_setting_gets_the_two_ways_out(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "t"), budget=1, seed=3)
    with pytest.raises(CommandArgumentsError) as error:
        trainable(tmp_path, seed_key="seed")({"dropout": 0.1, "seed": 0}, trial)
    message = str(error.value)
    assert message.startswith("the script refused the seed it was given as seed=3")
    assert "Unknown config key: seed" in message
    assert "give the script a 'seed' setting" in message and "PLANNER_SEED" in message


RESUMING = """
import json, os, sys
from ast import literal_eval
out_dir = "out"
init_from = "scratch"
max_iters = 4
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    try:
        globals()[key] = literal_eval(val)
    except (SyntaxError, ValueError):
        globals()[key] = val
step = 0
if init_from == "resume":
    step = json.load(open(os.path.join(out_dir, "ckpt.json")))["step"]
    print(f"resuming at {step} from {out_dir}")
os.makedirs(out_dir, exist_ok=True)
while step < max_iters:
    step += 1
    print(f"step {step}: val loss {1 / step}", flush=True)
    json.dump({"step": step}, open(os.path.join(out_dir, "ckpt.json"), "w"))
    if step == 2 and init_from == "scratch":
        os._exit(1)  # a lost node
"""


def test_a_cut_short_trial_continues_by_its_folder_and_resume_flags(tmp_path):
    from planner._trial.protocol import run_trial
    from planner._trial.spec import TrialSpec

    (tmp_path / "train.py").write_text(textwrap.dedent(RESUMING))
    command = CommandTrainable(
        command=f"{sys.executable} train.py",
        cwd=str(tmp_path),
        arm_overrides={"base": ()},
        args="literal",
        budget_key="max_iters",
        metrics={
            "file": None,
            "format": "stdout",
            "step": "step",
            "names": {"val_loss": "val_loss"},
            "require": "val_loss",
            "step_base": 1,
            "pattern": r"^step (?P<step>\d+): val loss (?P<val_loss>\S+)",
        },
        checkpoint={
            "file": "ckpt.json",
            "keep": "all",
            "folder_key": "out_dir",
            "resume_flags": {"init_from": "resume"},
        },
    )
    spec = TrialSpec(
        trial_id="confirm-base-s0",
        phase="confirm",
        arm="base",
        seed=0,
        index=0,
        params={},
        config={"max_iters": 4, "out_dir": "${hydra:runtime.output_dir}"},
        budget=4,
        dir=str(tmp_path / "run" / "trials" / "confirm-base-s0"),
        trainable="",
        metric="val_loss",
        retries=1,
        extra={"command": command.to_dict(), "session": ""},
    )
    record = run_trial(spec)
    assert record["status"] == "completed", record["errors"]
    assert record["attempts"] == 2 and record["resumed"] is True
    assert [r["step"] for r in record["reports"]] == [3, 4]  # continued, not started over
    assert [r["step"] for r in record["resumed_from"]["reports"]] == [1, 2]
    first = Path(spec.dir) / "attempt-1" / "hydra"
    assert record["inputs"]["argv"][-2:] == [f"--out_dir={first}", "--init_from=resume"]
    assert (
        f"resuming at 2 from {first}" in (Path(spec.dir) / "attempt-2" / "stdout.log").read_text()
    )
