"""P945: a script whose output folder defaults to a relative path the contract does not set, so
every trial would share one folder: nanoGPT's `out_dir = 'out'`, a Hugging Face example's
`--output_dir`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner._contract.validate import validate

LITERAL = "out_dir = 'out'\nlr = 0.1\nexec(open('configurator.py').read())\n"
ARGPARSE = (
    "import argparse\np = argparse.ArgumentParser()\n"
    "p.add_argument('--output_dir', default='runs/out')\np.add_argument('--lr', type=float)\n"
    "p.parse_args()\n"
)


def contract(tmp_path: Path, args: str, script: str, values: dict) -> Path:
    (tmp_path / "train.py").write_text(script)
    data = {
        "version": 1,
        "name": "outputs",
        "hypothesis": "h",
        "command": {
            "run": "python train.py",
            "args": args,
            "metrics": {"format": "stdout", "pattern": r"(?P<step>\d+) (?P<acc>\S+)"},
        },
        "config": {"values": values},
        "factor": {"name": "lr", "keys": ["lr"]},
        "baseline": {"name": "a", "overrides": ["lr=0.1"]},
        "arms": [{"name": "b", "overrides": ["lr=0.2"]}],
        "metric": {"name": "acc", "mode": "max"},
        "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1, 2, 3, 4],
        "budget": {"unit": "step", "exposure": 2},
    }
    (tmp_path / "contract.yaml").write_text(yaml.safe_dump(data))
    return tmp_path / "contract.yaml"


@pytest.mark.parametrize(
    "args, script, key, default",
    [("literal", LITERAL, "out_dir", "out"), ("argparse", ARGPARSE, "output_dir", "runs/out")],
)
def test_a_relative_output_folder_the_contract_leaves_alone_is_named(
    tmp_path, args, script, key, default
):
    found = [
        d
        for d in validate(contract(tmp_path, args, script, {"lr": 0.1})).diagnostics
        if d.code == "P945"
    ]
    assert len(found) == 1
    assert f"{key} = {default!r}" in found[0].message
    assert f"`{key}: ${{hydra:runtime.output_dir}}`" in found[0].hint


def test_an_output_folder_the_contract_sets_is_not_named(tmp_path):
    values = {"lr": 0.1, "out_dir": "${hydra:runtime.output_dir}"}
    codes = [d.code for d in validate(contract(tmp_path, "literal", LITERAL, values)).diagnostics]
    assert "P945" not in codes


CONFIGURATOR = (
    "import sys\nfor arg in sys.argv[1:]:\n    key, val = arg[2:].split('=')\n"
    "    if key not in globals():\n        raise ValueError(f'Unknown config key: {key}')\n"
    "    globals()[key] = val\n"
)


def test_a_key_the_configurator_refuses_is_named_and_the_seed_gets_the_two_ways_out(tmp_path):
    (tmp_path / "configurator.py").write_text(CONFIGURATOR)
    path = contract(tmp_path, "literal", LITERAL, {"lr": 0.1, "out_dir": "o", "seed": 0, "l_r": 1})
    data = yaml.safe_load(path.read_text())
    data["command"]["seed_key"] = "seed"
    path.write_text(yaml.safe_dump(data))
    found = {d.message: d for d in validate(path).diagnostics if d.code == "P536"}
    seed = next(d for m, d in found.items() if "'seed'" in m)
    assert "configurator.py refuses: the script has no setting 'seed'" in seed.message
    assert "PLANNER_SEED" in seed.hint and "Give the script a 'seed' setting" in seed.hint
    assert any("'l_r'" in m and "did you mean 'lr'?" in m for m in found)
    assert not any("'lr'" in m.split(";")[0] for m in found)
