"""Benchmark: `plan audit` against `plan report --format md` on the same 10,000-trial x 100-report
run.

Target: the audit takes no more than the markdown report of the same folder.
Each measurement is a fresh child process (imports count, as a user pays
them), timed by wall clock, with its CPU time and peak memory (bench_report's
`measure`); the commands are interleaved --repeat times. On a shared machine
the wall time measures the queue as much as the command: the ratio is checked
on the best wall time of the repeats and on the median CPU time.

    PYTHONPATH=. python bench/bench_audit.py [--trials 10000] [--reports 100] [--repeat 3] [--keep
    DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run as a script (bench/run_all.py): bench imports

from bench.bench_report import bench_run, measure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--reports", type=int, default=100, help="reports per trial (the exposure)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", default=None, help="write the synthetic run here and keep it")
    args = parser.parse_args(argv)

    tmp = tempfile.TemporaryDirectory(prefix="bench-audit-")
    base = Path(args.keep) if args.keep else Path(tmp.name)
    run_dir, made, n_trials = bench_run(base, args.trials, args.reports)
    out = base / "out"
    out.mkdir(exist_ok=True)
    py = sys.executable
    cases = [
        (
            "plan report --format md",
            [
                py,
                "-m",
                "planner",
                "report",
                str(run_dir),
                "--format",
                "md",
                "-o",
                str(out / "r.md"),
            ],
        ),
        ("plan audit", [py, "-m", "planner", "audit", str(run_dir)]),
        ("plan audit --json", [py, "-m", "planner", "audit", str(run_dir), "--json"]),
    ]
    print(
        f"Run: {n_trials} trials x {args.reports} reports, written in {made:.1f} s. {args.repeat} "
        f"runs each, "
        f"the commands interleaved; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} "
        f"CPUs.\n"
    )
    results: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _ in cases}
    for _ in range(
        args.repeat
    ):  # interleaved, so a busy moment of the machine hits every command alike
        for label, cmd in cases:
            results[label].append(measure(cmd))
    print("| what | wall s (median) | wall s (best) | CPU s (median) | peak MiB |")
    print("|---|---:|---:|---:|---:|")
    best, cpu = {}, {}
    for label, runs in results.items():
        best[label] = min(r[0] for r in runs)
        cpu[label] = statistics.median(r[1] for r in runs)
        print(
            f"| {label} | {statistics.median(r[0] for r in runs):.2f} | {best[label]:.2f} | "
            f"{cpu[label]:.2f} "
            f"| {max(r[2] for r in runs):.0f} |"
        )
    report, audit = "plan report --format md", "plan audit"
    by_wall, by_cpu = best[audit] / best[report], cpu[audit] / cpu[report]
    ok = by_wall <= 1.0 and by_cpu <= 1.0
    print(
        f"\naudit / md report: {by_wall:.2f} by the best wall time, {by_cpu:.2f} by CPU time "
        f"(target: at most 1.00 each) -> {'ok' if ok else 'SLOWER'}"
    )
    tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
