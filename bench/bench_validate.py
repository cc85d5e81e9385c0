"""How long `plan validate` takes next to the floor of importing what it needs.

Times, in fresh processes and interleaved so that machine load hits all alike:
  - imports:  python -c "import hydra, pydantic"   (pydantic's import is lazy here: no BaseModel
    yet)
  - floor:    python -c "import hydra; from pydantic import BaseModel"   (what any pydantic + Hydra
    tool pays)
  - validate: python -m planner validate examples/contracts/valid/optimizer-tuned.yaml
              (two arms over a Hydra config folder, two config-group options: two composes)
and prints the medians and the ratios side by side. The target is validate within 1.5x of the
floor, in CPU time (steadier than wall time on a shared machine) and in wall time.

    python bench/bench_validate.py [--runs 10] [--contract PATH] [--before CHECKOUT ...]

With --before, the same validate is timed from another checkout (e.g. a worktree of main, or a
`git archive` of one commit), its runs interleaved with this checkout's, so that a change is
measured before and after under one load; --before may be given more than once (a commit at a time).

It also times, in this process, one compose of the contract's config through `hydra.compose`.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "contracts"
TARGET = 1.5


def _time(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU time is steadier on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--contract", type=Path, default=EXAMPLES / "valid" / "optimizer-tuned.yaml"
    )
    parser.add_argument(
        "--before",
        type=Path,
        action="append",
        default=[],
        help="another checkout whose validate is timed too, interleaved with this one's "
        "(repeatable)",
    )
    parser.add_argument(
        "--no-compose", action="store_true", help="skip the in-process compose comparison"
    )
    args = parser.parse_args()
    contract = args.contract.resolve()
    # run from the folder above the contract's, where the shared examples' trainable (toy.py)
    # imports
    cwd = contract.parent.parent
    # (name, argv, checkout on PYTHONPATH, folder it runs in)
    validate_name = f"plan validate {contract.name}"
    commands = [
        (
            "imports (import hydra, pydantic)",
            [sys.executable, "-c", "import hydra, pydantic"],
            REPO,
            cwd,
        ),
        (
            "floor (import hydra; from pydantic import BaseModel)",
            [sys.executable, "-c", "import hydra; from pydantic import BaseModel"],
            REPO,
            cwd,
        ),
        (validate_name, [sys.executable, "-m", "planner", "validate", str(contract)], REPO, cwd),
    ]
    for before in (path.resolve() for path in args.before):
        # the same contract, as the other checkout has it (its examples, its trainable)
        other = before / contract.relative_to(REPO)
        commands.append(
            (
                f"{validate_name} (before: {before})",
                [sys.executable, "-m", "planner", "validate", str(other)],
                before,
                other.parent.parent,
            )
        )
    for _, _, checkout, _ in commands:
        # byte-compile planner as an install would: with PYTHONDONTWRITEBYTECODE set, a stale .pyc
        # would otherwise be recompiled on every run and counted against validate
        compileall.compile_dir(str(checkout / "planner"), quiet=1)
    envs = {checkout: {**os.environ, "PYTHONPATH": str(checkout)} for _, _, checkout, _ in commands}
    for _, argv, checkout, folder in commands:  # warm the file cache
        _time(argv, folder, envs[checkout])
    wall: dict[str, list[float]] = {name: [] for name, *_ in commands}
    cpu: dict[str, list[float]] = {name: [] for name, *_ in commands}
    for _ in range(args.runs):
        for name, argv, checkout, folder in commands:
            w, c = _time(argv, folder, envs[checkout])
            wall[name].append(w)
            cpu[name].append(c)
    walls = {name: statistics.median(values) for name, values in wall.items()}
    cpus = {name: statistics.median(values) for name, values in cpu.items()}
    for name, *_ in commands:
        print(
            f"{name}: median wall {walls[name]:.3f} s, CPU {cpus[name]:.3f} s over {args.runs} runs"
        )
    imports, floor, validate = (walls[name] for name, *_ in commands[:3])
    cpu_imports, cpu_floor, cpu_validate = (cpus[name] for name, *_ in commands[:3])
    ratio, cpu_ratio = validate / floor, cpu_validate / cpu_floor
    print(
        f"ratio validate / floor: wall {ratio:.2f}, CPU {cpu_ratio:.2f} (target <= {TARGET}); "
        f"validate / imports: wall {validate / imports:.2f}, CPU {cpu_validate / cpu_imports:.2f}"
    )
    for name, *_ in commands[3:]:
        print(
            f"{name}: / floor: wall {walls[name] / floor:.2f}, CPU {cpus[name] / cpu_floor:.2f}; "
            f"this checkout saves wall {(walls[name] - validate) * 1000:.1f} ms, "
            f"CPU {(cpus[name] - cpu_validate) * 1000:.1f} ms (medians)"
        )
    if not args.no_compose:
        _compare_composes(contract, args.runs)
    return 0 if cpu_ratio <= TARGET else 1


def _compare_composes(contract: Path, runs: int) -> None:
    """One compose of the contract's config through `hydra.compose`, in this process (the cost that
    the per-group-override cache saves an arm that differs from another only in values)."""
    sys.path.insert(0, str(REPO))
    import yaml
    from hydra import compose, initialize_config_dir

    config = yaml.safe_load(contract.read_text())["config"]
    config_dir = (contract.parent / config["dir"]).resolve()

    def public() -> None:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            compose(config_name=config["name"])

    public()  # first-call imports and caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        public()
        times.append(time.perf_counter() - start)
    print(f"hydra.compose: median {statistics.median(times) * 1000:.1f} ms per compose")


if __name__ == "__main__":
    raise SystemExit(main())
