"""Benchmark: `plan report` (html, md) and `load_run` on a 10,000-trial x 100-report run.

Each measurement is a fresh child process (so imports count, as a user pays
them), timed by wall clock, with its CPU time and peak memory (ru_maxrss) from
os.wait4. The cases run interleaved (one round of every case, then the next),
so that a busy machine slows them alike. A calibration line times `import
pandas` the same way (0.38 s on a quiet machine) to tell a slow run of the code
from a busy machine. Prints a markdown table, then the ratios to the floor.

The floor is what any reader of the run pays: a fresh process that imports
orjson and pandas and parses trials.jsonl with orjson, line by line
(each record parsed, then dropped: the parse itself, not holding a million dicts).
Targets (CPU time, steadier than wall time on a shared machine):
  - `plan report --format html` within 2.5x the floor, under 512 MiB;
  - `load_run` within 2x the floor.
Each is measured three ways: the journal read before (its entry in the read cache, the case the
targets are about: a run is read again and again), the first read (the cache emptied before
each run: it decodes the journal and writes the entry), and the cache off.

    PYTHONPATH=. python bench/bench_report.py [--trials 10000] [--reports 100] [--repeat 3] [--keep
    DIR]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ARMS = ("sgd", "adam", "adamw", "lion")
FLOOR = "floor: import orjson, pandas; orjson-parse trials.jsonl"
LOAD = "load_run (trials + reports frames), the journal read before"
LOAD_FIRST = "load_run, the first read (writes the cache entry)"
LOAD_OFF = "load_run, cache off (PLANNER_CACHE_DIR=off)"
HTML = "plan report --format html, the journal read before"
HTML_FIRST = "plan report --format html, the first read"
HTML_OFF = "plan report --format html, cache off"
SEEDS = 10


def measure(cmd: list[str], cache: str = "off") -> tuple[float, float, float]:
    """(wall s, cpu s, peak MiB) of one child process, its read cache in the folder `cache` (or
    off)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PLANNER_CACHE_DIR": cache}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {' '.join(cmd)}\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def bench_run(base: Path, trials: int, reports: int) -> tuple[Path, float, int]:
    """(the synthetic run folder under `base`, seconds to write it, its trials), written unless
    already there."""
    run_dir = base / "20261129-181700-bench"
    tune_trials = (trials - len(ARMS) * SEEDS) // len(ARMS)
    t0 = time.perf_counter()
    if not (run_dir / "trials.jsonl").is_file():
        # In a child: a child's ru_maxrss starts from its parent's size at fork, so the parent
        # stays small.
        code = (
            f"from bench.synthetic_run import make_run; make_run({str(run_dir)!r}, arms={ARMS!r}, "
            f"seeds={SEEDS}, tune_trials={tune_trials}, reports_per_trial={reports}, "
            f"early_stopped=0.0)"
        )
        subprocess.run(
            [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
    made = time.perf_counter() - t0
    return run_dir, made, sum(1 for _ in open(run_dir / "trials.jsonl", "rb"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--reports", type=int, default=100, help="reports per trial (the exposure)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default=None, help="write the synthetic run here and keep it")
    args = parser.parse_args(argv)

    # byte-compile planner as an install would (as bench_validate.py does): with
    # PYTHONDONTWRITEBYTECODE set, a stale .pyc would otherwise be recompiled on every run and
    # counted against planner
    compileall.compile_dir(str(ROOT / "planner"), quiet=1)
    tmp = tempfile.TemporaryDirectory(prefix="bench-report-")
    base = Path(args.keep) if args.keep else Path(tmp.name)
    run_dir, made, n_trials = bench_run(base, args.trials, args.reports)
    size_mb = (run_dir / "trials.jsonl").stat().st_size / 2**20
    py = sys.executable
    out = base / "out"
    out.mkdir(exist_ok=True)
    load = [
        py,
        "-c",
        f"from planner import load_run; r = load_run({str(run_dir)!r}); assert len(r.reports) > 0",
    ]
    report = [py, "-m", "planner", "report", str(run_dir), "-o"]
    md = [*report, str(out / "r.md"), "--format", "md"]
    html = [*report, str(out / "r.html"), "--format", "html"]
    # (label, command, its read cache: off, "cold" (emptied before each run: the first read of
    # the journal, which writes the entry) or "warm" (the journal read before))
    cases = [
        ("calibration: python -c 'import pandas'", [py, "-c", "import pandas"], "off"),
        (
            FLOOR,
            [
                py,
                "-c",
                "import orjson, pandas\n"
                f"for line in open({str(run_dir / 'trials.jsonl')!r}, 'rb'):\n    "
                f"orjson.loads(line)",
            ],
            "off",
        ),
        (LOAD, load, "warm"),
        (LOAD_FIRST, load, "cold"),
        (LOAD_OFF, load, "off"),
        ("plan report --format md", md, "warm"),
        (HTML, html, "warm"),
        (HTML_FIRST, html, "cold"),
        (HTML_OFF, html, "off"),
        ("plan status", [py, "-m", "planner", "status", str(run_dir)], "off"),
    ]
    cache_dir = base / "cache"
    print(
        f"Run: {n_trials} trials x {args.reports} reports (2 metrics each, held-out at the end of "
        f"confirmation), "
        f"trials.jsonl {size_mb:.0f} MiB, written in {made:.1f} s. Median of {args.repeat}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs.\n"
    )
    print("| what | wall s | CPU s | peak MiB |")
    print("|---|---:|---:|---:|")
    runs: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _, _ in cases}
    measure(load, str(cache_dir))  # the entry the warm cases read
    for _ in range(args.repeat):
        for label, cmd, cache in cases:
            if cache == "cold":
                shutil.rmtree(cache_dir, ignore_errors=True)
            runs[label].append(measure(cmd, "off" if cache == "off" else str(cache_dir)))
    cpu = {}
    for label, _, _ in cases:
        wall = statistics.median(r[0] for r in runs[label])
        cpu[label] = statistics.median(r[1] for r in runs[label])
        peak = max(r[2] for r in runs[label])
        print(f"| {label} | {wall:.2f} | {cpu[label]:.2f} | {peak:.0f} |", flush=True)
    floor = cpu[FLOOR]
    print()
    for label, target in (
        (HTML, "<= 2.5x, < 512 MiB"),
        (HTML_FIRST, "-"),
        (HTML_OFF, "-"),
        (LOAD, "<= 2x"),
        (LOAD_FIRST, "-"),
        (LOAD_OFF, "-"),
    ):
        print(
            f"{label} / floor: CPU {cpu[label]:.2f} / {floor:.2f} = {cpu[label] / floor:.2f}x "
            f"(target {target})"
        )
    tmp.cleanup()


if __name__ == "__main__":
    main()
