"""`make bench`: every figure of issue 23's table, its floor beside it and the ratio, in one run.

    python bench/run_all.py [--before PATH] [--repeat 3] [--trials 10000] [--reports 100] [--large]
                            [--skip-run] [--scripts]

Each figure is measured in fresh child processes (imports count, as a user pays them), by wall clock
and by the child's CPU time and peak memory (os.wait4's rusage: CPU time is steadier than wall time
on a shared machine). With `--before PATH` (a checkout of planner, e.g. the commit before a change),
every case runs twice, once with PYTHONPATH=PATH and once with this checkout, interleaved (one
round of every case, then the next), so both sides see the same machine at the same load; medians
are printed.

Rows (the floor is what any tool doing the same job pays):
  - whole `plan run`, 20 trials x 1 s on 2 slots (an embedded Ray started and stopped included),
    wall; ideal ceil(20 / 2) x 1 s;
  - marginal cost of one more trivial trial (3 steps): wall of a run of N2 trials minus one of N1,
    over N2 - N1 (default 30 -> 130; `--large`: 110 -> 610, the issue's sizes);
  - driver memory per extra trial: the peak RSS of the `plan run` process (Ray's own processes
    apart) at N2 minus N1, over N2 - N1;
  - `plan report --format html` on a synthetic run of `--trials` x `--reports`, CPU, and `load_run`
    on it, against the floor: import orjson and pandas and orjson-parse trials.jsonl;
  - `plan validate` of a two-arm Hydra-folder contract, wall and CPU, against
    `python -c "import hydra; from pydantic import BaseModel"`.
`--skip-run` leaves out the three `plan run` rows (about a minute each side). `--scripts` also runs
the other bench_*.py scripts after the table, as `make bench` did before.
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
ARMS = ("sgd", "adam", "adamw", "lion")
SEEDS = 10

TRIVIAL = """
import time


def train(config, trial):
    noise = (trial.seed % 97) * 1e-6  # the seed varies the run: a run whose seeds change nothing is invalid
    for step in range(1, config["steps"] + 1):
        time.sleep(config["sleep"])
        trial.report(step, score=config["lr"] * step + noise)
"""

# the driver of `plan run` in this process, so that ru_maxrss is the driver's alone (Ray's raylet,
# GCS and workers are other processes); the peak is printed as the last line, then the process ends
# as `plan` ends (planner._cli.main: a checkout without `_exit_now` exits the ordinary way)
DRIVER = textwrap.dedent("""
    import json, resource, sys
    from planner._cli import main as cli
    code = cli.main(sys.argv[1:])
    if code not in (0, None):
        raise SystemExit(code)
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"driver_maxrss_kib": own.ru_maxrss, "driver_cpu_s": own.ru_utime + own.ru_stime}), flush=True)
    getattr(cli, "_exit_now", lambda code: None)(code)
""")


@dataclass
class Sample:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_mib: list[float] = field(default_factory=list)
    extra: list[dict] = field(default_factory=list)

    def median(self, what: str) -> float:
        return statistics.median(getattr(self, what))


def measure(cmd: list[str], pythonpath: Path, cwd: Path = ROOT) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak MiB, stdout) of one child process with PYTHONPATH=`pythonpath`.

    `cwd` must hold no planner: `python -m` and `-c` put it first on sys.path, before PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise SystemExit(
            f"benchmark command failed ({code}) with PYTHONPATH={pythonpath}: {' '.join(cmd)}\n"
            f"{stderr[-2000:]}"
        )
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout


def run_cases(
    cases: dict[str, Callable[[Path], list[str]]],
    sides: dict[str, Path],
    repeat: int,
    cwd: Path = ROOT,
) -> dict[tuple[str, str], Sample]:
    """Every case on every side, `repeat` interleaved rounds: {(case, side): Sample}."""
    samples = {(case, side): Sample() for case in cases for side in sides}
    floors = [c for c in cases if c.startswith("floor")]
    for argv in [cases[c](ROOT) for c in floors]:  # warm the file cache
        measure(argv, ROOT, cwd)
    for _ in range(repeat):
        for case, make in cases.items():
            for side, path in sides.items() if case not in floors else [("after", ROOT)]:
                wall, cpu, peak, stdout = measure(make(path), path, cwd)
                s = samples[(case, side)]
                s.wall.append(wall)
                s.cpu.append(cpu)
                s.peak_mib.append(peak)
                last = stdout.strip().splitlines()[-1:] if stdout.strip() else []
                if last and last[0].startswith("{"):
                    s.extra.append(json.loads(last[0]))
    for case in floors:  # the floor is one process whatever the side
        for side in sides:
            samples[(case, side)] = samples[(case, "after")]
    return samples


# ---------------------------------------------------------------- the cases


def synthetic_run(base: Path, trials: int, reports: int) -> Path:
    """The synthetic run folder under `base` (written by this checkout's bench/synthetic_run.py)."""
    run_dir = base / "20261129-181700-bench"
    if not (run_dir / "trials.jsonl").is_file():
        tune_trials = (trials - len(ARMS) * SEEDS) // len(ARMS)
        code = (
            f"from bench.synthetic_run import make_run; make_run({str(run_dir)!r}, arms={ARMS!r}, "
            f"seeds={SEEDS}, tune_trials={tune_trials}, reports_per_trial={reports}, "
            f"early_stopped=0.0)"
        )
        measure([PY, "-c", code], ROOT)
    return run_dir


def report_cases(run_dir: Path, out: Path) -> dict[str, Callable[[Path], list[str]]]:
    jsonl = str(run_dir / "trials.jsonl")
    return {
        "floor: import orjson, pandas; orjson-parse trials.jsonl": lambda _: [
            PY,
            "-c",
            f"import orjson, pandas\nfor line in open({jsonl!r}, 'rb'):\n    orjson.loads(line)",
        ],
        "load_run": lambda _: [
            PY,
            "-c",
            f"from planner import load_run; r = load_run({str(run_dir)!r}); "
            "assert len(r.reports) > 0",
        ],
        "plan report --format html": lambda p: [
            PY,
            "-m",
            "planner",
            "report",
            str(run_dir),
            "--format",
            "html",
            "--force",
            "-o",
            str(out / f"{p.name}.html"),
        ],
    }


def validate_cases(contract: Path) -> dict[str, Callable[[Path], list[str]]]:
    return {
        "floor: import hydra; from pydantic import BaseModel": lambda _: [
            PY,
            "-c",
            "import hydra; from pydantic import BaseModel",
        ],
        "plan validate": lambda _: [PY, "-m", "planner", "validate", str(contract)],
    }


def write_run_contract(
    folder: Path, name: str, tune_per_arm: int, seeds: int, steps: int, sleep: float
) -> Path:
    (folder / "bench_trivial.py").write_text(TRIVIAL)
    contract = folder / f"{name}.yaml"
    contract.write_text(
        textwrap.dedent(f"""
        version: 1
        name: {name}
        hypothesis: Overhead only.
        trainable: bench_trivial:train
        config: {{values: {{sleep: {sleep}, steps: {steps}, lr: 0.1, arm: a}}}}
        factor: {{name: arm}}
        baseline: {{name: a, overrides: [arm=a]}}
        arms: [{{name: b, overrides: [arm=b]}}]
        metric: {{name: score, mode: max}}
        acceptance: {{min_effect: 0.01}}
        seeds: {list(range(seeds))}
        budget: {{exposure: {steps}}}
        tuning:
          trials_per_arm: {tune_per_arm}
          seeds: [100]
          sampler: {{name: random, seed: 0}}
          space: {{lr: {{log_uniform: [1.0e-4, 1.0]}}}}
        """)
    )
    return contract


# what a user would write instead of the small ablation: one embedded Ray, 10 trials tuned by
# Optuna in one Ray Tune run (its actors reused, as a careful user sets it; Tune's default starts
# one per trial), 10 fixed-config trials as Ray tasks, Ray shut down; each trial sleeps 1 s and
# reports once
RAW_TUNE = textwrap.dedent("""
    import time
    import ray
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    def trainable(config):
        time.sleep(1.0)
        tune.report({"score": config["lr"]})

    @ray.remote(num_cpus=1)
    def fixed(lr, seed):
        time.sleep(1.0)
        return lr + seed * 1e-6

    ray.init(include_dashboard=False, configure_logging=False, log_to_driver=False)
    grid = tune.Tuner(tune.with_resources(trainable, {"cpu": 1}), param_space={"lr": tune.loguniform(1e-4, 1.0)},
                      tune_config=tune.TuneConfig(search_alg=OptunaSearch(seed=0), num_samples=10,
                                                  metric="score", mode="max", reuse_actors=True),
                      run_config=tune.RunConfig(verbose=0)).fit()
    best = grid.get_best_result().config["lr"]
    ray.get([fixed.remote(best, seed) for seed in range(10)])
    ray.shutdown()
""")


RAY_ALONE = (
    "import ray; ray.init(include_dashboard=False, configure_logging=False, "
    "log_to_driver=False); ray.shutdown()"
)


def run_case(contract: Path, runs: Path) -> Callable[[Path], list[str]]:
    return lambda p: [
        PY,
        "-c",
        DRIVER,
        "run",
        str(contract),
        "--runs-dir",
        str(runs / p.name),
        "--quiet",
    ]


# ---------------------------------------------------------------- the table


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def table_rows(
    args: argparse.Namespace, sides: dict[str, Path], tmp: Path
) -> list[tuple[str, str, dict, str]]:
    """(figure, floor, {side: (value, ratio)}, goal) rows, measured."""
    rows: list[tuple[str, str, dict, str]] = []
    if not args.skip_run:
        rows += _run_rows(args, sides, tmp)
    run_dir = synthetic_run(Path(args.keep) if args.keep else tmp, args.trials, args.reports)
    out = tmp / "reports"
    out.mkdir(exist_ok=True)
    # The report rows read a journal read before: its entry is in a read cache of this benchmark's
    # own, made here (bench/bench_report.py also measures the first read and the cache off).
    os.environ["PLANNER_CACHE_DIR"] = str(tmp / "read-cache")
    measure(report_cases(run_dir, out)["load_run"](ROOT), ROOT, cwd=out)
    rep = run_cases(
        report_cases(run_dir, out), sides, args.repeat, cwd=out
    )  # cwd: no planner on sys.path[0]
    floor_name = next(c for c, _ in rep if c.startswith("floor"))
    floor = rep[(floor_name, "after")]
    fcpu = floor.median("cpu")
    size = f"{args.trials} trials x {args.reports} reports"
    html = {s: rep[("plan report --format html", s)] for s in sides}
    rows.append(
        (
            f"`plan report --format html`, {size}, CPU s (peak MiB)",
            f"{fcpu:.2f} s (import orjson+pandas, orjson-parse; {floor.median('peak_mib'):.0f} "
            f"MiB)",
            {
                s: (f"{h.median('cpu'):.2f} ({max(h.peak_mib):.0f})", _ratio(h.median("cpu"), fcpu))
                for s, h in html.items()
            },
            "<= 2.5x, < 512 MiB",
        )
    )
    load = {s: rep[("load_run", s)] for s in sides}
    rows.append(
        (
            "`load_run`, same folder, CPU s (peak MiB)",
            f"{fcpu:.2f} s (the same floor)",
            {
                s: (
                    f"{v.median('cpu'):.2f} ({max(v.peak_mib):.0f})",
                    _ratio(v.median("cpu"), fcpu),
                )
                for s, v in load.items()
            },
            "<= 2x",
        )
    )
    contract = ROOT / "examples" / "contracts" / "valid" / "optimizer-tuned.yaml"
    val = run_cases(
        validate_cases(contract), sides, args.validate_repeat, cwd=contract.parent.parent
    )
    vfloor = val[("floor: import hydra; from pydantic import BaseModel", "after")]
    for what in ("wall", "cpu"):
        f = vfloor.median(what)
        rows.append(
            (
                f"`plan validate` two-arm Hydra-folder contract, {what} s",
                f"{f:.3f} s (import hydra; from pydantic import BaseModel)",
                {
                    s: (
                        f"{val[('plan validate', s)].median(what):.3f}",
                        _ratio(val[("plan validate", s)].median(what), f),
                    )
                    for s in sides
                },
                "<= 1.5x",
            )
        )
    return rows


def _run_rows(
    args: argparse.Namespace, sides: dict[str, Path], tmp: Path
) -> list[tuple[str, str, dict, str]]:
    folder = tmp / "contracts"
    folder.mkdir()
    small = write_run_contract(folder, "ablation", tune_per_arm=5, seeds=5, steps=1, sleep=1.0)
    n1, n2 = (110, 610) if args.large else (30, 130)
    few = write_run_contract(
        folder, f"trivial{n1}", tune_per_arm=(n1 - 10) // 2, seeds=5, steps=3, sleep=0.0
    )
    many = write_run_contract(
        folder, f"trivial{n2}", tune_per_arm=(n2 - 10) // 2, seeds=5, steps=3, sleep=0.0
    )
    cases = {
        "ablation": run_case(small, tmp / "runs"),
        "few": run_case(few, tmp / "runs"),
        "many": run_case(many, tmp / "runs"),
        "raw Ray Tune": lambda _: [PY, "-c", RAW_TUNE],
        "Ray alone": lambda _: [PY, "-c", RAY_ALONE],
    }
    got = run_cases(cases, sides, args.run_repeat, cwd=folder)
    ideal = math.ceil(20 / 2) * 1.0
    raw = got[("raw Ray Tune", "after")].median("wall")
    ray_alone = got[("Ray alone", "after")].median("wall")
    rows = [
        (
            "whole `plan run`, 20 trials x 1 s on 2 slots, wall s",
            f"{ideal:.0f} s (ceil(20/2) x 1 s)",
            {
                s: (
                    f"{got[('ablation', s)].median('wall'):.1f}",
                    _ratio(got[("ablation", s)].median("wall"), ideal),
                )
                for s in sides
            },
            "<= 1.4x",
        ),
        (
            "the same, against plain Ray Tune doing it (10 trials by Optuna in a Tuner, 10 as Ray "
            "tasks, "
            "embedded Ray started and stopped), wall s",
            f"{raw:.1f} s (plain Ray Tune)",
            {
                s: (
                    f"{got[('ablation', s)].median('wall'):.1f}",
                    _ratio(got[("ablation", s)].median("wall"), raw),
                )
                for s in sides
            },
            "-",
        ),
        (
            "the same, against the ideal plus an embedded Ray's own start and stop (ray.init; "
            "ray.shutdown), wall s",
            f"{ideal + ray_alone:.1f} s ({ideal:.0f} s + {ray_alone:.1f} s)",
            {
                s: (
                    f"{got[('ablation', s)].median('wall'):.1f}",
                    _ratio(got[("ablation", s)].median("wall"), ideal + ray_alone),
                )
                for s in sides
            },
            "-",
        ),
    ]
    per_trial, memory = {}, {}
    for s in sides:
        a, b = got[("few", s)], got[("many", s)]
        per_trial[s] = (f"{(b.median('wall') - a.median('wall')) / (n2 - n1) * 1000:.0f} ms", "")
        ka = statistics.median(e["driver_maxrss_kib"] for e in a.extra)
        kb = statistics.median(e["driver_maxrss_kib"] for e in b.extra)
        memory[s] = (
            f"{(kb - ka) / (n2 - n1):.0f} KiB ({ka / 1024:.0f} -> {kb / 1024:.0f} MiB)",
            "",
        )
    rows.append(
        (
            f"marginal wall per trivial trial ({n1} -> {n2} trials of 3 steps)",
            "Ray Core: ~1,600 tasks/s",
            per_trial,
            "<= 30 ms",
        )
    )
    rows.append((f"driver memory per extra trial ({n1} -> {n2})", "-", memory, "<= 20 KiB"))
    return rows


def print_table(rows: list[tuple[str, str, dict, str]], sides: dict[str, Path]) -> None:
    head = "| figure | floor / ideal | " + " | ".join(f"{s} | ratio" for s in sides) + " | goal |"
    print(head)
    print("|" + "---|" * (3 + 2 * len(sides)))
    for figure, floor, values, goal in rows:
        cells = " | ".join(f"{values[s][0]} | {values[s][1]}" for s in sides)
        print(f"| {figure} | {floor} | {cells} | {goal} |", flush=True)


def run_scripts() -> list[str]:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n## {script.stem}\n", flush=True)
        if subprocess.run([PY, str(script)], cwd=ROOT).returncode != 0:
            failed.append(script.name)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", type=Path, default=None, help="a planner checkout to measure beside this one"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the report rows (medians)")
    parser.add_argument(
        "--validate-repeat", type=int, default=7, help="rounds of the validate rows"
    )
    parser.add_argument("--run-repeat", type=int, default=1, help="rounds of the plan run rows")
    parser.add_argument(
        "--trials", type=int, default=10_000, help="trials of the synthetic run the reports read"
    )
    parser.add_argument(
        "--reports", type=int, default=100, help="reports per trial of the synthetic run"
    )
    parser.add_argument(
        "--large", action="store_true", help="the marginal rows at 110 -> 610 trials"
    )
    parser.add_argument("--skip-run", action="store_true", help="leave out the plan run rows")
    parser.add_argument(
        "--keep", default=None, help="write the synthetic run here and keep it (reused)"
    )
    parser.add_argument(
        "--scripts", action="store_true", help="also run every bench_*.py after the table"
    )
    args = parser.parse_args(argv)
    sides = (
        {"after": ROOT} if args.before is None else {"before": args.before.resolve(), "after": ROOT}
    )
    import compileall  # byte-compile as an install would: no side pays for compiling planner

    for path in sides.values():
        compileall.compile_dir(str(path / "planner"), quiet=1)
    start = time.perf_counter()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        rows = table_rows(args, sides, Path(tmp))
    print(
        f"\n{time.strftime('%Y-%m-%d %H:%M %Z')}; {os.cpu_count()} CPUs; load average {load0:.1f} "
        f"at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - start:.0f} s. Medians of "
        f"{args.repeat} "
        f"(reports), {args.validate_repeat} (validate), {args.run_repeat} (plan run) interleaved "
        f"rounds; " + (f"before = {args.before}" if args.before else "this checkout only") + ".\n"
    )
    print_table(rows, sides)
    failed = run_scripts() if args.scripts else []
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
