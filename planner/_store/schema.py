"""The shape of every file in a run folder, checked as it is read (docs/run-folder.md).

A run folder may come from anyone: a file with the right name and the wrong
shape (`{"state": 5}`, `"reports": [{"step": "a"}]`, `"exposure": 10**400`)
must not reach the code that reads it. Every reader goes through
planner._store.read, which runs the checker of a file's name on what it
parsed; the first field of the wrong type is a `RunError` (exit 3) naming the
file and the field, so every command gives the same verdict on the same folder.

The checks are about types and ranges a reader relies on, not about the
meaning: a field that is absent is fine unless a reader needs it (a trial
record's `trial_id` and `status`; an event's `event`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Any

from planner._core.errors import RunError
from planner._core.records import NON_FINITE

BIG = 2**53  # integers past this are no count, step or pid a run wrote (and overflow float)

try:  # the reports' columns in C (setup.py builds it; optional): the Python twin below where it was not built
    from planner._store._columns import take as _take
    from planner._store._columns import trial_ok as _trial_ok
except ImportError:  # pragma: no cover - depends on the build
    _take = _trial_ok = None


class _Bad(Exception):
    def __init__(self, field: str, wanted: str, value: Any):
        self.field, self.wanted, self.value = field, wanted, value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _str(value: Any, field: str, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _Bad(field, "text", value)


def _int(value: Any, field: str, lo: int = -BIG) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= BIG:
        raise _Bad(
            field,
            f"a whole number from {lo} to 2**53" if lo else "a whole number up to 2**53",
            value,
        )


def _num(value: Any, field: str, finite: bool = True) -> None:
    """A number (int or float); `finite`: NaN and infinities refused, and past 2**53 (no step, count or time is
    that large: 10**30 overflowed the reports); else also spelled "nan", "inf", "-inf", and of any size."""
    if value is None or (not finite and value in NON_FINITE):
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(field, "a number", value)
    if (isinstance(value, int) or finite) and abs(value) > BIG:
        raise _Bad(field, "a number up to 2**53", value)
    if finite and isinstance(value, float) and not math.isfinite(value):
        raise _Bad(field, "a finite number", value)


def _measured(value: Any, field: str) -> None:
    """A finite number of any size (an effect, a CI bound: a run writes null, never NaN, for an undefined one)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(field, "a finite number or null", value)


def _dict(value: Any, field: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(field, "a mapping", value)
    return value


def _list(value: Any, field: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(field, "a list", value)
    return value


def _required(record: dict, fields: tuple[str, ...]) -> None:
    for name in fields:
        if name not in record:
            raise _Bad(name, "present", "(missing)")


@dataclass(frozen=True, slots=True)
class ReportColumns:
    """A trial's reports as columns, already checked: steps, times, the sorted metric names, the last value of
    each, and the values of each metric asked for (`check_trial`'s `metrics`; every one by default) by name.

    Only for the regular case (every report has `step`, `time_s` and the same metrics, steps whole numbers):
    `check_trial` returns None for any other reports, after checking them one by one.
    """

    steps: Sequence  # a list, or (`typed`) an int64 memoryview
    times: Sequence  # a list, or (`typed`) a float64 memoryview: non-numbers as NaN, "inf" as an infinity
    names: list[str]
    last: list
    values: dict[
        str, Sequence
    ]  # lists, or (`typed`) float64 memoryviews: None and "nan" as NaN, "inf" as inf
    numeric: bool = False  # every metric value is a number (no None, no "nan"): a reader converts them as they are
    typed: bool = False  # the columns are typed memoryviews already converted (the C reader's)
    line: bytes | None = (
        None  # the record's line, when its reports were read from the text and not kept
    )


def _trial(r: dict, metrics: frozenset[str] | None = None) -> ReportColumns | None:
    """Check a trial record; its reports as columns when they are regular (else None), with the values of
    `metrics` only (all by default)."""
    fields_ok = _trial_ok is not None and _trial_ok(
        r
    )  # every field but the reports, in C where it was built
    if not fields_ok:
        _trial_fields(r)
    reports = _list(r.get("reports"), "reports")
    columns = _report_columns(reports, metrics)
    if columns is None and not _plain_reports(
        reports
    ):  # the fast checks failed: the slow one names the field
        for i, report in enumerate(reports):
            if not isinstance(report, dict):
                raise _Bad(f"reports[{i}]", "a mapping {step, metrics}", report)
            _num(report.get("step"), f"reports[{i}].step")
            for name, value in _dict(report.get("metrics"), f"reports[{i}].metrics").items():
                _num(
                    value, f"reports[{i}].metrics.{name}", finite=False
                )  # NaN is a diverged trial's value
    if not fields_ok:
        _trial_lists(r)
    return columns


def _trial_fields(r: dict) -> None:
    """The scalar fields of a trial record (the first part of `_trial`; its twin in C: `trial_ok`)."""
    _required(r, ("trial_id", "status"))
    for name in (
        "trial_id",
        "phase",
        "arm",
        "status",
        "started",
        "ended",
        "host",
        "contract_sha256",
    ):
        _str(r.get(name), name)
    _int(r.get("seed"), "seed")
    _int(r.get("index"), "index")
    _int(r.get("attempts"), "attempts", lo=0)
    _int(r.get("pid"), "pid", lo=0)
    _num(r.get("exposure"), "exposure")
    _num(r.get("duration_s"), "duration_s")
    _dict(r.get("params"), "params")
    _dict(r.get("config"), "config")


def _trial_lists(r: dict) -> None:
    """A trial record's errors, violations and splits (the last part of `_trial`; its twin in C: `trial_ok`)."""
    for i, error in enumerate(_list(r.get("errors"), "errors")):
        if not isinstance(error, dict):
            raise _Bad(f"errors[{i}]", "a mapping {type, message, traceback}", error)
        for name in ("type", "message", "traceback", "status"):
            _str(error.get(name), f"errors[{i}].{name}")
    for i, violation in enumerate(_list(r.get("violations"), "violations")):
        if not isinstance(violation, dict | str):
            raise _Bad(f"violations[{i}]", "a mapping", violation)
        if isinstance(violation, dict):
            _str(violation.get("kind"), f"violations[{i}].kind")
            _num(violation.get("step"), f"violations[{i}].step")
    _splits(r.get("splits"))


def _splits(value: Any) -> None:
    """`splits`: per split name, {presentations, distinct, fingerprint, groups: {g: {distinct, fingerprint}},
    overlap: {other split: {key: count}}} (docs/run-folder.md)."""
    for name, split in _dict(value, "splits").items():
        where = f"splits.{name}"
        split = _dict(split, where)
        for count in ("presentations", "distinct"):
            _int(split.get(count), f"{where}.{count}", lo=0)
        _str(split.get("fingerprint"), f"{where}.fingerprint")
        for group, summary in _dict(split.get("groups"), f"{where}.groups").items():
            summary = _dict(summary, f"{where}.groups.{group}")
            _int(summary.get("distinct"), f"{where}.groups.{group}.distinct", lo=0)
            _str(summary.get("fingerprint"), f"{where}.groups.{group}.fingerprint")
        for other, counts in _dict(split.get("overlap"), f"{where}.overlap").items():
            for key, n in _dict(counts, f"{where}.overlap.{other}").items():
                _int(n, f"{where}.overlap.{other}.{key}", lo=0)


_NON_FINITE_SET = frozenset(NON_FINITE)
_VALUE_KINDS = frozenset({float, int, str, type(None)})
_NUMBER_KINDS = frozenset({float, int})


def _report_columns(reports: list, metrics: frozenset[str] | None = None) -> ReportColumns | None:
    """The reports as checked columns when they are regular, else None (the per-report checks then decide).

    In one pass in C where planner/_store/_columns.c was built (its columns are then typed memoryviews:
    int64 steps, float64 times and values, numpy takes them without a copy); else by `_python_columns`, to
    the same answer (tests/unit/test_columns.py holds the two to it).
    """
    if _take is None or type(reports) is not list:
        return _python_columns(reports, metrics)
    taken = _take(reports, metrics)
    return None if taken is None else typed_columns(*taken)


def typed_columns(
    names: list[str],
    steps: bytes,
    times: bytes,
    last: list,
    values: dict[str, bytes],
    numeric: bool,
    line: bytes | None = None,
) -> ReportColumns:
    """The columns the C reader filled (`take` or `scan`: int64 steps, float64 times and values, as bytes),
    as typed memoryviews; `line`: the record's line, when `scan` read its reports from the text."""
    return ReportColumns(
        memoryview(steps).cast("q"),
        memoryview(times).cast("d"),
        names,
        last,
        {n: memoryview(v).cast("d") for n, v in values.items()},
        numeric=numeric,
        typed=True,
        line=line,
    )


def _python_columns(reports: list, metrics: frozenset[str] | None = None) -> ReportColumns | None:
    """`_report_columns` in Python: the reports as checked columns (lists) when they are regular, else None.

    Columns are checked by the set of their element types (a pass in C): steps must all be whole numbers
    up to 2**53, metric values numbers up to 2**53, None or "nan"/"inf"/"-inf" -- what `_plain_reports`
    accepts. A million reports cost a few list comprehensions instead of a Python loop per value.
    """
    try:
        mets = [p["metrics"] for p in reports]
        steps = [p["step"] for p in reports]
        times = [p["time_s"] for p in reports]
        if reports and set(map(type, mets)) != {dict}:
            return None
        names = sorted(set().union(*mets))
    except (KeyError, TypeError):
        return None
    if reports and set(map(len, mets)) != {len(names)}:  # a report lacks a metric another has
        return None
    if steps and (set(map(type, steps)) != {int} or min(steps) < -BIG or max(steps) > BIG):
        return None
    if metrics is not None and not metrics:  # no values wanted: every value's type, in one pass
        columns: dict[str, list] = {}
        kinds = set(map(type, chain.from_iterable(map(dict.values, mets))))
    else:  # every metric's column (each report has them all), then the types of their values
        columns = {n: [m[n] for m in mets] for n in names}
        kinds = set().union(*map(set, map(partial(map, type), columns.values())))
    if kinds - {float}:
        if not kinds <= _VALUE_KINDS:
            return None
        every = list(chain.from_iterable(map(dict.values, mets)))
        if int in kinds and not all(-BIG <= v <= BIG for v in every if type(v) is int):
            return None
        if str in kinds and not {v for v in every if type(v) is str} <= _NON_FINITE_SET:
            return None
    last = mets[-1] if mets else {}
    values = columns if metrics is None else {n: v for n, v in columns.items() if n in metrics}
    return ReportColumns(
        steps, times, names, [last[n] for n in names], values, numeric=kinds <= _NUMBER_KINDS
    )


def _plain_reports(reports: list) -> bool:
    """True when every report is {step: finite number, metrics: {name: number or "nan"/"inf"/"-inf"}}.

    The common case, checked in one tight loop (a run of 10k trials x 100 reports reads a million).
    """
    for report in reports:
        if type(report) is not dict:
            return False
        step = report.get("step")
        kind = type(step)
        if not (
            (kind is int and -BIG <= step <= BIG)
            or (kind is float and -BIG <= step <= BIG)
            or step is None
        ):
            return False
        metrics = report.get("metrics")
        if metrics is None:
            continue
        if type(metrics) is not dict:
            return False
        for value in metrics.values():
            kind = type(value)
            if (
                kind is float
                or value is None
                or (kind is int and -BIG <= value <= BIG)
                or (kind is str and value in NON_FINITE)
            ):
                continue
            return False
    return True


def _event(r: dict) -> None:
    _required(r, ("event",))
    _str(r.get("event"), "event", optional=False)
    _str(r.get("time"), "time")
    for name in ("trial_id", "phase", "arm"):
        _str(r.get(name), name)


def _reeval(r: dict) -> None:
    _int(r.get("reeval"), "reeval", lo=0)
    _str(r.get("arm"), "arm")
    for i, seed in enumerate(_list(r.get("seeds"), "seeds")):
        _int(seed, f"seeds[{i}]")


def _state(r: dict) -> None:
    for name in ("state", "reason", "updated"):
        _str(r.get(name), name)
    budget = _dict(r.get("budget"), "budget")
    _num(budget.get("wall_time_s"), "budget.wall_time_s")
    _int(budget.get("trials_ended"), "budget.trials_ended", lo=0)


def _plan(r: dict) -> None:
    for name in ("planned_count", "planned_trials"):
        _int(r.get(name), name, lo=0)
    for i, phase in enumerate(_list(r.get("phases"), "phases")):
        phase = _dict(phase, f"phases[{i}]")
        for j, trial in enumerate(_list(phase.get("trials"), f"phases[{i}].trials")):
            _dict(trial, f"phases[{i}].trials[{j}]")
    for j, trial in enumerate(_list(r.get("trials"), "trials")):
        _dict(trial, f"trials[{j}]")


def _decisions(r: dict) -> None:
    _str(r.get("run_state"), "run_state")
    _num(r.get("alpha"), "alpha")
    _num(r.get("min_effect"), "min_effect")
    for i, row in enumerate(_list(r.get("decisions"), "decisions")):
        row = _dict(row, f"decisions[{i}]")
        for name in ("arm", "decision"):
            _str(row.get(name), f"decisions[{i}].{name}")
        for name in (
            "effect",
            "ci_low",
            "ci_high",
            "p_value",
            "alpha_adjusted",
        ):  # null when undefined
            _measured(row.get(name), f"decisions[{i}].{name}")
        for name in ("n_baseline", "n_arm"):
            _int(row.get(name), f"decisions[{i}].{name}", lo=0)


def _selection(r: dict) -> None:
    for arm, chosen in _dict(r.get("arms"), "arms").items():
        chosen = _dict(chosen, f"arms.{arm}")
        _str(chosen.get("trial_id"), f"arms.{arm}.trial_id")
        _dict(chosen.get("params"), f"arms.{arm}.params")


def _run(r: dict) -> None:
    for name in (
        "run_id",
        "name",
        "contract_sha256",
        "created",
        "planner_version",
        "contract_path",
    ):
        _str(r.get(name), name)


def _lock(r: dict) -> None:
    _int(r.get("pid"), "pid", lo=0)
    for name in ("host", "started", "command", "token", "boot_id"):
        _str(r.get(name), name)
    _num(r.get("pid_started"), "pid_started")


def _identity(r: dict) -> None:
    for name in ("env", "git"):
        if name in r and not isinstance(r[name], dict | str | type(None)):
            raise _Bad(name, "a mapping", r[name])
    for name in ("code", "packages", "host", "data"):  # the report reads their fields
        _dict(r.get(name), name)


def _lineage(r: dict) -> None:
    """lineage.json (docs/lineage.md): what the report's lineage lines read."""
    _str(r.get("line"), "line")
    base = _dict(r.get("baseline"), "baseline")
    _str(base.get("arm"), "baseline.arm")
    origin = _dict(base.get("from"), "baseline.from")
    for name in ("arm", "run", "decision", "promoted"):
        _str(origin.get(name), f"baseline.from.{name}")
    repetition = _dict(r.get("repetition"), "repetition")
    if repetition:
        _required(repetition, ("sentence",))
        _str(repetition["sentence"], "repetition.sentence")
    for i, edit in enumerate(_list(r.get("edited_after_decisions"), "edited_after_decisions")):
        edit = _dict(edit, f"edited_after_decisions[{i}]")
        _required(edit, ("run", "decisions"))
        _str(edit.get("contract_sha256"), f"edited_after_decisions[{i}].contract_sha256")


_CHECKS: dict[str, Callable[[dict], Any]] = {
    "trials.jsonl": _trial,
    "events.jsonl": _event,
    "reevals.jsonl": _reeval,
    "state.json": _state,
    "plan.json": _plan,
    "decisions.json": _decisions,
    "selection.json": _selection,
    "run.json": _run,
    "lock": _lock,
    "identity.json": _identity,
    "lineage.json": _lineage,
}


def check(name: str, record: dict, where: str) -> Any:
    """Raise RunError naming `where` and the field when `record` (of the file called `name`) has a wrong shape.

    A trial record's check returns its reports as `ReportColumns` when they are regular (else None).
    """
    fn = _CHECKS.get(name)
    if fn is None:
        return None
    try:
        return fn(record)
    except _Bad as bad:
        _raise(bad, where)


def _raise(bad: _Bad, where: str) -> None:
    wanted = "is missing" if bad.wanted == "present" else f"is {_show(bad.value)}, not {bad.wanted}"
    raise RunError(
        f"{where}: field `{bad.field}` {wanted}; this is not a file a run wrote (the folder is "
        "damaged or was edited)"
    ) from None


def checker(name: str) -> Callable[[dict, str], None] | None:
    """The check of a file named `name` as `check(record, where)`, or None when that file has no schema."""
    if name not in _CHECKS:
        return None
    return lambda record, where: check(name, record, where)


def check_lock(record: dict, where: str) -> None:
    check("lock", record, where)


def check_trial(
    record: dict, where: str, metrics: frozenset[str] | None = None
) -> ReportColumns | None:
    """The check of a trials.jsonl record; its reports as checked columns when they are regular (else None),
    with the values of `metrics` only (every metric's by default)."""
    try:
        return _trial(record, metrics)
    except _Bad as bad:
        _raise(bad, where)
