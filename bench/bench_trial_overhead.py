"""What planner adds around every trial in the worker: scrubbing its output, ending its process
tree.

    PYTHONPATH=. python bench/bench_trial_overhead.py [--before PATH] [--rounds 2000]

Each figure is taken in a fresh process (with `--before PATH`, also with PYTHONPATH=PATH first,
side by side):
  - the run's Redactor scrubbing one 1 KiB line of output (us a line; a trial's output is scrubbed
    line by line up to its 1 MiB cap, so at most about a thousand such lines a trial);
  - entering and leaving `trial_processes_end`, which ends what a function trial started (ms a
    trial), with the number of processes on the machine beside it (it scans them);
  - a trial's attempts ledger, written at its start and its end (ms a trial);
  - the look at the modules loaded, four a trial in a worker beside Ray Tune (us a look).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRUB = """
import sys, time
from planner._core.redact import Redactor
r, line, n = Redactor.for_run(), "x" * 1023 + "\\n", int(sys.argv[1])
t = time.perf_counter()
for _ in range(n): r.scrub(line)
print((time.perf_counter() - t) / n * 1e6)
"""

PROCESS_END = """
import sys, time
try:
    from planner._trial.processes import trial_processes_end
except ImportError:
    print("-"); raise SystemExit
n = max(1, int(sys.argv[1]) // 40)
t = time.perf_counter()
for _ in range(n):
    with trial_processes_end(): pass
print((time.perf_counter() - t) / n * 1e3)
"""


LEDGER = """
import sys, tempfile, time
from planner._trial.attempts import Ledger
folder, n = tempfile.mkdtemp(), max(1, int(sys.argv[1]) // 10)
t = time.perf_counter()
for i in range(n):
    ledger = Ledger.load(folder, "bench")
    ledger.start(1); ledger.end(1, "completed", None, 3)
print((time.perf_counter() - t) / n * 1e3)
"""

MODULES = """
import sys, time
import ray.tune
from planner._trial.loading import top_level_modules
n = int(sys.argv[1])
t = time.perf_counter()
for _ in range(n): top_level_modules()
print((time.perf_counter() - t) / n * 1e6)
"""


def measure(code: str, path: Path, rounds: int) -> str:
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(rounds)],
        env=env,
        cwd=path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return out if out == "-" else f"{float(out):.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", type=Path, default=None, help="a planner checkout to measure beside this one"
    )
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args(argv)
    sides = [("after", ROOT)] + ([("before", args.before)] if args.before else [])
    processes = (
        sum(1 for p in os.listdir("/proc") if p.isdigit()) if os.path.isdir("/proc") else "?"
    )
    print("| figure | " + " | ".join(name for name, _ in sides) + " |")
    print("|---|" + "---:|" * len(sides))
    print(
        "| scrub one 1 KiB line of output, us | "
        + " | ".join(measure(SCRUB, path, args.rounds) for _, path in sides)
        + " |"
    )
    print(
        f"| end a function trial's process tree ({processes} processes on the machine), ms a "
        f"trial | "
        + " | ".join(measure(PROCESS_END, path, args.rounds) for _, path in sides)
        + " |"
    )
    print(
        "| a trial's attempts ledger, written at its start and end, ms a trial | "
        + " | ".join(measure(LEDGER, path, args.rounds) for _, path in sides)
        + " |"
    )
    print(
        "| look at the modules loaded (beside Ray Tune; four a trial), us a look | "
        + " | ".join(measure(MODULES, path, args.rounds) for _, path in sides)
        + " |"
    )


if __name__ == "__main__":
    main()
