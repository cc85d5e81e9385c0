"""Probe: how often an embedded Ray's start loses a second to the raylet's first connection to its
object store.

The raylet starts its object store in a thread and connects to it at once; when the store is not
listening yet, Ray's client sleeps `raylet_client_connect_timeout_milliseconds` (1000 ms by
default) before it tries again. planner's embedded Ray retries every 20 ms for the same ten seconds
(planner._dispatch.ray_start: EMBEDDED_SYSTEM_CONFIG). Each start runs in a fresh child process,
alternately with Ray's default retry ("ray") and with planner's ("planner"); printed: ray.init's
seconds and the gap in the raylet's log between "Plasma store debug dump" and "ObjectManager server
started" (about 1.0 s when the second was lost).

    PYTHONPATH=. python bench/probe_ray_start.py [--starts 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
from datetime import datetime
import ray
from planner._dispatch import ray_shutdown, ray_start
config = dict(ray_start.EMBEDDED_SYSTEM_CONFIG)
if sys.argv[1] == "ray":
    config.pop("raylet_client_connect_timeout_milliseconds")
    config.pop("raylet_client_num_connect_attempts")
t = time.perf_counter()
ray_start.start_local_ray(_system_config=config)
up = time.perf_counter() - t
logs = ray._private.worker._global_node.get_session_dir_path() + "/logs/raylet.out"
ray_shutdown._shutdown()
stamp = lambda line: datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
lines = open(logs).read().splitlines() store = next(stamp(l) for l in lines if "Plasma store debug
dump" in l) manager = next(stamp(l) for l in lines if "ObjectManager server started" in l)
print(json.dumps({"init_s": up, "connect_s": manager - store}))
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=8, help="starts of each kind")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lost = {"ray": 0, "planner": 0}
    print("| start | retry | ray.init s | store connect s |\n|---|---|---:|---:|")
    for i in range(args.starts):
        for kind in ("ray", "planner"):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, kind],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(done.stdout.strip().splitlines()[-1])
            lost[kind] += got["connect_s"] > 0.5
            print(
                f"| {i + 1} | {kind} | {got['init_s']:.2f} | {got['connect_s']:.3f} |", flush=True
            )
    print(
        f"\nstarts that lost the second: Ray's retry {lost['ray']} of {args.starts}, "
        f"planner's {lost['planner']} of {args.starts}"
    )


if __name__ == "__main__":
    main()
