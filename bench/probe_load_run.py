"""Probe: where `load_run`'s time goes on the benchmark run (10,000 trials x 100 reports), stage by
stage.

Each line adds one stage of planner's reader to the one before, the cyclic collector paused as
`load_run` pauses it; CPU seconds of this process:
  - orjson's parse of every line of trials.jsonl (what the floor of bench/bench_report.py pays);
  - msgspec's untyped parse of every line (the same, by the library the schema uses);
  - planner's decode: every line straight into its typed schema (msgspec), with the bounds checks;
  - the same through the run folder's reader (`iter_trials`);
  - the reports stored into the collector's typed buffers and the frames built.

With `--libraries`, the schema's candidates side by side instead, each in a fresh process that
decodes and validates every line of the same file (CPU s and peak MiB of that process, imports
included): msgspec into the typed dicts planner uses, msgspec into Structs of the same fields,
pydantic's TypeAdapter over the same typed dicts, and the floor's orjson parse.

    PYTHONPATH=. python bench/probe_load_run.py [--keep DIR] [--libraries]
"""

from __future__ import annotations

import argparse
import gc
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_report import bench_run  # noqa: E402


def _stages(run_dir: Path) -> list[tuple[str, Any]]:
    import msgspec
    import orjson

    from planner._results import tables
    from planner._store import read, schema

    path = run_dir / "trials.jsonl"
    folder = read.open_run(run_dir)
    untyped = msgspec.json.Decoder()

    def parse():
        for line in open(path, "rb"):
            orjson.loads(line)

    def parse_msgspec():
        for line in open(path, "rb"):
            untyped.decode(line)

    def decoded():
        for number, line in enumerate(open(path, "rb"), start=1):
            schema.decode("trials.jsonl", line, f"line {number}")

    def through_reader():
        for _ in folder.iter_trials([]):
            pass

    def collected():
        collector = tables._Collector(folder.contract(), want_reports=True)
        for record in folder.iter_trials([]):
            collector.add(record)
        collector.frames()

    return [
        ("orjson parse", parse),
        ("msgspec parse (untyped)", parse_msgspec),
        ("decoded into the schema, bounds checked", decoded),
        ("the same through iter_trials", through_reader),
        ("+ collector buffers and frames", collected),
    ]


def _libraries(run_dir: Path) -> list[tuple[str, Any]]:
    """The schema's candidates, each over every line of trials.jsonl (built from planner's own
    types)."""
    import msgspec
    import pydantic
    from typing_extensions import TypedDict

    from planner._core import records

    path = run_dir / "trials.jsonl"

    def as_struct(name: str, typed: Any) -> Any:
        hints = typed.__annotations__
        fields = [
            (k, v, None) if k not in typed.__required_keys__ else (k, v) for k, v in hints.items()
        ]
        return msgspec.defstruct(name, sorted(fields, key=len), module=records.__name__)

    # pydantic wants typing_extensions' TypedDict on Python < 3.12: the same fields, redeclared
    def as_pydantic(name: str, typed: Any, nested: dict[str, Any]) -> Any:
        hints = {k: nested.get(k, v) for k, v in typed.__annotations__.items()}
        return TypedDict(name, hints, total=False)  # type: ignore[operator]

    ns = vars(records)
    report = as_struct("Report", _resolved(records.Report, ns))
    error = as_struct("TrialError", _resolved(records.TrialError, ns))
    split_group = as_struct("SplitGroup", _resolved(records.SplitGroup, ns))
    split_hints = _resolved(records.Split, ns)
    split_hints.__annotations__["groups"] = dict[str, split_group] | None
    split = as_struct("Split", split_hints)
    trial_hints = _resolved(records.StoredTrial, ns)
    trial_hints.__annotations__.update(
        reports=list[report] | None, errors=list[error] | None, splits=dict[str, split] | None
    )
    struct = msgspec.json.Decoder(as_struct("StoredTrial", trial_hints))
    typed = msgspec.json.Decoder(records.StoredTrial)
    p_report = as_pydantic("Report", _resolved(records.Report, ns), {})
    p_error = as_pydantic("TrialError", _resolved(records.TrialError, ns), {})
    p_group = as_pydantic("SplitGroup", _resolved(records.SplitGroup, ns), {})
    p_split = as_pydantic("Split", split_hints, {"groups": dict[str, p_group] | None})
    p_trial = as_pydantic(
        "StoredTrial",
        trial_hints,
        {
            "reports": list[p_report] | None,
            "errors": list[p_error] | None,
            "splits": dict[str, p_split] | None,
        },
    )
    adapter = pydantic.TypeAdapter(p_trial)

    import orjson

    def run(decode: Any) -> Any:
        def every_line() -> None:
            for line in open(path, "rb"):
                decode(line)

        return every_line

    return [
        ("orjson parse (the floor's, no schema)", run(orjson.loads)),
        ("msgspec, into typed dicts (planner's)", run(typed.decode)),
        ("msgspec, into Structs", run(struct.decode)),
        ("pydantic TypeAdapter, typed dicts", run(adapter.validate_json)),
    ]


def _resolved(typed: Any, ns: dict[str, Any]) -> Any:
    """A stand-in holding `typed`'s fields with their annotations evaluated (they are strings
    here)."""
    import typing

    class Fields:
        __required_keys__ = typed.__required_keys__

    Fields.__annotations__ = {
        k: (v.__args__[0] if typing.get_origin(v) is typing.Required else v)
        for k, v in typing.get_type_hints(typed, ns, include_extras=True).items()
    }
    return Fields


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", default=None, help="write the benchmark run here and keep it (reused)"
    )
    parser.add_argument(
        "--libraries", action="store_true", help="msgspec and pydantic side by side"
    )
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="probe-load-run-")
    run_dir, _, trials = bench_run(Path(args.keep or tmp.name), 10_000, 100)
    if args.one is not None:  # one candidate, in this fresh process
        label, stage = _libraries(run_dir)[args.one]
        gc.disable()
        start = time.process_time()
        stage()
        used = time.process_time() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"  {label:48s} {used:.3f} s, whole process {time.process_time():.3f} s, {peak:.0f} MiB"
        )
    elif args.libraries:
        print(f"{trials} trials; CPU s of the decode, of the whole process, its peak memory")
        for i in range(4):
            sys.stdout.flush()
            subprocess.run(
                [sys.executable, __file__, "--keep", str(run_dir.parent), "--one", str(i)],
                check=True,
            )
    else:
        gc.disable()
        print(f"{trials} trials; CPU s, each stage one more")
        for label, stage in _stages(run_dir):
            start = time.process_time()
            stage()
            print(f"  {label:48s} {time.process_time() - start:.3f}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
