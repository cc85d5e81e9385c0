"""The fault table: run the fault-injection suite against a real local Ray and tabulate what it
measured.

    PYTHONPATH=. python bench/bench_faults.py [-k EXPR]

Every row comes from a real run of tests/e2e/test_faults.py: each test appends what it
injected and what it found (trials lost, trials duplicated, whether the decision is
the unfaulted run's) to a JSON-lines log, and this script sums the log per fault.
Nothing here is typed in: a fault whose test did not run or failed has no row or a
failing mark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def table(rows: list[dict]) -> str:
    by_fault: dict[str, dict] = {}
    for row in rows:
        entry = by_fault.setdefault(
            row["fault"], {"injected": 0, "lost": 0, "duplicated": 0, "unchanged": [], "runs": 0}
        )
        entry["injected"] += row["injected"]
        entry["lost"] += row["lost"]
        entry["duplicated"] += row["duplicated"]
        entry["runs"] += 1
        if row["decision_unchanged"] is not None:
            entry["unchanged"].append(bool(row["decision_unchanged"]))
    lines = [
        "| fault | times injected | trials lost | trials duplicated | decision unchanged |",
        "|---|---:|---:|---:|---|",
    ]
    for fault, e in by_fault.items():
        unchanged = (
            "n/a"
            if not e["unchanged"]
            else "yes"
            if all(e["unchanged"])
            else f"NO ({e['unchanged'].count(False)} of {len(e['unchanged'])})"
        )
        lines.append(
            f"| {fault} | {e['injected']} | {e['lost']} | {e['duplicated']} | {unchanged} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default=None, help="pytest -k expression: a subset of the faults")
    parser.add_argument(
        "--from-log",
        default=None,
        metavar="FILE",
        help="tabulate the log of an earlier run (PLANNER_FAULT_LOG=FILE pytest "
        "tests/e2e/test_faults.py)",
    )
    args = parser.parse_args(argv)
    if args.from_log:
        rows = [
            json.loads(line)
            for line in Path(args.from_log).read_text().splitlines()
            if line.strip()
        ]
        print(table(rows))
        print(f"\n({len(rows)} faulted runs, from {args.from_log})")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "faults.jsonl"
        env = {**os.environ, "PLANNER_FAULT_LOG": str(log), "PYTHONPATH": str(REPO)}
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/e2e/test_faults.py",
        ]
        if args.k:
            command += ["-k", args.k]
        done = subprocess.run(command, cwd=REPO, env=env)
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    print()
    print(table(rows))
    print(f"\n(pytest exit code {done.returncode}; {len(rows)} faulted runs)")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
