"""What a trial record says, read the same way everywhere: the final value of a trial.

One policy, used by the decision with and without looks, the tuning resume, the
pilot, reeval and its comparison:

    final_value(record, metric) -> float | None
        the value of `metric` in the trial's LAST report that has it;
        None when no report has it (or it is not a number).
        NaN and infinities are kept (stored in trials.jsonl as "nan", "inf",
        "-inf"): a non-finite final value means the trial diverged, and the
        decision turns it into `failures.diverged_value` (or an incomplete arm)
        like a `diverged` status. A caller that wants only usable numbers (the
        pilot's spread, the tuning history) drops non-finite values itself.

`StoredTrial` is the shape of a record at the store boundary (docs/run-folder.md), described once:
planner._store.schema decodes every line of trials.jsonl into it and holds what the writer appends
to it. A record read from disk is a plain dict of that shape; `TrialRecord` adds what is never on
disk: `summary`: the reader sets it on a slimmed record (reports dropped to save memory), and so
does a running driver on a tuning record once it is on disk (`planner._store.facts.kept_of_tuning`),
to keep what the facts need of them.

A leaf: imports only `_core.status` (and msgspec's `Meta`, which bounds the numbers).
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, NamedTuple, Required, TypedDict

from msgspec import Meta

from planner._core.status import FAILED, TrialStatus

# The numbers of a run folder, bounded where the schema reads them (planner._store.schema decodes
# every file into these types with msgspec; its ValidationError names the field).
BIG = (
    2**53
)  # no count, step, pid or duration a run writes is past this (and a double holds it exactly)
Whole = Annotated[int, Meta(ge=-BIG, le=BIG)]  # a seed, an index
Count = Annotated[int, Meta(ge=0, le=BIG)]  # attempts, a pid, presentations
# a step, an exposure, a duration: a finite number up to 2**53 (a step of 1e30 is no step a run
# took)
Measure = Annotated[int, Meta(ge=-BIG, le=BIG)] | Annotated[float, Meta(ge=-BIG, le=BIG)]
Finite = Annotated[float, Meta(ge=-sys.float_info.max, le=sys.float_info.max)]  # any finite number
NonFinite = Literal["nan", "inf", "-inf"]
# A metric's value: a number of any size, or NaN and the infinities spelled as JSON cannot write
# them (a diverged trial's value; `stored_metric`); null where a trainable reported None.
MetricValue = float | NonFinite | None


class Report(TypedDict, total=False):
    """One report of a trial: its step, its metrics (non-finite values as "nan", "inf", "-inf"),
    its time."""

    step: Measure | None
    metrics: dict[str, MetricValue] | None
    time_s: float | None


class TrialError(TypedDict, total=False):
    """One failed attempt of a trial."""

    attempt: Whole | None
    type: str | None
    message: str | None
    traceback: str | None
    status: str | None
    errno: Whole | None  # the OSError's errno, when the attempt died of one


class Violation(TypedDict, total=False):
    """What every reader takes of a logged violation (its other keys are the kind's own: detail)."""

    kind: str | None
    step: Measure | None


class SplitGroup(TypedDict, total=False):
    distinct: Count | None
    fingerprint: str | None


class Split(TypedDict, total=False):
    """One split a trial logged (docs/data.md): its counts and fingerprints, never the ids."""

    presentations: Count | None
    distinct: Count | None
    fingerprint: str | None
    groups: dict[str, SplitGroup] | None
    overlap: dict[str, dict[str, Count]] | None


class ReportSummary(NamedTuple):
    """What the facts need of a trial's reports once the reader dropped them (a slimmed record)."""

    metric_names: frozenset[str]
    first_step: Any
    first_time_s: Any
    last_step: Any
    last_time_s: Any


class TrialInputs(TypedDict, total=False):
    """What a trial read, and a `command:` trial was given (docs/run-folder.md): `argv`, the words
    after the command (its flags as passed; a command's only); `files`, name (relative to the folder
    it ran in) -> {sha256} for code and config, {size, mtime_ns} for data
    (planner._store.identity.FileFact)."""

    argv: list[str]
    files: dict[str, dict[str, Any]]


class StoredTrial(TypedDict, total=False):
    """A line of trials.jsonl as a run writes it (docs/run-folder.md): the one description of a
    trial record, which the writer holds every record to and the reader decodes every line into."""

    trial_id: Required[str]
    status: Required[str]  # a TrialStatus word
    phase: str | None  # tune, confirm, reeval
    arm: str | None
    seed: Whole | None
    index: Whole | None
    params: dict[str, Any] | None
    config: dict[str, Any] | None
    exposure: Measure | None
    reports: list[Report] | None
    attempts: Count | None
    errors: list[TrialError] | None
    violations: (
        list[dict[str, Any] | str] | None
    )  # each mapping a `Violation`, with its kind's keys
    notes: list[str] | None
    splits: dict[str, Split] | None
    started: str | None
    ended: str | None
    duration_s: Measure | None
    host: str | None
    pid: Count | None
    node_id: str | None
    contract_sha256: str | None
    disk_bytes: Count | None
    modules: list[str] | None
    resumed: bool | None
    resumed_from: dict[str, Any] | None
    inputs: TrialInputs | None  # the files the trial read, and a command's flags as passed


class TrialRecord(StoredTrial, total=False):
    """A trial record as planner holds it: a `StoredTrial`, and on a slimmed record (reports
    dropped to save memory, by the reader or a running driver) what the facts need of them. Never
    written."""

    summary: ReportSummary
    metric_curve: str


NON_FINITE = (
    "nan",
    "inf",
    "-inf",
)  # how a trial record spells a non-finite metric (JSON has no such numbers)


def stored_metric(value: float) -> float | str:
    """A metric's value as a record stores it: non-finite floats as "nan", "inf", "-inf"
    (NON_FINITE)."""
    if math.isfinite(value):
        return value
    return NON_FINITE[0] if math.isnan(value) else NON_FINITE[1 if value > 0 else 2]


def held_reports(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The reports a trial's checkpoint held when the trial continued from it
    (`resumed_from.reports`: the steps its earlier attempt trained and reported, which the record's
    own `reports` leave out), in order, each before the record's first report; [] for a trial that
    did not continue, or a malformed entry."""
    source = record.get("resumed_from")
    held = source.get("reports") if isinstance(source, dict) else None
    if not isinstance(held, list):
        return []
    reports = record.get("reports")
    first = (
        reports[0].get("step")
        if isinstance(reports, list) and reports and isinstance(reports[0], dict)
        else None
    )
    out, last = [], None
    for report in held:
        step = report.get("step") if isinstance(report, dict) else None
        if (
            isinstance(step, bool)
            or not isinstance(step, int)
            or not isinstance(report.get("metrics"), dict)
            or (last is not None and step <= last)
            or (isinstance(first, int) and step >= first)
        ):
            continue
        out.append(report)
        last = step
    return out


def non_finite_metrics(records: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """arm -> the metrics that some report of the arm's `records` holds as NaN or an infinity
    ("nan", "inf", "-inf" as stored): a training that diverged, though its decision metric (an
    accuracy) stayed a number."""
    out: dict[str, set[str]] = {}
    for record in records:
        reports = record.get("reports")
        for report in reports if isinstance(reports, list) else []:
            metrics = report.get("metrics") if isinstance(report, dict) else None
            for name, value in metrics.items() if isinstance(metrics, dict) else ():
                if value in NON_FINITE or (isinstance(value, float) and not math.isfinite(value)):
                    out.setdefault(str(record.get("arm")), set()).add(str(name))
    return {arm: sorted(names) for arm, names in out.items()}


def final_value(record: Mapping[str, Any], metric: str) -> float | None:
    """The last reported value of `metric` (NaN and infinities kept: diverged); None when never
    reported."""
    reports = record.get("reports")
    for report in reversed(reports if isinstance(reports, list) else []):
        metrics = report.get("metrics") if isinstance(report, dict) else None
        if isinstance(metrics, dict) and metric in metrics:
            value = metrics[metric]
            if isinstance(value, bool):
                return None
            try:
                return float(value)  # "nan", "inf", "-inf" as stored
            except (TypeError, ValueError):
                return None
    return None


def finite_final_value(record: Mapping[str, Any], metric: str) -> float | None:
    """`final_value`, None when it is not finite (for uses that need a usable number, never for
    deciding)."""
    value = final_value(record, metric)
    return value if value is not None and math.isfinite(value) else None


FAILED_STATUSES = FAILED  # the one set (planner._core.status)


def first_line(text: str) -> str:
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def last_error(record: Mapping[str, Any]) -> dict[str, Any]:
    """The last entry of the record's `errors` ({} without one, or where it is not a mapping)."""
    errors = record.get("errors") or []
    return errors[-1] if errors and isinstance(errors[-1], dict) else {}


def error_of(record: dict[str, Any]) -> str | None:
    """ "Type: message" of the last error of a trial that failed (None for any other trial)."""
    if record.get("status") not in FAILED_STATUSES:
        return None
    last = last_error(record)
    kind, message = (
        str(last.get("type") or record.get("status")),
        first_line(last.get("message") or ""),
    )
    return f"{kind}: {message}" if message else kind


# What differs between two occurrences of one failure, replaced in `error_key` (order matters: a
# path may hold a trial id or a hex id, a trial id holds numbers).
_NORMALIZE = (
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.~+@-]*[/\\])+[\w.~+@-]*"), "<path>"),
    (
        re.compile(r"\b(?:tune|confirm|reeval)-[A-Za-z0-9_.-]+?-s-?\d+(?:-t\d+|-\d+)?(?![\w-])"),
        "<trial>",
    ),
    (re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"), "<hex>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
    (
        re.compile(
            r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])|(?<![\w.])-?\.\d+(?![\w.])"
        ),
        "<n>",
    ),
)


def error_key(error: str) -> str:
    """The error with what varies between occurrences of one failure normalized: trial ids, paths,
    hex ids (and uuids, addresses), numbers. Two failures with the same key are one failure:
    "KeyError: 'lr'" in every trial, or "can't open file '/runs/x/trials/t3/train.py'" once per
    trial folder."""
    text = str(error)
    for pattern, placeholder in _NORMALIZE:
        text = pattern.sub(placeholder, text)
    return text


def error_groups(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failed trials grouped by their error ("Type: message") with trial ids, paths, hex ids and
    numbers normalized (`error_key`), in order of first occurrence: [{"error", "count", "first":
    trial_id, "nodes"}], where "error" is the first occurrence's own text (a real path, a real
    number), "first" its trial, and "nodes", when the trials ran on several nodes, the ones the
    group's ran on (12 characters of each id)."""
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        error = error_of(record)
        if error is None:
            continue
        group = groups.setdefault(
            error_key(error),
            {"error": error, "count": 0, "first": record.get("trial_id")},
        )
        group["count"] += 1
        node = record.get("node_id")
        if isinstance(node, str) and node[:12] not in group.setdefault("nodes", []):
            group["nodes"].append(node[:12])
    if len({r.get("node_id") for r in records if isinstance(r.get("node_id"), str)}) < 2:
        for group in groups.values():  # one machine: a node says nothing
            group.pop("nodes", None)
    return list(groups.values())


def on_nodes(group: dict[str, Any]) -> str:
    """`, on node X` (`nodes X, Y`) for an error group whose trials ran on several nodes, or ''."""
    nodes = group.get("nodes") or []
    return f", on node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}" if nodes else ""


def note_groups(records: list[TrialRecord]) -> list[dict[str, Any]]:
    """The protocol notes trials carry (`notes`: a declared metric no row held), grouped like
    errors (by `error_key`), in order of first occurrence: [{"note", "count", "first":
    trial_id}]."""
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        notes = record.get("notes")
        for note in notes if isinstance(notes, list) else []:
            group = groups.setdefault(
                error_key(str(note)),
                {"note": str(note), "count": 0, "first": record.get("trial_id")},
            )
            group["count"] += 1
    return list(groups.values())


def curve(record: Mapping[str, Any]) -> tuple:
    """Everything a trial reported, as a comparable value: (step, sorted metrics) per report."""
    reports = record.get("reports")
    return tuple(
        (r.get("step"), tuple(sorted((r.get("metrics") or {}).items())))
        for r in (reports if isinstance(reports, list) else [])
        if isinstance(r, dict)
    )


def seeds_identical(records: list[dict[str, Any]]) -> dict[str, int]:
    """Arms whose completed confirmation trials (2 or more seeds) reported exactly the same curves:
    arm -> how many seeds. The seed did not vary the run (a trainable that never reads
    trial.seed)."""
    return same_curve_every_seed(
        (str(r.get("arm")), r.get("seed"), curve(r))
        for r in records
        if r.get("phase") == "confirm" and r.get("status") == TrialStatus.COMPLETED
    )


def same_curve_every_seed(curves: Iterable[tuple[str, Any, tuple]]) -> dict[str, int]:
    """The one rule of `seeds_identical`, on (arm, seed, `curve` of the trial): the arms whose 2 or
    more seeds all have the same curve, arm -> how many seeds (a seed seen twice counts once, its
    last curve). A curve whose every metric holds one value at every step (a saturated or quantized
    metric: val_acc 1.0 from the first epoch on) tells nothing of the seed: two seeds of a seeded
    run give it too, and it is not flagged (the decision's degenerate-spread rule speaks for it)."""
    by_arm: dict[str, dict[Any, tuple]] = {}
    for arm, seed, c in curves:
        by_arm.setdefault(arm, {})[seed] = c
    return {
        arm: len(by_seed)
        for arm, by_seed in by_arm.items()
        if len(by_seed) >= 2
        and len(set(by_seed.values())) == 1
        and not _flat(next(iter(by_seed.values())))
    }


def _flat(curve: tuple) -> bool:
    """Whether a `curve` of 2 or more reports holds one value of each metric at every report
    (nothing in it moved); a single report is no curve, and says nothing either way."""
    by_name: dict[Any, list[Any]] = {}
    for _, metrics in curve:
        for name, value in metrics:
            by_name.setdefault(name, []).append(value)
    return len(curve) >= 2 and all(_one_value(values) for values in by_name.values())


def _one_value(values: list[Any]) -> bool:
    """Every value equal to the first (the one test of a flat series, for `_flat` and
    `metric_curve`)."""
    return all(value == values[0] for value in values)


FLAT_CURVE = "flat:"  # a metric_curve digest of a series that holds one value at every step


def metric_curve(record: dict[str, Any], metric: str) -> str | None:
    """A digest of the (step, value) of `metric` in every report of the trial: equal digests, equal
    curves; prefixed FLAT_CURVE when the value is the same at every step. A running driver keeps it
    on a tuning record it slimmed (`metric_curve`); None when no report has it."""
    kept = record.get("metric_curve")
    if isinstance(kept, str):
        return kept
    reports = record.get("reports")
    series = [
        (r.get("step"), r["metrics"][metric])
        for r in (reports if isinstance(reports, list) else [])
        if isinstance(r, dict) and isinstance(r.get("metrics"), dict) and metric in r["metrics"]
    ]
    if not series:
        return None
    flat = len(series) >= 2 and _one_value([value for _, value in series])
    return (FLAT_CURVE if flat else "") + hashlib.sha256(repr(series).encode()).hexdigest()


def tuned_values_identical(records: list[dict[str, Any]], metric: str) -> dict[str, int]:
    """Arms whose tuning trials with different params reported exactly the same curves of `metric`
    (the selection metric): arm -> how many tuning trials. The tuned values did not reach the run
    (a trainable that never reads them). Read per sweep (an arm at a tuning seed) whose trials all
    completed with 2 or more distinct param sets; an arm with a sweep whose curves differ is not
    flagged. A trial that continued from its checkpoint (`resumed`) reported only the steps it had
    left: it counts, but its curve is not compared. A sweep whose trials all give one curve,
    holding one value at every step (a saturated metric: FLAT_CURVE), tells nothing of the tuned
    values and is not read."""
    sweeps: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for r in records:
        if r.get("phase") == "tune":
            sweeps.setdefault((str(r.get("arm")), r.get("seed")), []).append(r)
    same: dict[str, int] = {}
    varied: set[str] = set()
    for (arm, _), trials in sweeps.items():
        whole = [t for t in trials if not t.get("resumed")]
        params = {repr(sorted((t.get("params") or {}).items())) for t in whole}
        curves = {metric_curve(t, metric) for t in whole}
        if (
            len(params) < 2
            or None in curves
            or any(t.get("status") != TrialStatus.COMPLETED for t in trials)
        ):
            continue
        if len(curves) == 1 and str(next(iter(curves))).startswith(FLAT_CURVE):
            # one curve that never moves, for every param set: nothing to tell the values by
            continue
        if len(curves) == 1:
            same[arm] = same.get(arm, 0) + len(trials)
        else:
            varied.add(arm)
    return {arm: n for arm, n in same.items() if arm not in varied}
