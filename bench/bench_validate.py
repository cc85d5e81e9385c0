"""How long `plan validate` takes next to the floor of importing what it needs.

Times, in fresh processes and interleaved so that machine load hits both alike:
  - floor:    python -c "import hydra, pydantic"
  - validate: python -m planner validate valid/optimizer-tuned.yaml (two config-group options: two composes)
and prints the medians and their ratio. The target is a ratio within 1.5.

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
    floor_cmd = [sys.executable, "-c", "import hydra, pydantic"]
    validate_cmd = [sys.executable, "-m", "planner", "validate", str(contract)]
    _time(floor_cmd, cwd, env), _time(validate_cmd, cwd, env)  # warm the file cache
    floor, validate = [], []
    for _ in range(args.runs):
        floor.append(_time(floor_cmd, cwd, env))
        validate.append(_time(validate_cmd, cwd, env))
    f, v = statistics.median(floor), statistics.median(validate)
    ratio = v / f
    print(f"import floor (import hydra, pydantic): median {f:.3f} s over {args.runs} runs")
    print(f"plan validate {contract.name}: median {v:.3f} s over {args.runs} runs")
    print(f"ratio: {ratio:.2f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
