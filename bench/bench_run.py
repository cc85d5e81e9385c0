"""plan run against raw Ray Tune: the same trivial trainable, the same trials, the same resources.

    PYTHONPATH=. python bench/bench_run.py [--trials 24] [--trial-seconds 1.0] [--cpus 2] [--json
    out.json]

One local Ray (`--cpus` CPUs) serves every side; its start-up is excluded from
all of them. Each trial sleeps `--trial-seconds` and reports once, at 1 CPU.

- raw Tune, default settings: a Tuner with num_samples = N.
- raw Tune, reuse_actors=True.
- raw Tune, reuse_actors=True with per-trial loggers off (the settings plan run uses).
- plan run: a 2-arm contract with N/2 tuning trials per arm (the tuning phase is
  the N trials compared), then 2 confirmation seeds per arm (4 more trials,
  reported separately as the whole run).

Slot utilization = busy trial-seconds / (slots x wall); ideal wall = ceil(N / slots) x trial time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TRAINABLE = """
import time


def train(config, trial):
    time.sleep(config["sleep"])
    trial.report(1, score=config["lr"] + (trial.seed % 97) * 1e-6)  # the seed varies the run
"""


def raw_tune(n: int, seconds: float, reuse: bool, quiet_loggers: bool, storage: str) -> float:
    from ray import tune

    if quiet_loggers:
        os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    else:
        os.environ.pop("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", None)

    def trainable(config):
        time.sleep(seconds)
        tune.report({"score": config["lr"]})

    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"lr": tune.loguniform(1e-4, 1.0)},
        tune_config=tune.TuneConfig(num_samples=n, reuse_actors=reuse, metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    )
    t0 = time.perf_counter()
    tuner.fit()
    return time.perf_counter() - t0


def plan_run(n: int, seconds: float, folder: Path) -> tuple[float, float, int, float]:
    """(tuning-phase wall, whole-run wall, trials in the whole run, confirmation-phase wall,
    first tuning trial start to last tuning trial end)."""
    from planner._dispatch.driver import run
    from planner._store.writer import read_jsonl

    (folder / "bench_trivial.py").write_text(TRAINABLE)
    contract = textwrap.dedent(f"""
        version: 1
        name: bench
        hypothesis: Overhead only.
        trainable: bench_trivial:train
        config: {{values: {{sleep: {seconds}, lr: 0.1, arm: a}}}}
        factor: {{name: arm}}
        baseline: {{name: a, overrides: [arm=a]}}
        arms: [{{name: b, overrides: [arm=b]}}]
        metric: {{name: score, mode: max}}
        acceptance: {{min_effect: 0.01}}
        seeds: [0, 1]
        budget: {{exposure: 1}}
        tuning:
          trials_per_arm: {n // 2}
          seeds: [100]
          sampler: {{name: random, seed: 0}}
          space: {{lr: {{log_uniform: [1.0e-4, 1.0]}}}}
        """)
    (folder / "contract.yaml").write_text(contract)
    t0 = time.perf_counter()
    result = run(folder / "contract.yaml", runs_dir=folder / "runs", quiet=True)
    whole = time.perf_counter() - t0
    events = {
        e["event"] + "/" + e.get("phase", ""): e
        for e in read_jsonl(result.run_dir / "events.jsonl")
    }

    tune_records = [r for r in read_jsonl(result.run_dir / "trials.jsonl") if r["phase"] == "tune"]
    first = min(datetime.fromisoformat(r["started"].replace("Z", "+00:00")) for r in tune_records)
    last = max(datetime.fromisoformat(r["ended"].replace("Z", "+00:00")) for r in tune_records)
    busy_span = (last - first).total_seconds()

    def span(phase):
        start = datetime.fromisoformat(
            events[f"phase_started/{phase}"]["time"].replace("Z", "+00:00")
        )
        end = datetime.fromisoformat(events[f"phase_ended/{phase}"]["time"].replace("Z", "+00:00"))
        return (end - start).total_seconds()

    return span("tune"), whole, n + 4, span("confirm"), busy_span


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--trial-seconds", type=float, default=1.0)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="interleaved repeats of the reuse and plan rows (medians)",
    )
    parser.add_argument(
        "--skip-default", action="store_true", help="skip raw Tune with default settings (slow)"
    )
    args = parser.parse_args(argv)
    n, seconds, slots = args.trials, args.trial_seconds, args.cpus

    import ray

    from planner._dispatch.tune import WORKER_ENV

    t0 = time.perf_counter()
    from planner._dispatch.ray_start import start_local_ray

    start_local_ray(
        num_cpus=slots,
        log_to_driver=False,
        runtime_env={
            "env_vars": {
                **WORKER_ENV,
                "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            }
        },
    )
    startup = time.perf_counter() - t0
    samples: dict[str, list[float]] = {}
    whole_runs: list[tuple[float, int, float]] = []
    spans: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        tmp = Path(tmp)
        if not args.skip_default:
            samples["raw Tune, default"] = [
                raw_tune(n, seconds, reuse=False, quiet_loggers=False, storage=str(tmp / "default"))
            ]
        for r in range(
            args.repeats
        ):  # interleaved, so a change in the machine's load hits every side
            samples.setdefault("raw Tune, reuse_actors", []).append(
                raw_tune(
                    n, seconds, reuse=True, quiet_loggers=False, storage=str(tmp / f"reuse{r}")
                )
            )
            samples.setdefault("raw Tune, reuse_actors, loggers off", []).append(
                raw_tune(n, seconds, reuse=True, quiet_loggers=True, storage=str(tmp / f"quiet{r}"))
            )
            (tmp / f"plan{r}").mkdir()
            tune_wall, whole, whole_n, confirm_wall, busy_span = plan_run(
                n, seconds, tmp / f"plan{r}"
            )
            spans.append(busy_span)
            samples.setdefault("plan run, tuning phase", []).append(tune_wall)
            whole_runs.append((whole, whole_n, confirm_wall))
    ray.shutdown()
    rows = {name: statistics.median(values) for name, values in samples.items()}
    whole = statistics.median(w for w, _, _ in whole_runs)
    whole_n = whole_runs[0][1]
    confirm_wall = statistics.median(c for _, _, c in whole_runs)
    ideal = math.ceil(n / slots) * seconds
    fastest_raw = min(v for k, v in rows.items() if k.startswith("raw"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{n} trials of {seconds:g} s at 1 CPU on {slots} CPUs; ideal wall {ideal:.1f} s; "
        f"Ray start-up ({startup:.1f} s) excluded from every row; medians of {args.repeats} "
        f"interleaved "
        f"repeat(s); load average at the end {load:.1f}\n"
    )
    print(f"{'':40s} {'wall s':>8s} {'vs fastest raw':>15s} {'utilization':>12s}")
    out = {
        "trials": n,
        "trial_seconds": seconds,
        "slots": slots,
        "ideal_wall_s": ideal,
        "ray_startup_s": startup,
        "repeats": args.repeats,
        "load_average": load,
        "samples": samples,
        "rows": {},
    }
    for name, wall in rows.items():
        util = n * seconds / (slots * wall)
        print(f"{name:40s} {wall:8.2f} {wall / fastest_raw:14.3f}x {util:11.1%}")
        out["rows"][name] = {
            "wall_s": wall,
            "ratio_to_fastest_raw": wall / fastest_raw,
            "utilization": util,
        }
    whole_util = whole_n * seconds / (slots * whole)
    print(
        f"{'plan run, whole run (' + str(whole_n) + ' trials)':40s} {whole:8.2f} {'':>15s} "
        f"{whole_util:11.1%}"
        f"   (ideal {math.ceil(whole_n / slots) * seconds:.1f} s)"
    )
    print(
        f"{'plan run, confirmation phase (4 trials)':40s} {confirm_wall:8.2f}"
        f"   (ideal {math.ceil(4 / slots) * seconds:.1f} s)"
    )
    span = statistics.median(spans)
    print(
        f"{'plan run, tuning: first start to last end':40s} {span:8.2f} {'':>15s} "
        f"{n * seconds / (slots * span):11.1%}"
        "   (the steady state, without Tune's start-up)"
    )
    out["plan_run_tuning_busy_span"] = {"wall_s": span, "utilization": n * seconds / (slots * span)}
    out["plan_run_whole"] = {
        "trials": whole_n,
        "wall_s": whole,
        "utilization": whole_util,
        "confirm_phase_s": confirm_wall,
    }
    target_ok = rows["plan run, tuning phase"] <= 1.05 * fastest_raw
    print(
        f"\ntarget: plan run within 5% of the fastest raw Tune: "
        f"{'met' if target_ok else 'NOT met'}; "
        f"utilization >= 85%: "
        f"{'met' if out['rows']['plan run, tuning phase']['utilization'] >= 0.85 else 'NOT met'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
