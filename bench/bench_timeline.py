"""Where the wall time of one small `plan run` goes: a timeline from the process and its run folder.

    python bench/bench_timeline.py [--before PATH] [--tune-per-arm 5] [--seeds 5] [--trial-seconds
    1]

Runs `plan run` (a 2-arm contract, `--tune-per-arm` tuning trials and `--seeds` confirmation seeds
per arm, each trial sleeping `--trial-seconds` once; the defaults are issue 23's 20 trials x 1 s on
2 slots) in a fresh process with an embedded Ray, and cuts its wall time at the process's start and
exit and at the run's own events (events.jsonl: run_started, phase_started/ended,
trial_started/ended, run_ended). Each segment is printed with what it holds; the trials' busy time
is compared with the ideal (the trials' work spread over the slots). With `--before PATH` the same
run is made with PYTHONPATH=PATH first, then with this checkout, and the two timelines are printed
side by side.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.run_all import write_run_contract  # noqa: E402


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def timeline(pythonpath: Path, folder: Path, args: argparse.Namespace) -> list[tuple[str, float]]:
    """[(segment, seconds)] of one run made with PYTHONPATH=`pythonpath` in `folder`."""
    import json

    contract = write_run_contract(
        folder,
        "ablation",
        tune_per_arm=args.tune_per_arm,
        seeds=args.seeds,
        steps=1,
        sleep=args.trial_seconds,
    )
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    start = time.time()
    printed = None  # when the result's "run state:" line reached stdout (the first line of all,
    # "run folder: ...", is printed as the run starts)
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "planner",
            "run",
            str(contract),
            "--runs-dir",
            str(folder / "runs"),
            "--quiet",
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as child:
        for line in child.stdout:
            if printed is None and line.startswith("run state:"):
                printed = time.time()
    end = time.time()
    printed = end if printed is None else printed
    # the run's own folder (`latest` beside it is a file that names it)
    (run_dir,) = (p for p in (folder / "runs" / "ablation").iterdir() if p.is_dir())
    events = [json.loads(line) for line in open(run_dir / "events.jsonl")]
    first = {}
    for e in events:
        first.setdefault((e["event"], e.get("phase")), _t(e["time"]))
    starts = {
        p: sorted(
            _t(e["time"]) for e in events if e["event"] == "trial_started" and e.get("phase") == p
        )
        for p in ("tune", "confirm")
    }
    records = [json.loads(line) for line in open(run_dir / "trials.jsonl")]
    ends = {
        p: sorted(_t(r["ended"]) for r in records if r["phase"] == p) for p in ("tune", "confirm")
    }
    marks = [
        (
            "process start -> run_started (imports, contract, run folder)",
            start,
            first[("run_started", None)],
        ),
        (
            "run_started -> tuning phase_started (Ray start, plan)",
            first[("run_started", None)],
            first[("phase_started", "tune")],
        ),
        (
            "tuning phase_started -> first trial_started (Tune start)",
            first[("phase_started", "tune")],
            starts["tune"][0],
        ),
        ("tuning: first trial start -> last trial end", starts["tune"][0], ends["tune"][-1]),
        (
            "last tuning trial end -> confirm phase_started (selection)",
            ends["tune"][-1],
            first[("phase_started", "confirm")],
        ),
        (
            "confirm phase_started -> first trial_started",
            first[("phase_started", "confirm")],
            starts["confirm"][0],
        ),
        (
            "confirmation: first trial start -> last trial end",
            starts["confirm"][0],
            ends["confirm"][-1],
        ),
        (
            "last confirm trial end -> run_ended (decide, write)",
            ends["confirm"][-1],
            first[("run_ended", None)],
        ),
        ("run_ended -> result printed (unlock, the result)", first[("run_ended", None)], printed),
        ("result printed -> process exit (Ray shutdown)", printed, end),
    ]
    rows = [(name, b - a) for name, a, b in marks]
    rows.append(("process start -> result printed (what the user waits for)", printed - start))
    rows.append(("whole process", end - start))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--tune-per-arm", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trial-seconds", type=float, default=1.0)
    parser.add_argument("--slots", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    sides = (
        {"after": ROOT} if args.before is None else {"before": args.before.resolve(), "after": ROOT}
    )
    got = {}
    for side, path in sides.items():
        with tempfile.TemporaryDirectory(prefix="bench-timeline-") as tmp:
            got[side] = timeline(path, Path(tmp), args)
    per_phase = math.ceil(2 * args.tune_per_arm / args.slots) * args.trial_seconds
    per_confirm = math.ceil(2 * args.seeds / args.slots) * args.trial_seconds
    n = 2 * (args.tune_per_arm + args.seeds)
    print(
        f"{n} trials x {args.trial_seconds:g} s on {args.slots} slots; ideal: tuning "
        f"{per_phase:.1f} s, "
        f"confirmation {per_confirm:.1f} s, whole {per_phase + per_confirm:.1f} s; load average "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    print("| segment | " + " | ".join(f"{s} s" for s in sides) + " |")
    print("|---|" + "---:|" * len(sides))
    for i, (name, _) in enumerate(got["after"]):
        print(f"| {name} | " + " | ".join(f"{got[s][i][1]:.2f}" for s in sides) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
