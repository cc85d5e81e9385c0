"""Probe: where `load_run`'s time goes on the benchmark run (10,000 trials x 100 reports), stage by stage.

Each line adds one stage of planner's reader to the one before, the cyclic collector paused as `load_run`
pauses it; CPU seconds of this process:
  - orjson's parse of every line of trials.jsonl (what the floor of bench/bench_report.py pays);
  - planner's `_loads`: the parse with its bounds checks (integers past 64 bits, depth);
  - the schema check of every record, which takes the reports apart into columns;
  - instead, what the reader does: the reports read from the line's text into columns where the C reader
    takes the line (planner/_store/_columns.c, `scan`; the rest of the line parsed and checked), else the above;
  - the same through the run folder's reader (`iter_trial_columns`);
  - the reports stored into the collector's typed buffers and the frames built.

    PYTHONPATH=. python bench/probe_load_run.py [--keep DIR]   (DIR: where bench_report.py keeps the run)
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_report import bench_run  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", default=None, help="write the benchmark run here and keep it (reused)"
    )
    args = parser.parse_args(argv)
    import orjson

    from planner._results import tables
    from planner._store import read, schema

    tmp = tempfile.TemporaryDirectory(prefix="probe-load-run-")
    run_dir, _, trials = bench_run(Path(args.keep or tmp.name), 10_000, 100)
    path = run_dir / "trials.jsonl"
    folder = read.open_run(run_dir)

    def parse():
        for line in open(path, "rb"):
            orjson.loads(line)

    def bounded():
        for line in open(path, "rb"):
            read._loads(line)

    def checked():
        for line in open(path, "rb"):
            schema._trial(read._loads(line))

    def scanned():
        for number, line in enumerate(open(path, "rb"), start=1):
            if read.scanned_trial(line, f"line {number}") is None:
                schema._trial(read._loads(line))

    def through_reader():
        for _ in folder.iter_trial_columns([], None):
            pass

    def collected():
        collector = tables._Collector(folder.contract(), want_reports=True)
        for record, columns in folder.iter_trial_columns([], None):
            collector.add(record, columns)
        collector.frames()

    gc.disable()
    print(f"{trials} trials; CPU s, each line one stage more than the one before:")
    for label, stage in (
        ("orjson parse", parse),
        ("+ bounds checks (_loads)", bounded),
        ("+ schema check, reports into columns", checked),
        ("reports read from the text (C), else the above", scanned),
        ("the same through iter_trial_columns", through_reader),
        ("+ collector buffers and frames", collected),
    ):
        start = time.process_time()
        stage()
        print(f"  {label:48s} {time.process_time() - start:.3f}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
