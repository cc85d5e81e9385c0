"""Probe: where the driver's CPU goes in a sweep of trivial trials, by cProfile (the main thread).

One `plan run` of `--trials` trials of 3 steps (bench/run_all.py's trivial contract, no sleep) in
this process under cProfile; printed: the process's CPU and planner's own functions by cumulative
time. cProfile inflates Python-heavy code: read it for where, and bench/bench_scale.py for how much.

    PYTHONPATH=. python bench/probe_driver_profile.py [--trials 1000] [--keep prof.out]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.run_all import write_run_contract  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--keep", default=None, help="write the profile here")
    args = parser.parse_args()
    from planner._cli import main as cli

    with tempfile.TemporaryDirectory() as folder:
        contract = write_run_contract(Path(folder), "scale", args.trials // 2, 3, 3, 0.0)
        os.chdir(folder)
        sys.path.insert(0, folder)
        profile = cProfile.Profile()
        profile.enable()
        code = cli.main(["run", str(contract), "--runs-dir", "runs", "--quiet"])
        profile.disable()
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(f"exit {code}; process CPU {own.ru_utime + own.ru_stime:.1f} s")
    if args.keep:
        profile.dump_stats(args.keep)
    pstats.Stats(profile).sort_stats("cumulative").print_stats("planner/", args.top)


if __name__ == "__main__":
    main()
