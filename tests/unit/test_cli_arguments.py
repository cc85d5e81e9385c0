"""The `plan` command line: every argument says what it is for; every command that prints a result
has --json."""

from __future__ import annotations

import argparse

import pytest

from planner._cli.main import build_parser


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_argument_of_every_command_has_a_help_text():
    missing = [
        f"plan {name} {action.dest}"
        for name, command in _commands().items()
        for action in command._actions
        if not (action.help or "").strip()
    ]
    assert not missing, missing


@pytest.mark.parametrize(
    "command",
    [
        "validate",
        "run",
        "status",
        "report",
        "export",
        "reeval",
        "power",
        "estimate",
        "audit",
        "log",
    ],
)
def test_a_command_that_prints_a_result_has_json(command):
    assert "--json" in _commands()[command]._option_string_actions
