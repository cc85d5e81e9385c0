"""Probe: what a columnar encoding of the reports in trials.jsonl would buy `load_run` (not what
planner writes).

trials.jsonl holds each trial's reports as rows, `[{"step": 1, "metrics": {...}, "time_s": 0.5},
...]` (docs/run-folder.md). Reading them costs Python work on every report mapping after orjson has
built it, which is what keeps `load_run` above its goal (floor + 0.5 s, bench/bench_report.py).
This probe writes a copy of the benchmark run's trials.jsonl with each trial's reports as columns,
`{"step": [...], "time_s": [...], "metrics": {"val_acc": [...], ...}}`, and times, each in a fresh
child process (CPU s, median of --repeat, interleaved like bench_report.py):

  - the floor of each encoding: import orjson, pandas, matplotlib; orjson-parse the file;
  - the least a reader of each encoding does: parse, take the reports into numpy columns with the
    type checks planner's reader makes (steps whole numbers, values numbers or "nan"), keep the
    other fields;
  - `load_run(reports=False)`: planner's reader without the reports frame (the reports are still
    parsed and checked; the schema checks, events.jsonl, the trials frame and the facts are all
    there);
  - `load_run` today.

The columns are this probe's own and are written nowhere else; the figures say what a change of the
run folder's format (a breaking change for anyone who reads trials.jsonl) would be worth before
anyone makes it.

    PYTHONPATH=. python bench/probe_columnar.py [--keep DIR] [--repeat 3]
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

from bench.bench_report import bench_run, measure

# The least a reader does: every value reaches a numpy column, its types checked by the set of its
# element types (as planner/_store/schema.py checks them), every other field kept.
_LEAST = """
import gc, sys, orjson, numpy as np, pandas, matplotlib
from operator import itemgetter
gc.disable()
columnar = sys.argv[2] == "columnar"
parts = itemgetter("step", "time_s", "metrics")
steps, times, values, kept = [], [], {}, []
for line in open(sys.argv[1], "rb"):
    r = orjson.loads(line)
    rep = r.pop("reports", None) or ([] if not columnar else {"step": [], "time_s": [], "metrics": {}})
    if columnar:
        s, t, m = rep["step"], rep["time_s"], rep["metrics"]
    else:
        s, t, mets = zip(*map(parts, rep)) if rep else ((), (), ())
        m = {n: [x.get(n) for x in mets] for n in sorted(set().union(*mets))}
    assert set(map(type, s)) <= {int}
    steps.append(np.array(s, dtype=np.int64))
    times.append(np.array(t, dtype=np.float64))
    for name, vals in m.items():
        assert set(map(type, vals)) <= {int, float, str, type(None)}
        values.setdefault(name, []).append(np.array(vals, dtype=np.float64))
    kept.append(r)
np.concatenate(steps)
"""


def columnar_copy(src: Path, dst: Path) -> None:
    """`src` (a trials.jsonl) with each record's reports as columns (a metric absent from a report:
    null)."""
    with open(src, "rb") as rows, open(dst, "wb") as out:
        for line in rows:
            record = orjson.loads(line)
            reports = record.get("reports") or []
            names = sorted(set().union(*(r.get("metrics") or {} for r in reports)))
            record["reports"] = {
                "step": [r.get("step") for r in reports],
                "time_s": [r.get("time_s") for r in reports],
                "metrics": {n: [(r.get("metrics") or {}).get(n) for r in reports] for n in names},
            }
            out.write(orjson.dumps(record) + b"\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep",
        default=None,
        help="the benchmark run's folder's parent (as bench_report.py --keep)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="probe-columnar-")
    base = Path(args.keep) if args.keep else Path(tmp.name)
    run_dir, _, n_trials = bench_run(base, 10_000, 100)
    rows = run_dir / "trials.jsonl"
    columns = Path(tmp.name) / "trials-columnar.jsonl"
    columnar_copy(rows, columns)
    py = sys.executable
    floor = (
        "import orjson, pandas, matplotlib\nfor line in open({!r}, 'rb'):\n    orjson.loads(line)"
    )
    cases = [
        ("floor, rows (as a run writes it)", [py, "-c", floor.format(str(rows))]),
        ("floor, columns", [py, "-c", floor.format(str(columns))]),
        ("least reader, rows", [py, "-c", _LEAST, str(rows), "rows"]),
        ("least reader, columns", [py, "-c", _LEAST, str(columns), "columnar"]),
        (
            "load_run(reports=False), rows",
            [py, "-c", f"from planner import load_run; load_run({str(run_dir)!r}, reports=False)"],
        ),
        ("load_run, rows", [py, "-c", f"from planner import load_run; load_run({str(run_dir)!r})"]),
    ]
    runs: dict[str, list[float]] = {label: [] for label, _ in cases}
    for _ in range(args.repeat):
        for label, cmd in cases:
            runs[label].append(measure(cmd)[1])
    cpu = {label: statistics.median(v) for label, v in runs.items()}
    mib = rows.stat().st_size / 2**20, columns.stat().st_size / 2**20
    print(
        f"{n_trials} trials x 100 reports; trials.jsonl {mib[0]:.0f} MiB as rows, {mib[1]:.0f} "
        f"MiB as columns "
        f"({mib[0] / mib[1]:.1f}x smaller). CPU s, median of {args.repeat}.\n"
    )
    print("| what | CPU s |\n|---|---:|")
    for label, _ in cases:
        print(f"| {label} | {cpu[label]:.2f} |")
    rows_extra = cpu["least reader, rows"] - cpu["floor, rows (as a run writes it)"]
    cols_extra = cpu["least reader, columns"] - cpu["floor, columns"]
    today = cpu["load_run, rows"] - cpu["floor, rows (as a run writes it)"]
    frame = cpu["load_run, rows"] - cpu["load_run(reports=False), rows"]
    print(
        f"\nthe reports' columns beyond each encoding's parse: rows {rows_extra:+.2f} s, columns "
        f"{cols_extra:+.2f} s"
    )
    print(
        f"load_run today: floor {today:+.2f} s, of which the reports frame {frame:.2f} s (the "
        f"rest: the checks, "
        "the slimmed records, events.jsonl, the trials frame, the facts)"
    )
    print(
        f"load_run with columns, estimated: its floor {today - (rows_extra - cols_extra):+.2f} s "
        "(today's excess less what the columns save the least reader; target <= +0.5 s)"
    )
    tmp.cleanup()


if __name__ == "__main__":
    main()
