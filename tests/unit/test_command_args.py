"""A config as argparse flags: what argparse and HfArgumentParser parse from the flags
planner writes is the config, read from the script's own `--help`; the names are checked by `plan
validate`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from planner._contract.command_help import OPTIONAL, SWITCH, VALUE, parse_help
from planner._contract.paths import flatten
from planner._core.errors import CommandFailedError
from planner._trial.command_args import argparse_flags

OUT = Path("/runs/x/trials/t/attempt-1/hydra")
CONFIG = {
    "seed": 3,
    "epochs": 2,
    "optimizer": {"lr": 0.0123, "name": "-adam"},
    "layers": [64, 32],
    "standardize": False,
    "amp": True,
    "verbose": True,
    "quiet": False,
    "note": None,
    "extra": {},
    "output_dir": "${hydra:runtime.output_dir}/run",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train.py")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--optimizer.lr", type=float)
    parser.add_argument("--optimizer.name")
    parser.add_argument("--layers", type=int, nargs="+")
    parser.add_argument("--standardize", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--note", default="kept")
    parser.add_argument("--output_dir")
    return parser


def test_argparse_parses_back_the_config_from_the_flags_written_from_its_help():
    parser = _parser()
    script = parse_help(parser.format_help())
    assert (
        script.kind("optimizer.lr") == VALUE
        and script.kind("amp") == SWITCH
        and script.negation("amp")
    )
    flags = argparse_flags(CONFIG, script, OUT)
    assert (
        "--no-standardize" in flags and "--quiet" not in flags and "--optimizer.name=-adam" in flags
    )
    parsed = vars(parser.parse_args(flags))
    expected = {k: v for k, v in flatten(CONFIG).items() if v is not None and v != {}}
    expected["output_dir"] = f"{OUT}/run"
    assert {k: parsed[k] for k in expected} == expected
    assert parsed["note"] == "kept"  # a null is left out: the script's default applies


@dataclass
class _HfArgs:
    learning_rate: float = 5e-5
    do_eval: bool = False
    remove_unused_columns: bool = True
    seed: int = 42
    layers: list[int] = field(default_factory=lambda: [8])


def test_hf_argument_parser_reads_the_same_flags_its_booleans_as_true_and_false():
    transformers = pytest.importorskip("transformers")
    parser = transformers.HfArgumentParser((_HfArgs,))
    script = parse_help(parser.format_help())
    assert script.kind("do_eval") == OPTIONAL and script.negation("remove_unused_columns")
    config = {
        "learning_rate": 0.001,
        "do_eval": True,
        "remove_unused_columns": False,
        "seed": 7,
        "layers": [4, 2],
    }
    (parsed,) = parser.parse_args_into_dataclasses(args=argparse_flags(config, script, OUT))
    assert vars(parsed) == config


def test_without_a_readable_help_booleans_are_written_as_values():
    assert argparse_flags({"a": True, "b": False}, None, OUT) == ["--a=true", "--b=false"]
    with pytest.raises(CommandFailedError, match="only \\$\\{hydra:runtime.output_dir\\}"):
        argparse_flags({"name": "${hydra:job.name}"}, None, OUT)
    with pytest.raises(CommandFailedError, match="mappings"):
        argparse_flags({"stages": [{"lr": 1}]}, None, OUT)


def test_the_default_args_is_left_out_of_the_frozen_contract_so_hashes_stay():
    from planner._contract.model import CommandSpec

    assert "args" not in CommandSpec(run="python train.py").model_dump(mode="json")
    assert (
        CommandSpec(run="python train.py", args="argparse").model_dump(mode="json")["args"]
        == "argparse"
    )
