"""An argparse script's options read from its source when its `--help` cannot be read in time
(P941's fallback): only literal `add_argument` calls on the one parser the file builds, every other
use refused."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from planner._contract import command_source
from planner._contract.command_help import OPTIONAL, SWITCH, VALUE
from planner._contract.command_source import options_in_source, script_file, script_options

LIGHTNING_STYLE = """
import argparse

import lightning.pytorch as pl  # seconds to import, before the arguments are parsed
import torch


def add_model_args(parser):
    group = parser.add_argument_group("model")
    group.add_argument("--model.hidden", type=int, default=64)
    group.add_argument("--compile", action=argparse.BooleanOptionalAction)


def build():
    parser = argparse.ArgumentParser(description="train")
    parser.add_argument("--lr", "--learning_rate", type=float)
    parser.add_argument("--fast_dev_run", action="store_true")
    parser.add_argument("--devices", nargs="?")
    parser.add_argument("--layers", nargs="+", type=int)
    parser.add_argument("data_dir")  # positional: no flag
    add_model_args(parser)
    return parser


if __name__ == "__main__":
    args = build().parse_args()
"""


def _read(tmp_path: Path, source: str):
    (tmp_path / "train.py").write_text(textwrap.dedent(source))
    return options_in_source(tmp_path / "train.py", "train.py")


def test_the_options_of_literal_add_argument_calls_are_read_with_their_kinds(tmp_path):
    found, why = _read(tmp_path, LIGHTNING_STYLE)
    assert why == "" and found.read_from == "the add_argument calls in train.py"
    assert found.options == {
        "-h": SWITCH,
        "--help": SWITCH,
        "--lr": VALUE,
        "--learning_rate": VALUE,
        "--fast_dev_run": SWITCH,
        "--devices": OPTIONAL,
        "--layers": VALUE,
        "--model.hidden": VALUE,
        "--compile": SWITCH,
        "--no-compile": SWITCH,
    }
    assert (
        found.negation("compile") == "--no-compile"
        and found.near("model.hiden") == "--model.hidden"
    )


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            "from transformers import HfArgumentParser\nparser = HfArgumentParser((Args,))\n",
            "its parser is a HfArgumentParser, not argparse's own (line 2)",
        ),
        (
            "import argparse\nfrom lightning import Trainer\np = argparse.ArgumentParser()\np = "
            "Trainer.add_argparse_args(p)\n",
            "its parser is handed to Trainer.add_argparse_args(), which could add options unseen "
            "(line 4)",
        ),
        (
            "import argparse\ndef build():\n    p = argparse.ArgumentParser()\n    return "
            "p\nparser = build()\nlib.more(parser)\n",
            "its parser is handed to lib.more(), which could add options unseen (line 6)",
        ),
        (
            "import argparse\np = argparse.ArgumentParser()\nfor n in 'ab':\n    "
            "p.add_argument(f'--{n}')\n",
            "an add_argument call names an option that is not a literal string (line 4)",
        ),
        (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument(*FLAGS)\n",
            "an add_argument call takes *args or **kwargs (line 3)",
        ),
        (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--x', "
            "action=Custom)\n",
            "an add_argument call has an action of its own (line 3)",
        ),
        (
            "import argparse\np = argparse.ArgumentParser()\ns = p.add_subparsers()\n",
            "its parser's .add_subparsers could add options unseen (line 3)",
        ),
        (
            "import argparse\np = argparse.ArgumentParser(parents=[base])\n",
            "its ArgumentParser(...) takes options from elsewhere (line 2)",
        ),
        (
            "import argparse\na = argparse.ArgumentParser()\nb = argparse.ArgumentParser()\n",
            "it builds 2 argument parsers",
        ),
        (
            "import argparse\nself.p = argparse.ArgumentParser()\n",
            "its ArgumentParser(...) is not assigned to a plain name (line 2)",
        ),
        ("import click\n", "it builds no ArgumentParser"),
        ("def (:\n", "it does not parse as Python"),
    ],
)
def test_a_source_that_could_add_options_unseen_is_not_read(tmp_path, source, why):
    assert _read(tmp_path, source) == (None, why)


def test_only_a_regular_file_is_read(tmp_path):
    import os

    os.mkfifo(tmp_path / "train.py")  # opened without blocking: never hangs
    assert options_in_source(tmp_path / "train.py", "train.py") == (
        None,
        "it is not a regular file of at most 1 MiB",
    )


def test_the_script_is_the_word_after_python_and_its_options():
    assert script_file([sys.executable, "-u", "-W", "ignore", "train.py", "--x"]) == "train.py"
    assert script_file(["./train.py", "--x"]) == "./train.py"
    assert script_file([sys.executable, "-m", "pkg.train"]) is None
    assert script_file(["torchrun", "train.py"]) is None


def test_the_source_is_read_only_when_the_help_cannot_be_and_the_reason_stays(
    tmp_path, monkeypatch
):
    (tmp_path / "train.py").write_text(LIGHTNING_STYLE)
    slow = "`python train.py --help` took over 5 s"
    monkeypatch.setattr(command_source, "read_help", lambda argv, cwd, timeout_s: (None, slow))
    found, why = script_options([sys.executable, "train.py"], tmp_path)
    assert found.kind("lr") == VALUE and why == slow
    (tmp_path / "train.py").write_text(
        "from transformers import HfArgumentParser\np = HfArgumentParser(X)\n"
    )
    assert script_options([sys.executable, "train.py"], tmp_path) == (
        None,
        (
            f"{slow}, and its options cannot be read from train.py: its parser is a "
            f"HfArgumentParser, not "
            "argparse's own (line 2)"
        ),
    )
    assert script_options([sys.executable, "-m", "train"], tmp_path) == (
        None,
        (f"{slow}, and the command runs no script file whose source could be read instead"),
    )
