"""Bounds before memory: every count of a contract has an upper bound (P430) that `plan validate`
checks and `plan run` refuses before it builds a plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import ContractError
from planner._cli.main import main
from planner._contract.validate import validate
from tests._contract_helpers import write_contract

BASE = """\
version: 1
name: inline
hypothesis: A wider model reaches a lower loss.
trainable: fixture_trainable:train
config:
  values:
    model: {width: 64, depth: 2}
    optimizer: {name: sgd, lr: 0.1}
    data: {batch_size: 32}
factor: {name: width, keys: [model.width]}
baseline: {name: narrow, overrides: [model.width=64]}
arms: @ARMS@
metric: {name: loss, mode: min}
acceptance: {min_effect: 0.01}
seeds: @SEEDS@
budget: {exposure: @EXPOSURE@}
tuning:
  trials_per_arm: @TRIALS@
  seeds: @TSEEDS@
  sampler: {name: @SAMPLER@}
  space: @SPACE@
"""
ONE_ARM = "[{name: wide, overrides: [model.width=128]}]"
LR = "{optimizer.lr: {choice: [0.1, 0.01]}}"


def contract(tmp_path: Path, **given: str) -> Path:
    values = {
        "ARMS": ONE_ARM,
        "SEEDS": "[0, 1, 2, 3, 4]",
        "EXPOSURE": "5",
        "TRIALS": "20",
        "TSEEDS": "[1000]",
        "SAMPLER": "random",
        "SPACE": LR,
    }
    values.update(given)
    text = BASE
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return write_contract(tmp_path, text)


def seeds(n: int, start: int = 0) -> str:
    return json.dumps(list(range(start, start + n)))


def codes(path: Path) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in validate(str(path)).diagnostics if d.severity == "error"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"TRIALS": "1000000000"}, "tuning.trials_per_arm is 1,000,000,000"),
        ({"TRIALS": "100001"}, "tuning.trials_per_arm is 100,001"),
        ({"SEEDS": seeds(1_001, 5000)}, "confirmation seeds is 1,001"),
        ({"TSEEDS": seeds(101, 100_000)}, "tuning seeds is 101"),
        (
            {
                "ARMS": json.dumps(
                    [{"name": f"a{i}", "overrides": [f"model.width={65 + i}"]} for i in range(200)]
                )
            },
            "arms (the baseline counted) is 201",
        ),
        ({"EXPOSURE": str(2**53 + 1)}, "budget.exposure is 9,007,199,254,740,993"),
        (
            {
                "SAMPLER": "grid",
                "TRIALS": "1",
                "SPACE": "{optimizer.lr: {choice: RANGE}, model.depth: {choice: RANGE}}".replace(
                    "RANGE", seeds(400, 1)
                ),
            },
            "grid points of arm 'narrow' is 160,000",
        ),
        (
            {"TRIALS": "100000", "TSEEDS": seeds(10, 1000)},
            "the contract plans 2,000,010 trials",
        ),
    ],
)
def test_a_count_past_its_bound_is_refused(tmp_path, given, says):
    found = codes(contract(tmp_path, **given))
    assert [code for code, _ in found] == ["P430"] * len(found) and found, found
    assert says in found[0][1], found


def test_counts_at_their_bounds_are_valid(tmp_path):
    path = contract(tmp_path, TRIALS="100000", SEEDS=seeds(5))
    assert codes(path) == []


def test_plan_run_refuses_a_typo_before_it_builds_anything(tmp_path, capsys):
    path = contract(tmp_path, TRIALS="1000000000")
    code = main(["run", str(path), "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 1 and "P430" in err and "trials_per_arm is 1,000,000,000" in err, err
    assert not (tmp_path / "runs").exists()


def test_a_plan_is_never_built_past_the_bound_without_validation(tmp_path):
    import yaml

    from planner._contract.model import Contract
    from planner._plan.trials import make_plan

    raw = yaml.safe_load(contract(tmp_path, TRIALS="1000000000").read_text())
    with pytest.raises(ContractError, match="P430"):
        make_plan(Contract.model_validate(raw))
