"""Probe: finding the points left of a large resumed grid sweep (planner._dispatch.search.grid_left).

A 100 x 100 grid, 9,000 of its points already run; prints how long grid_left takes, with this checkout and,
with `--before PATH`, with another one (each in a fresh child process).

    PYTHONPATH=. python bench/probe_grid_left.py [--before PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import time
from planner._contract.model import Dimension, Sampler
from planner._dispatch.search import grid_left, make_sampler
from planner._plan.space import to_optuna
space = {"a": Dimension(choice=list(range(100))), "b": Dimension(choice=list(range(100)))}
sampler = make_sampler(Sampler(name="grid", seed=0), space, finished=0)
ran = [{"params": {"a": i // 100, "b": i % 100}} for i in range(9000)]
t = time.perf_counter()
left = grid_left(sampler, to_optuna(space), ran)
print(f"{len(left)} points left, found in {time.perf_counter() - t:.3f} s")
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", type=Path, default=None, help="a planner checkout to measure beside this one"
    )
    args = parser.parse_args(argv)
    for label, path in ([("before", args.before)] if args.before else []) + [("after", ROOT)]:
        with (
            tempfile.TemporaryDirectory() as empty
        ):  # `-c` puts the cwd first on sys.path: no planner there
            done = subprocess.run(
                [sys.executable, "-c", CHILD],
                env={**os.environ, "PYTHONPATH": str(path)},
                cwd=empty,
                capture_output=True,
                text=True,
                check=True,
            )
        print(f"{label}: {done.stdout.strip()}")


if __name__ == "__main__":
    main()
