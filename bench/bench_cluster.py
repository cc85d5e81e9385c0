"""The same small contract on a two-node Ray cluster and on one node with the same CPUs.

    PYTHONPATH=. python bench/bench_cluster.py [--repeats 1] [--step-s 0.5]

What is compared: `plan run CONTRACT --address ...` (the real CLI, in a
subprocess, from a folder that is not the contract's, so the trainable is
shipped through runtime_env both times) against

- two nodes started with `ray start` on 127.0.0.1: a head and a worker, each
  {"CPU": 1, "trial_slot": 1};
- one node started the same way with {"CPU": 2, "trial_slot": 2}: the same
  total slots, no second raylet, no cross-node scheduling.

The contract asks {cpu: 1, custom: {trial_slot: 1}} per trial. Figures per run:
trials per node (from what each trial attempt wrote into its trial.dir), the
`plan run` wall time (process start to exit, Ray connection included), and the
run's own wall time from state.json. Cluster start-up is measured apart and
not counted in either. Nodes share this machine's cores, so the two-node
figure shows the overhead of a second node and of shipping code, not a
speed-up: on real machines each node brings its own cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.cluster.nodes import LocalCluster, NodeSpec, write_small_contract  # noqa: E402

LAYOUTS = {
    "two nodes (1 CPU + 1 CPU)": [
        NodeSpec(num_cpus=1, resources={"trial_slot": 1}),
        NodeSpec(num_cpus=1, resources={"trial_slot": 1}),
    ],
    "one node (2 CPUs)": [NodeSpec(num_cpus=2, resources={"trial_slot": 2})],
}


def run_once(cluster: LocalCluster, work: Path, args) -> dict:
    contract = write_small_contract(
        work / "experiment",
        name="bench-cluster",
        trials_per_arm=args.trials_per_arm,
        seeds=tuple(range(args.seeds)),
        exposure=args.exposure,
        step_s=args.step_s,
        resources={"cpu": 1, "gpu": 0, "custom": {"trial_slot": 1}},
    )
    home = work / "home"
    home.mkdir(exist_ok=True)
    runs = work / "runs"
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "planner",
            "run",
            str(contract),
            "--address",
            cluster.address,
            "--runs-dir",
            str(runs),
            "--quiet",
        ],
        cwd=home,
        env=cluster.driver_env(PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"plan run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    run_dir = next(p for p in runs.glob("*/*") if (p / "run.json").is_file())
    state = json.loads((run_dir / "state.json").read_text())
    trials = sum(1 for line in (run_dir / "trials.jsonl").read_text().splitlines() if line.strip())
    per_node: Counter[str] = Counter()
    for path in run_dir.glob("trials/*/node-*.json"):
        facts = json.loads(path.read_text())
        index = cluster.node_index(facts["node_id"])
        per_node["head" if index == 0 else f"worker {index}"] += 1
    return {
        "trials": trials,
        "per_node": dict(sorted(per_node.items())),
        "plan_run_s": wall,
        "run_wall_s": state.get("budget", {}).get("wall_time_s"),
        "state": state["state"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--trials-per-arm", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--exposure", type=int, default=3)
    parser.add_argument("--step-s", type=float, default=0.5)
    args = parser.parse_args()

    rows = []
    for layout, specs in LAYOUTS.items():
        t0 = time.monotonic()
        with LocalCluster(specs) as cluster:
            start_s = time.monotonic() - t0
            runs = []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory(prefix="bench-cluster-") as work:
                    runs.append(run_once(cluster, Path(work), args))
        rows.append((layout, start_s, runs))

    trials = args.trials_per_arm * 2 + args.seeds * 2
    print(
        f"\nContract: 2 arms x {args.trials_per_arm} tuning trials + 2 arms x {args.seeds} seeds "
        f"= {trials} trials of {args.exposure} steps x {args.step_s:g} s; "
        f"{args.repeats} run(s) per layout, medians.\n"
    )
    print(
        "| layout | cluster start (s) | trials ended | trial attempts per node | plan run wall "
        "(s) | run wall from state.json (s) |"
    )
    print("|---|---|---|---|---|---|")
    for layout, start_s, runs in rows:
        per_node = Counter()
        for r in runs:
            per_node.update(r["per_node"])
        share = ", ".join(
            f"{node}: {count / len(runs):g}" for node, count in sorted(per_node.items())
        )
        walls = [r["plan_run_s"] for r in runs]
        own = [r["run_wall_s"] for r in runs if r["run_wall_s"] is not None]
        print(
            f"| {layout} | {start_s:.1f} | {runs[0]['trials']} | {share} | "
            f"{statistics.median(walls):.1f} | "
            f"{statistics.median(own):.1f} |"
            if own
            else f"| {layout} | {start_s:.1f} | "
            f"{runs[0]['trials']} | "
            f"{share} | {statistics.median(walls):.1f} | n/a |"
        )


if __name__ == "__main__":
    main()
