"""`planner.report(step, **metrics)`: how a script run by `command:` reports metrics.

The planner starts the script with `PLANNER_REPORT_FILE` naming a file; each
call appends one JSON line to it, written in one `write` and flushed at once:

    {"step": 3, "metrics": {"val_acc": 0.91, "loss": 0.25}}

The planner tails that file while the script runs and forwards every line to
the trial (docs/command-trainables.md). Outside the planner the variable is
unset and `report` only checks its arguments, so the script runs standalone
unchanged.

Stdlib only: a user's script pays nothing for importing it (`log_split` loads
numpy when it is first called).
"""

from __future__ import annotations

import json
import numbers
import os

REPORT_FILE_ENV = "PLANNER_REPORT_FILE"

__all__ = ["REPORT_FILE_ENV", "log_split", "report", "report_line"]


def report(step: int, **metrics: float) -> None:
    """Report the metrics reached after `step` units of exposure (epochs, steps).

    `step` is an int, strictly increasing from one call to the next and at most
    the trial's budget (`PLANNER_BUDGET`); each metric is a real number (NaN and
    infinities are allowed: the planner records the trial as diverged).
    Raises TypeError or ValueError on a bad argument, in the script, at the line
    that made it.
    """
    line = report_line(step, metrics)
    path = os.environ.get(REPORT_FILE_ENV)
    if not path:
        return
    # One write of one whole line in append mode: a reader sees whole lines, or a
    # torn last line only if the script is killed mid-write.
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(line)
        stream.flush()


_SPLITS = None  # this process's SplitLog: the splits the script logged so far, for their overlaps


def log_split(name: str, ids, groups=None) -> dict:
    """Log the unit ids of split `name` (rows in order) and optional aligned groups ({"patient":
    [...]}).

    The counts and fingerprints are computed here, in the script, with numpy
    (docs/data.md); the report file gets one JSON line with them and never the
    ids: {"split": "train", "data": {"presentations": ..., "distinct": ...,
    "fingerprint": ..., "groups": {...}, "overlap": {...}}}. Returns that summary.
    Raises ValueError on bad ids, at the line that made them.
    """
    global _SPLITS
    from planner._data.splits import SplitLog

    if _SPLITS is None:
        _SPLITS = SplitLog()
    summary = _SPLITS.add(name, ids, groups)
    path = os.environ.get(REPORT_FILE_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps({"split": name, "data": summary}, separators=(",", ":")) + "\n")
            stream.flush()
    return summary


def report_line(step: int, metrics: dict[str, float]) -> str:
    """The JSON line (newline included) for one report; raises on bad types."""
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"planner.report: step must be an int, got {type(step).__name__} {step!r}")
    if step < 0:
        raise ValueError(f"planner.report: step must be >= 0, got {step}")
    if not metrics:
        raise ValueError(
            "planner.report: give at least one metric, like planner.report(step, val_acc=0.9)"
        )
    clean: dict[str, float] = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            hint = (
                " (call .item() on a one-element tensor or array)" if hasattr(value, "item") else ""
            )
            raise TypeError(
                f"planner.report: metric {name!r} must be a real number, got "
                f"{type(value).__name__} {value!r}{hint}"
            )
        clean[name] = float(value)
    return json.dumps({"step": int(step), "metrics": clean}, separators=(",", ":")) + "\n"
