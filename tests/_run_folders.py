"""A finished run folder to plant hostile or careless files in, and what must stay untouched
outside it.

The fixtures `pristine` (one synthetic run per test process) and `run` (a fresh copy for each
test) are in tests/unit/conftest.py; they build on these.
"""

from __future__ import annotations

from pathlib import Path

from bench.synthetic_run import make_run
from planner._cli.main import main

OUTSIDE = "precious: this file is outside the run folder\n"


def pristine_run(folder: Path) -> Path:
    """A completed two-arm run folder with tuning, confirmation and reports, written as planner
    writes it."""
    return make_run(
        folder / "demo" / "20261130-120000-abcd",
        arms=("sgd", "adam"),
        seeds=3,
        tune_trials=3,
        reports_per_trial=4,
    )


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def outside(run: Path) -> Path:
    return run.parents[2] / "outside.txt"
