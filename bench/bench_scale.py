"""A large sweep's cost in the driver: one `plan run` of N trivial trials (default 10,000), its
wall time, the trials it absorbed per second and the driver's peak memory (docs/running.md's cost
model).

    python bench/bench_scale.py [--trials 10000] [--steps 3] [--before PATH]

The contract has two arms, `--seeds` confirmation seeds each and the rest tuning trials split
between the arms; each trial reports `--steps` times and sleeps not at all, so what is measured is
the planner, Ray Tune and Ray absorbing trials, not the trials. The driver runs in its own process
(bench/run_all.py's DRIVER), so its peak resident memory is its own (Ray's raylet, GCS and workers
are other processes). With `--before PATH` the same run is made with PYTHONPATH=PATH first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.run_all import DRIVER, write_run_contract  # noqa: E402
from bench.throughput import rates  # noqa: E402


def measure(side: Path, contract: Path, runs: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(side)}
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, "run", str(contract), "--runs-dir", str(runs), "--quiet"],
        cwd=contract.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - start
    if out.returncode != 0:
        raise SystemExit(
            f"plan run failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    driver = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "wall_s": wall,
        "driver_cpu_s": driver["driver_cpu_s"],
        "driver_peak_mib": driver["driver_maxrss_kib"] / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    tune_per_arm = (args.trials - 2 * args.seeds) // 2
    total = 2 * (tune_per_arm + args.seeds)
    sides = ({"before": args.before.resolve()} if args.before else {}) | {"after": ROOT}
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; load "
        f"average "
        f"{os.getloadavg()[0]:.1f}; {total} trials of {args.steps} steps, no sleep",
        flush=True,
    )
    print(
        "| side | wall s | trials/s | wall ms a trial | driver CPU s | driver CPU ms a trial | "
        "driver peak MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    windows: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        contract = write_run_contract(
            Path(tmp),
            f"scale{total}",
            tune_per_arm=tune_per_arm,
            seeds=args.seeds,
            steps=args.steps,
            sleep=0.0,
        )
        for name, side in sides.items():
            runs = Path(tmp) / "runs" / name
            got = measure(side, contract, runs)
            print(
                f"| {name} | {got['wall_s']:.0f} | {total / got['wall_s']:.1f} | "
                f"{got['wall_s'] / total * 1000:.0f} | "
                f"{got['driver_cpu_s']:.0f} | {got['driver_cpu_s'] / total * 1000:.1f} | "
                f"{got['driver_peak_mib']:.0f} |",
                flush=True,
            )
            windows[name] = rates(str(next(runs.glob("*/*/trials.jsonl"))), max(100, total // 10))
    for (
        name,
        got,
    ) in (
        windows.items()
    ):  # a driver whose cost per trial grows with the run slows window after window
        print(
            f"{name}: trials/s by windows of {max(100, total // 10)} trials: "
            + ", ".join(f"{rate:.0f} (to {n})" for n, rate in got)
        )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
