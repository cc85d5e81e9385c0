"""Benchmark: `plan audit` against `plan report --format md` on the same 10,000-trial x 100-report run.

Target: the audit takes no more than the markdown report of the same folder.
Each measurement is a fresh child process (imports count, as a user pays
them), timed by wall clock, with its CPU time and peak memory (bench_report's
`measure`). Prints both, and the ratio audit / report (median of --repeat).

    PYTHONPATH=. python bench/bench_audit.py [--trials 10000] [--reports 100] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_report import ARMS, ROOT, SEEDS, measure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--reports", type=int, default=100, help="reports per trial (the exposure)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default=None, help="write the synthetic run here and keep it")
    args = parser.parse_args(argv)

    tmp = tempfile.TemporaryDirectory(prefix="bench-audit-")
    base = Path(args.keep) if args.keep else Path(tmp.name)
    run_dir = base / "20261129-181700-bench"
    tune_trials = (args.trials - len(ARMS) * SEEDS) // len(ARMS)
    t0 = time.perf_counter()
    if not (run_dir / "trials.jsonl").is_file():
        code = (f"from bench.synthetic_run import make_run; make_run({str(run_dir)!r}, arms={ARMS!r}, "
                f"seeds={SEEDS}, tune_trials={tune_trials}, reports_per_trial={args.reports}, early_stopped=0.0)")
        subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    made = time.perf_counter() - t0
    n_trials = sum(1 for _ in open(run_dir / "trials.jsonl", "rb"))
    out = base / "out"
    out.mkdir(exist_ok=True)
    py = sys.executable
    cases = [
        ("plan report --format md", [py, "-m", "planner", "report", str(run_dir), "--format", "md", "-o", str(out / "r.md")]),
        ("plan audit", [py, "-m", "planner", "audit", str(run_dir)]),
        ("plan audit --json", [py, "-m", "planner", "audit", str(run_dir), "--json"]),
    ]
    print(f"Run: {n_trials} trials x {args.reports} reports, written in {made:.1f} s. Median of {args.repeat}, "
          f"the commands interleaved; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs.\n")
    results: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _ in cases}
    for _ in range(args.repeat):  # interleaved, so a busy moment of the machine hits every command alike
        for label, cmd in cases:
            results[label].append(measure(cmd))
    print("| what | wall s | CPU s | peak MiB |")
    print("|---|---:|---:|---:|")
    wall = {}
    for label, runs in results.items():
        wall[label] = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| {label} | {wall[label]:.2f} | {cpu:.2f} | {max(r[2] for r in runs):.0f} |")
    ratio = wall["plan audit"] / wall["plan report --format md"]
    print(f"\naudit / md report: {ratio:.2f} (target: at most 1.00) -> {'ok' if ratio <= 1.0 else 'SLOWER'}")
    tmp.cleanup()
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
