"""Probe: an embedded Ray's start with and without Ray prestarting workers for its first driver.

Ray holds the first driver's registration (inside ray.init) until the workers it prestarts for it
have registered (`prestart_worker_first_driver`, on by default). Each start runs in a fresh child
process, alternately with Ray's default and with it off, and times ray.init and then two tasks
(what the first trials wait for).

    PYTHONPATH=. python bench/probe_ray_prestart.py [--starts 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
import ray
from planner._dispatch import ray_shutdown, ray_start
config = dict(ray_start.EMBEDDED_SYSTEM_CONFIG)
if sys.argv[1] == "off":
    config["prestart_worker_first_driver"] = False
t = time.perf_counter()
ray_start.start_local_ray(_system_config=config, log_to_driver=False)
up = time.perf_counter() - t
@ray.remote
def task():
    return 1
t = time.perf_counter()
ray.get([task.remote() for _ in range(2)])
first = time.perf_counter() - t
ray_shutdown._shutdown()
print(f"{up:.2f} {first:.2f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print("| prestart | ray.init s | two first tasks s | both s |\n|---|---:|---:|---:|")
    for _ in range(args.starts):
        for side in ("on", "off"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, side],
                env=env,
                cwd="/",
                capture_output=True,
                text=True,
                check=True,
            )
            up, first = map(float, out.stdout.split()[-2:])
            print(f"| {side} | {up:.2f} | {first:.2f} | {up + first:.2f} |")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
