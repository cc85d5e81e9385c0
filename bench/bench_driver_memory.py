"""Where the driver's memory per trial goes: tracemalloc in the `plan run` process, between the
second tuning trial's start and the last tuning trial's end, grouped by who allocated (Ray/Tune,
planner, other).

    python bench/bench_driver_memory.py [--trials 330] [--steps 3]

A two-arm contract of trivial trials (bench/run_all.py's), run in a child process with tracemalloc
on; the growth of the Python heap over the tuning trials, per trial, is printed by owner: an
allocation is planner's when one of its three innermost frames is in planner/, Ray's when any frame
is in ray/. (docs/speed.md)
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.run_all import write_run_contract  # noqa: E402

CHILD = """
import gc, sys, tracemalloc
tracemalloc.start(12)
import planner._dispatch.tune as T
snaps = {}
start, end = T.Recorder.on_trial_start, T.Recorder._end

def on_trial_start(self, *a, **k):
    if "first" not in snaps and len(self.started) >= 2:
        gc.collect(); snaps["first"] = tracemalloc.take_snapshot()
    return start(self, *a, **k)

def _end(self, *a, **k):
    out = end(self, *a, **k)
    if self.state.outcome.ended == self.total - 1 and "first" in snaps:
        gc.collect()
        by = {"ray": 0, "planner": 0, "other": 0}
        for d in tracemalloc.take_snapshot().compare_to(snaps["first"], "traceback"):
            frames = [f.filename for f in d.traceback] who = ("planner" if any("/planner/" in f for
            f in frames[-3:])
                   else "ray" if any("/ray/" in f for f in frames) else "other")
            by[who] += d.size_diff
        n = self.total - 2
        print("GROWTH " + " ".join(f"{k}={v / n / 1024:.1f}" for k, v in by.items()), file=sys.stderr)
    return out

T.Recorder.on_trial_start, T.Recorder._end = on_trial_start, _end
from planner._cli.main import main
main(["run", sys.argv[1], "--runs-dir", sys.argv[2], "--quiet"])
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=330)
    parser.add_argument("--steps", type=int, default=3, help="reports per trial")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        contract = write_run_contract(
            Path(tmp),
            "memory",
            tune_per_arm=(args.trials - 10) // 2,
            seeds=5,
            steps=args.steps,
            sleep=0.0,
        )
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(contract), str(Path(tmp) / "runs")],
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
        )
    line = next((ln for ln in out.stderr.splitlines() if ln.startswith("GROWTH ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(
            f"plan run failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        )
    parts = dict(item.split("=") for item in line.split()[1:])
    total = sum(float(v) for v in parts.values())
    print(
        f"Python heap growth per tuning trial over {args.trials} trials of {args.steps} reports: "
        f"{total:.1f} KiB; " + ", ".join(f"{k} {float(v):.1f} KiB" for k, v in parts.items())
    )


if __name__ == "__main__":
    main()
