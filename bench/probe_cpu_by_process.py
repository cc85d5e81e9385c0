"""Probe: where the CPU of a command and everything it starts goes, by kind of process.

Runs the command, samples every process on the machine every 0.3 s (psutil) until it exits, and
prints the CPU seconds each kind of process used: Ray's workers, raylets, GCS and agents, pytest's
workers, `plan` subprocesses, other Python processes (a command trial's script). A process is
counted from its first sighting, its CPU before that included, so one born and gone between two
samples is missed, and a process older than the command is left out. Also printed: each kind's
count, the CPU its processes used in their first 5 s (a Ray worker's start-up imports), and the
machine's busy and idle shares over the run.

    PYTHONPATH=. python bench/probe_cpu_by_process.py -- python -m pytest -q -n 2 tests/e2e

Run it with nothing else on the machine: every process is counted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter

import psutil

# (kind, a text the process's command line holds), the first that matches
KINDS = (
    ("ray raylet", "raylet/raylet"),  # first: its flags name the GCS and the workers' script
    ("ray worker", "default_worker.py"),
    ("ray worker", "ray::"),
    ("ray gcs", "gcs_server"),
    ("ray agents", "dashboard/agent.py"),
    ("ray agents", "runtime_env/agent"),
    ("plan subprocess", "-m planner"),
    ("plan subprocess", "bin/plan"),
    ("pytest", "-m pytest"),
    ("pytest", "sys.stdin.readline"),  # an xdist worker, started by execnet
    ("other python", "python"),
)
YOUNG_S = 5.0


def kind_of(cmdline: list[str]) -> str:
    line = " ".join(cmdline)
    for kind, mark in KINDS:
        if mark in line:
            return kind
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="+", help="the command to run (after --)")
    args = parser.parse_args()

    seen: dict[int, tuple[float, float, str]] = {}  # pid -> (create_time, cpu so far, kind)
    total: Counter[str] = Counter()
    young: Counter[str] = Counter()
    count: Counter[str] = Counter()
    # what ran before the command, by pid and start (psutil's start times can be a second off, so
    # they are compared with themselves only)
    before = {(p.pid, p.info["create_time"]) for p in psutil.process_iter(["create_time"])}
    machine = psutil.cpu_times()
    child = subprocess.Popen(args.command)
    while child.poll() is None:
        now = time.time()
        for proc in psutil.process_iter(["pid", "cmdline", "create_time", "cpu_times"]):
            info = proc.info
            if not info["cmdline"] or (info["pid"], info["create_time"]) in before:
                continue
            cpu = info["cpu_times"].user + info["cpu_times"].system
            known = seen.get(info["pid"])
            if known is None or known[0] != info["create_time"]:
                kind = kind_of(info["cmdline"])
                count[kind] += 1
                gained = cpu  # a process first seen: its CPU so far
            else:
                kind, gained = known[2], cpu - known[1]
            total[kind] += gained
            if now - info["create_time"] < YOUNG_S:
                young[kind] += gained
            seen[info["pid"]] = (info["create_time"], cpu, kind)
        time.sleep(0.3)
    after = psutil.cpu_times()
    spent = sum(after) - sum(machine)
    idle = (after.idle + after.iowait) - (machine.idle + machine.iowait)
    print(f"{'kind':18} {'CPU s':>8} {'share':>6} {'count':>6} {'first 5 s':>10}")
    whole = sum(total.values()) or 1.0
    for kind, seconds in total.most_common():
        print(
            f"{kind:18} {seconds:8.1f} {seconds / whole:6.1%} {count[kind]:6d} {young[kind]:10.1f}"
        )
    print(f"{'all':18} {whole:8.1f}")
    print(f"machine: {1 - idle / spent:.0%} busy, {idle / spent:.0%} idle over the run")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
