"""examples/lightning through `command:` (a process per trial) and through
planner.LightningCallback (in-process).

    PYTHONPATH=. python bench/bench_lightning.py [--repeats 1]

The same LightningModule, data, configs, tuning (3 trials an arm, ASHA),
budget (6 epochs) and seeds: `examples/lightning/contract.yaml` runs
train.py unchanged, a new Python process per trial that imports torch and
Lightning and is read through CSVLogger's metrics.csv;
`examples/lightning/contract_callback.yaml` runs train_fn.py in the Ray
workers, which import them once. Each is run with the real CLI
(`plan run --quiet`, in a subprocess, an embedded local Ray each time), one
after the other, alternating when repeated. Figures per run: trials recorded
(early-stopped ones included), the `plan run` wall time (Ray's start
included), the run's own wall time from state.json, trials per minute of that
wall time, and the median `duration_s` of a trial. The date, the CPU count and
the load average before and after each run are printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "lightning"
PATHS = {
    "command: (a process per trial)": "contract.yaml",
    "LightningCallback (in-process)": "contract_callback.yaml",
}


def run_once(label: str, work: Path) -> dict:
    """One `plan run` of the path's contract; its figures."""
    if (
        PATHS[label] == "contract.yaml"
    ):  # the app writes beside itself: run a copy, as a user's own folder
        app = Path(
            shutil.copytree(EXAMPLE, work / "app", ignore=shutil.ignore_patterns("outputs", "runs"))
        )
        contract = app / "contract.yaml"
    else:  # the trainable imports as examples.lightning.train_fn, from the repository root
        contract = EXAMPLE / "contract_callback.yaml"
    runs = work / "runs"
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "run", str(contract), "--runs-dir", str(runs), "--quiet"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(
            f"plan run {contract} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    run_dir = next(p for p in runs.glob("*/*") if (p / "run.json").is_file())
    state = json.loads((run_dir / "state.json").read_text())
    records = [
        json.loads(line)
        for line in (run_dir / "trials.jsonl").read_text().splitlines()
        if line.strip()
    ]
    own = state.get("budget", {}).get("wall_time_s") or wall
    return {
        "trials": len(records),
        "early_stopped": sum(r["status"] == "early_stopped" for r in records),
        "completed": sum(r["status"] == "completed" for r in records),
        "plan_run_s": wall,
        "run_wall_s": own,
        "per_minute": len(records) / (own / 60),
        "trial_s": statistics.median(r["duration_s"] for r in records),
        "load": (load_before, os.getloadavg()[0]),
        "state": state["state"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    results: dict[str, list[dict]] = {label: [] for label in PATHS}
    order = list(PATHS)
    for repeat in range(args.repeats):
        for label in order if repeat % 2 == 0 else order[::-1]:
            with tempfile.TemporaryDirectory(prefix="bench-lightning-") as work:
                results[label].append(run_once(label, Path(work)))

    import lightning
    import torch

    print(
        f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; torch "
        f"{torch.__version__}, "
        f"lightning {lightning.__version__}; {args.repeats} run(s) a path, medians; load = "
        f"1-minute load average "
        "before / after each run.\n"
    )
    print(
        "| path | trials (completed / early-stopped) | plan run wall (s) | run wall (s) | trials "
        "per minute | "
        "median trial (s) | load |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, runs in results.items():

        def median(key, runs=runs):
            return statistics.median(r[key] for r in runs)

        loads = ", ".join(f"{a:.1f} / {b:.1f}" for a, b in (r["load"] for r in runs))
        print(
            f"| {label} | {runs[0]['trials']} ({runs[0]['completed']} / "
            f"{runs[0]['early_stopped']}) | "
            f"{median('plan_run_s'):.1f} | {median('run_wall_s'):.1f} | "
            f"{median('per_minute'):.1f} | "
            f"{median('trial_s'):.1f} | {loads} |"
        )


if __name__ == "__main__":
    main()
