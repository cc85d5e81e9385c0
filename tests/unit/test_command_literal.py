"""`args: literal`: a trial's config as `--key=value` flags whose values a script reads back with
`ast.literal_eval` (nanoGPT's configurator), or takes as text where it reads none."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner._contract.command_help import literal_text
from planner._trial.command_args import literal_flags

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.sampled_from(["3", "True", "None", " 4", "'a'", "[1]", "1e3", "-2", "", "out-dir"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


def read_literal(text: str):
    """What a configurator (nanoGPT's) makes of a flag's value: `ast.literal_eval`, or the text
    when it is none."""
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


def same(a, b) -> bool:
    """Equal, and of the same types all the way down (True is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@given(VALUES)
def test_what_is_written_reads_back_as_the_value(value):
    assert same(read_literal(literal_text(value)), value)


@pytest.mark.parametrize(
    "value, text",
    [
        (True, "True"),
        (False, "False"),
        (None, "None"),
        (0.1, "0.1"),
        (3, "3"),
        (float("inf"), "1e999"),
        ("adamw", "adamw"),
        ("out-shakespeare", "out-shakespeare"),
        ("3", "'3'"),
        ("True", "'True'"),
        ([64, "a"], "[64, 'a']"),
    ],
)
def test_each_kind_of_value_is_written_as_a_configurator_reads_it(value, text):
    assert literal_text(value) == text


def test_nan_has_no_literal_and_is_refused():
    with pytest.raises(ValueError, match="NaN"):
        literal_text(float("nan"))


def test_every_leaf_is_one_flag_in_the_configs_order(tmp_path: Path):
    config = {
        "compile": False,
        "dropout": 0.1,
        "init_from": "scratch",
        "optim": {"lr": 1e-3},
        "wandb_run_name": None,
        "out_dir": "${hydra:runtime.output_dir}",
    }
    assert literal_flags(config, tmp_path) == [
        "--compile=False",
        "--dropout=0.1",
        "--init_from=scratch",
        "--optim.lr=0.001",
        "--wandb_run_name=None",
        f"--out_dir={tmp_path}",
    ]


CONFIGURATOR = """
import sys
from ast import literal_eval
lr = 0.0005
seed = 0
max_iters = 10
width = 1
act = "relu"
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    globals()[key] = literal_eval(val)
print("step 1: val loss 2.5")
"""


def literal_contract(tmp_path: Path, command: dict, config: dict, space: dict) -> Path:
    """A two-arm `args: literal` contract of CONFIGURATOR (written beside it) that tunes `space`,
    its `command` entries and config `values` as given."""
    import yaml

    (tmp_path / "train.py").write_text(CONFIGURATOR)
    pattern = r"step (?P<step>\d+): val loss (?P<v>\S+)"
    contract = {
        "version": 1,
        "name": "literal-tuned",
        "hypothesis": "A wider model is better.",
        "command": {
            "run": "python train.py",
            "args": "literal",
            "metrics": {"format": "stdout", "pattern": pattern},
            **command,
        },
        "config": {"values": config},
        "factor": {"name": "width", "keys": ["width"]},
        "baseline": {"name": "one", "overrides": ["width=1"]},
        "arms": [{"name": "two", "overrides": ["width=2"]}],
        "metric": {"name": "v", "mode": "min"},
        "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1],
        "budget": {"exposure": 10},
        "tuning": {
            "trials_per_arm": 2,
            "seeds": [100],
            "sampler": {"name": "random"},
            "space": space,
        },
    }
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract).replace("- nan", "- .nan"))  # YAML's NaN
    return path


def test_validate_shows_the_first_trials_flags_with_a_tuned_key_inside_its_space(tmp_path: Path):
    """The first trial's command line `plan validate` prints never shows a tuned key at its base
    value, which may lie outside the space the trials draw from (0.0005 for [0.001, 0.01])."""
    import planner

    path = literal_contract(
        tmp_path,
        {"seed_key": "seed", "budget_key": "max_iters"},
        {"lr": 0.0005, "width": 1, "act": "relu", "seed": 0, "max_iters": 1},
        {"lr": {"log_uniform": [0.001, 0.01]}, "act": {"choice": ["gelu", "relu"]}},
    )

    result = planner.validate(path)

    assert result.valid, result.diagnostics
    said, line = result.summary["command"]["flags"].split("\n")
    assert "a tuned key at the low end of its space" in said
    assert line.split()[1:] == [
        "train.py",
        "--act=gelu",  # the config's order (safe_dump sorted its keys)
        "--lr=0.001",
        "--max_iters=10",
        "--seed=100",
        "--width=1",
    ]


def test_a_tuned_option_without_a_literal_is_refused_like_a_config_value(tmp_path: Path):
    """Any option of a choice may be drawn and written as a flag: NaN there gets P531, not a
    crash of the first trial's command line."""
    import planner

    path = literal_contract(
        tmp_path,
        {},
        {"lr": 0.0005, "width": 1, "act": "relu"},
        {"act": {"choice": ["relu", "nan"]}},
    )
    result = planner.validate(path)
    (error,) = [d for d in result.diagnostics if d.code == "P531"]
    assert "tuning key 'act'" in error.message and "NaN" in error.message
