"""How long `plan validate` takes next to the floor of importing what it needs.

Times, in fresh processes and interleaved so that machine load hits all alike:
  - floor:    python -c "import hydra, pydantic"   (the target's floor; pydantic's import is lazy here)
  - models:   python -c "import hydra; from pydantic import BaseModel"   (what using pydantic models costs)
  - validate: python -m planner validate valid/optimizer-tuned.yaml (two config-group options: two composes)
and prints the medians and the ratios. The target is validate within 1.5x of the floor.

    python bench/bench_validate.py [--runs 10] [--contract PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "contracts"
TARGET = 1.5


def _time(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--contract", type=Path, default=SHARED / "valid" / "optimizer-tuned.yaml")
    args = parser.parse_args()
    contract = args.contract.resolve()
    # run from the folder above the contract's, where the shared examples' trainable (toy.py) imports
    cwd = contract.parent.parent
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    commands = {
        "import floor (import hydra, pydantic)": [sys.executable, "-c", "import hydra, pydantic"],
        "import hydra; from pydantic import BaseModel": [sys.executable, "-c", "import hydra; from pydantic import BaseModel"],
        f"plan validate {contract.name}": [sys.executable, "-m", "planner", "validate", str(contract)],
    }
    for argv in commands.values():  # warm the file cache
        _time(argv, cwd, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(_time(argv, cwd, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    floor, models, validate = medians.values()
    for name, value in medians.items():
        print(f"{name}: median {value:.3f} s over {args.runs} runs")
    ratio = validate / floor
    print(f"ratio validate / floor: {ratio:.2f} (target <= {TARGET}); validate / models: {validate / models:.2f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
