"""A run folder's results as pandas DataFrames: `planner.load_run(run_dir)`.

    run = planner.load_run("runs/adam-vs-sgd/20261129-181700-a3f2")
    run.trials      one row per ended trial: ids, status, exposure, timing, param.<key>,
    final.<metric> run.reports     long format: one row per (trial, report, metric)
    run.decisions   one row per treatment arm, from decisions.json (NA until decided)

Frames are built from column arrays collected while reading trials.jsonl, never
from per-row dicts (see shared/design/MEASUREMENTS.md). A torn last line of
trials.jsonl is skipped and listed in `run.notes`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from planner._contract.paths import flatten
from planner._core.records import TrialRecord
from planner._core.status import RunState
from planner._core.text import spreadsheet_safe
from planner._data.checks import data_summary
from planner._results.cost import cost_by_arm
from planner._store import cache, facts
from planner._store import read as rf
from planner._store.cache import Gathered
from planner._store.files import write_atomic
from planner._store.live import RUNNING, running_records

DECISION_COLUMNS = [
    "arm",
    "decision",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "alpha_adjusted",
    "n_baseline",
    "n_arm",
    "reason",
]
PHASES = ["tune", "confirm", "reeval"]


@dataclass
class RunResults:
    """One run folder, read: its tables and the facts a report needs."""

    run_dir: Path
    run_id: str
    name: str
    contract: dict[str, Any]
    state: dict[str, Any]
    trials: pd.DataFrame
    reports: pd.DataFrame
    decisions: pd.DataFrame
    decision_info: dict[str, Any] = field(default_factory=dict)
    identity: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    selection: dict[str, Any] | None = None
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    looks: list[dict[str, Any]] = field(
        default_factory=list
    )  # sequential confirmation: one per arm and look
    reevals: list[dict[str, Any]] = field(
        default_factory=list
    )  # reevals.jsonl: one per `plan reeval`
    lineage: dict[str, Any] | None = None  # lineage.json (docs/lineage.md)
    # What a report needs beyond the tables is worked out when first asked for, so a reader of
    # the tables alone does not pay for it: the ended trials' slim records (reports dropped) the
    # facts below are drawn from, and the folder, whose whole records and events.jsonl (a log of
    # every trial's start and end) are read from it on first use.
    _records: list[TrialRecord] = field(default_factory=list, repr=False)
    _folder: rf.RunFolder | None = field(default=None, repr=False)

    @cached_property
    def records(self) -> list[TrialRecord]:
        """trials.jsonl's records as the run wrote them, every report included, in order (read on
        first use, by the same reader and checks as the tables: RunError if the file is
        damaged)."""
        return self._folder.trials().records if self._folder is not None else []

    @cached_property
    def events(self) -> list[dict[str, Any]]:
        """events.jsonl's records, in order (read on first use: RunError if the file is
        damaged)."""
        return self._folder.events().records if self._folder is not None else []

    @cached_property
    def failures(self) -> list[dict[str, Any]]:
        """The trials that did not complete, with their last error (planner's facts)."""
        return facts.failures(self._records)

    @cached_property
    def violations(self) -> list[dict[str, Any]]:
        """Every protocol violation the trials logged or their reports show."""
        return facts.violations(self._records, self.contract)

    @cached_property
    def heldout(self) -> dict[str, Any]:
        """The held-out metric's ledger: which trials saw it, in which phase."""
        return facts.heldout_ledger(self._records, self.contract)

    @cached_property
    def budget(self) -> dict[str, Any]:
        """The budget used against the contract's."""
        return facts.budget_used(self._records, self.contract, self.state, self.plan)

    @cached_property
    def cost(self) -> list[dict[str, Any]]:
        """Per arm, what it cost, apart from the decision (trials, trial-seconds, ...)."""
        return cost_by_arm(self._records, self.contract)

    @cached_property
    def data(self) -> dict[str, Any]:
        """The data splits the trials logged (counts and fingerprints, never ids)."""
        return data_summary(self._records, facts.contract_get(self.contract, "data"))

    @property
    def run_state(self) -> str:
        return str(self.state.get("state") or "unknown")

    @property
    def baseline(self) -> str | None:
        return facts.contract_get(self.contract, "baseline.name")

    @property
    def arms(self) -> list[str]:
        """The baseline first, then the treatments; arms seen only in trials come last."""
        names = facts.arm_names(self.contract)
        for arm in self.trials["arm"].dropna().unique().tolist() if len(self.trials) else []:
            if arm not in names:
                names.append(arm)
        return names

    @property
    def metric(self) -> str | None:
        return facts.contract_get(self.contract, "metric.name")

    @property
    def decision_metric(self) -> str | None:
        return facts.contract_get(self.contract, "metric.heldout") or self.metric

    def __repr__(self) -> str:
        return (
            f"RunResults({self.run_id!r}, state={self.run_state!r}, trials={len(self.trials)}, "
            f"reports={len(self.reports)}, decisions={len(self.decisions)})"
        )


def load_run(
    run_dir: str | os.PathLike, *, reports: bool = True, metrics: list[str] | None = None
) -> RunResults:
    """Read a run folder into DataFrames.

    `reports=False` leaves the long reports table empty; `metrics` keeps only
    those metrics in it (the trials table always has every metric's final value).
    A torn last line of trials.jsonl is skipped and noted in `notes`.
    """
    folder = rf.open_run(run_dir)
    contract = folder.contract()
    info = folder.run_info()
    notes: list[str] = []
    state = folder.state() or {}
    running = state.get("state") == RunState.RUNNING
    # Python's cyclic collector stays paused through the whole read: what is built here lives to
    # the end, so a collection on the way frees nothing, and the first after a pause walks all of
    # it.
    with rf.paused_gc():
        # A large journal of a run that is not running is read once: what the read gathers is
        # kept in the user's cache under its bytes' SHA-256 (planner._store.cache).
        digest = None if running else folder.trials_digest()
        if digest is None:
            gathered = _read(folder, contract, running, notes, reports, metrics)
        else:
            gathered = _only(_read_cached(folder, contract, digest, notes), reports, metrics)
        trials, report_frame, records = _frames(gathered, contract, notes)
        del gathered
        records = [
            r for r in records if r.get("status") != RUNNING
        ]  # the facts are of ended trials
        plan = folder.plan()
        decision_doc = folder.decisions() or {}
        results = RunResults(
            run_dir=folder.path,
            run_id=str(info.get("run_id")),
            name=str(info.get("name") or contract.get("name") or ""),
            contract=contract,
            state=state,
            trials=trials,
            reports=report_frame,
            decisions=_decisions(decision_doc, contract),
            decision_info={k: v for k, v in decision_doc.items() if k != "decisions"},
            identity=folder.identity(),
            plan=plan,
            selection=folder.selection(),
            configs=folder.configs(),
            lock=folder.lock(),
            notes=notes,
            _records=records,
            _folder=folder,
            looks=_looks(decision_doc),
            reevals=folder.reevals().records,
            lineage=folder.json("lineage.json"),
        )
    return results


def _read(
    folder: rf.RunFolder,
    contract: dict[str, Any],
    running: bool,
    notes: list[str],
    reports: bool = True,
    metrics: list[str] | None = None,
) -> Gathered:
    """trials.jsonl read and gathered (and, while the run runs, the curves of its running trials
    so far)."""
    collector = _Collector(contract, want_reports=reports, metrics=metrics)
    for record in folder.iter_trials(notes):
        collector.add(record)
    if running:
        ended = {str(r.get("trial_id")) for r in collector.records}
        planned = facts.plan_entries(folder.plan())
        for live in running_records(folder.path, planned, ended):
            collector.add(cast(TrialRecord, live))  # record-shaped (running_records)
    return collector.gathered()


def _read_cached(
    folder: rf.RunFolder, contract: dict[str, Any], digest: str, notes: list[str]
) -> Gathered:
    """What reading the journal whose bytes hash to `digest` gathers: from the cache, or read
    (every report of every metric, so that the entry serves every reader) and then kept there
    when the journal did not change while it was read."""
    name = cache.key(digest, facts.report_limits(contract))
    gathered = cache.load(name)
    if gathered is None:
        read_notes: list[str] = []
        gathered = _read(folder, contract, False, read_notes)
        gathered.notes = read_notes
        if folder.trials_digest() == digest:
            cache.store(name, gathered)
    notes += gathered.notes
    return gathered


def _only(gathered: Gathered, reports: bool, metrics: list[str] | None) -> Gathered:
    """`gathered` with only the reports a reader asked for: none, or those of `metrics` (the
    metric codes renumbered in the order they were first met, as a read that gathered only
    them numbers them)."""
    if reports and metrics is None:
        return gathered
    names = gathered.metric_names
    kept = [code for code, name in enumerate(names) if reports and name in set(metrics or ())]
    renumber = np.full(max(len(names), 1), -1, dtype=np.int64)
    renumber[kept] = np.arange(len(kept))
    runs = renumber[gathered.run_metric] >= 0 if len(names) else np.zeros(0, dtype=bool)
    rows = np.repeat(runs, gathered.run_length)
    return dataclasses.replace(
        gathered,
        metric_names=[names[code] for code in kept],
        run_trial=gathered.run_trial[runs],
        run_metric=renumber[gathered.run_metric[runs]],
        run_length=gathered.run_length[runs],
        steps=gathered.steps[rows],
        times=gathered.times[rows],
        values=gathered.values[rows],
    )


def _looks(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """decisions.json's sequential looks: one row per arm and look taken ([] without looks)."""
    return [
        {"arm": d.get("arm"), **look}
        for d in doc.get("decisions") or []
        if isinstance(d, dict)
        for look in d.get("looks") or []
        if isinstance(look, dict)
    ]


def _numeric(values: list[Any]) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)


def _float_array(values: Sequence[Any]) -> np.ndarray:
    """Values the schema typed (numbers, "nan", "inf", "-inf", None) as float64: numpy reads each
    as it is, None as NaN."""
    return np.array(values, dtype=np.float64)


def _steps(parts: list[np.ndarray]) -> np.ndarray:
    """The step column from its parts, held as float64 (the schema bounds a step to 2**53, which a
    double holds exactly): int64, a fractional step cut to its whole part as numpy casts it, a
    missing step (None, read as NaN) as -1, its report having broken the protocol."""
    steps = np.concatenate(parts) if parts else np.array([], dtype=np.float64)
    missing = np.isnan(steps)
    if missing.any():
        steps[missing] = -1
    return steps.astype(np.int64)


_STEP, _TIME, _METRICS = itemgetter("step"), itemgetter("time_s"), itemgetter("metrics")


class _Collector:
    """Columns of the reports table, gathered one trial record at a time.

    A record's reports become one float64 block (its steps, times and each metric's values, one
    conversion in numpy) and the record is slimmed (its reports dropped) before the next one is
    read, so memory holds 8 bytes a value, never a million report dicts. The columns are the
    blocks' rows, joined once at the end.
    """

    def __init__(
        self, contract: dict[str, Any], want_reports: bool, metrics: list[str] | None = None
    ):
        self.contract = contract
        self.want = want_reports
        self.metrics = None if metrics is None else set(metrics)
        self.records: list[TrialRecord] = []
        self.steps: list[np.ndarray] = []  # one part a run: a metric's reports in one record
        self.times: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.run_trial: list[int] = []
        self.run_metric: list[int] = []
        self.run_length: list[int] = []
        self.metric_code: dict[str, int] = {}
        self.finals: dict[str, list[tuple[int, float]]] = {}
        self.n_reports: list[int] = []
        self.limits = facts.report_limits(contract)

    def add(self, r: TrialRecord) -> None:
        """One record, as the reader decoded it (planner._store.schema typed its reports)."""
        i = len(self.records)
        if "trial_id" not in r:
            raise rf.RunError(
                f"record {i + 1} of trials.jsonl has no trial_id: the file is not a trials log"
            )
        reps = facts.reports_of(r)
        self.n_reports.append(len(reps))
        names: set[str] | None = set()
        if reps:
            names = self._add_regular(i, reps)
            if names is None:
                names = self._add_irregular(i, reps)
        self.records.append(facts.slim_record(r, self.contract, names, limits=self.limits))

    def _add_regular(self, i: int, reps: list[Any]) -> set[str] | None:
        """The common case: every report has step, time_s and the same metrics.

        Everything is taken before anything is stored, so a KeyError or TypeError (an irregular
        report) leaves no trace and the general path takes over (None). The metric names.
        """
        try:
            mets = list(map(_METRICS, reps))
            names = sorted(set().union(*mets))
            last = mets[-1]
            finals = [last[n] for n in names]
            wanted: list[str] = []
            block = None
            if self.want:
                wanted = [n for n in names if self.metrics is None or n in self.metrics]
                if wanted:
                    block = _float_array(
                        [
                            list(map(_STEP, reps)),
                            list(map(_TIME, reps)),
                            *[list(map(itemgetter(n), mets)) for n in wanted],
                        ]
                    )
        except (KeyError, TypeError):
            return None
        for name, value in zip(names, finals, strict=True):
            self._final(name, i, value)
        if block is not None:  # the steps and times shared by the metrics' runs
            for j, name in enumerate(wanted, start=2):
                self._append(name, i, block[j], block[0], block[1])
        return set(names)

    def _add_irregular(self, i: int, reps: list[Any]) -> set[str]:
        """Reports with missing keys or metrics that come and go: one metric at a time."""
        get = dict.get
        reps = [p if isinstance(p, dict) else {} for p in reps]
        mets = [get(p, "metrics") or {} for p in reps]
        names = set().union(*mets)
        step_i = [get(p, "step") for p in reps]
        time_i = [get(p, "time_s", math.nan) for p in reps]
        for name in sorted(names):
            vals = [get(m, name) for m in mets]
            s_i, t_i = step_i, time_i
            if None in vals:
                keep = [j for j, v in enumerate(vals) if v is not None]
                vals = [vals[j] for j in keep]
                s_i, t_i = [step_i[j] for j in keep], [time_i[j] for j in keep]
            self._final(name, i, vals[-1])
            if self.want and (self.metrics is None or name in self.metrics):
                self._append(name, i, _float_array(vals), _float_array(s_i), _float_array(t_i))
        return names

    def _final(self, name: str, i: int, last: Any) -> None:
        self.finals.setdefault(name, []).append((i, math.nan if last is None else float(last)))

    def _append(
        self, name: str, i: int, values: np.ndarray, steps: np.ndarray, times: np.ndarray
    ) -> None:
        """One run of reports of metric `name` of record `i`: values, steps and times as float64."""
        self.values.append(values)
        self.times.append(times)
        self.steps.append(steps)
        self.run_trial.append(i)
        self.run_metric.append(self.metric_code.setdefault(name, len(self.metric_code)))
        self.run_length.append(len(values))

    def gathered(self) -> Gathered:
        """What was gathered, the parts of each column joined."""
        return Gathered(
            records=self.records,
            n_reports=self.n_reports,
            finals=self.finals,
            metric_names=sorted(self.metric_code, key=self.metric_code.__getitem__),
            run_trial=np.asarray(self.run_trial, dtype=np.int64),
            run_metric=np.asarray(self.run_metric, dtype=np.int64),
            run_length=np.asarray(self.run_length, dtype=np.int64),
            steps=_steps(self.steps),
            times=_joined(self.times),
            values=_joined(self.values),
            notes=[],
        )


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.array([], dtype=np.float64)


def _frames(
    g: Gathered, contract: dict[str, Any], notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, list[TrialRecord]]:
    """(trials, reports, the slim records kept); a trial logged twice keeps its last record."""
    records = g.records
    last: dict[Any, int] = {}
    for i, r in enumerate(records):
        last[r["trial_id"]] = i
    keep = None
    if len(last) < len(records):
        keep = np.zeros(len(records), dtype=bool)
        keep[list(last.values())] = True
        notes.append(
            f"{len(records) - len(last)} trial(s) were logged twice; "
            "the last record of each is used"
        )
    trials = _trial_frame(records, g.n_reports, g.finals, facts.arm_names(contract))
    reports = _report_frame(trials, g)
    if keep is not None:
        trials = trials[keep].reset_index(drop=True)
        if len(reports):
            rows = keep[_trial_index(g)]
            reports = reports[rows].reset_index(drop=True)
        records = [r for r, k in zip(records, keep, strict=True) if k]
    return trials, reports, records


def _trial_index(g: Gathered) -> np.ndarray:
    """The trial of every report row (int32 below 2**31 trials: half the memory of a million
    int64)."""
    kind = np.int32 if len(g.records) < 2**31 else np.int64
    return np.repeat(g.run_trial.astype(kind), g.run_length)


def _report_frame(trials: pd.DataFrame, g: Gathered) -> pd.DataFrame:
    phase_cat, arm_cat = trials["phase"].array, trials["arm"].array
    if not len(g.run_length):
        return _empty_reports(phase_cat, arm_cat)
    trial_idx = _trial_index(g)
    ids = trials["trial_id"].to_numpy(dtype=object)
    id_cat = pd.Categorical(ids)  # ids may repeat (a trial logged twice): categories stay unique
    return pd.DataFrame(
        {
            "trial_id": pd.Categorical.from_codes(id_cat.codes[trial_idx], dtype=id_cat.dtype),
            "phase": pd.Categorical.from_codes(phase_cat.codes[trial_idx], dtype=phase_cat.dtype),
            "arm": pd.Categorical.from_codes(arm_cat.codes[trial_idx], dtype=arm_cat.dtype),
            "seed": _taken(trials["seed"].array, trial_idx),
            "step": g.steps,
            "metric": pd.Categorical.from_codes(
                np.repeat(g.run_metric.astype(_code_kind(g.metric_names)), g.run_length),
                categories=g.metric_names,
            ),
            "value": g.values,
            "time_s": g.times,
        },
        copy=False,
        # the columns are this frame's alone: no copy, no consolidated block, a lower peak
    )


def _taken(column: Any, rows: np.ndarray) -> Any:
    """A nullable integer column repeated row by row: numpy takes its values and its mask (no
    masked take)."""
    values = column.to_numpy(dtype=np.int64, na_value=0)
    return pd.arrays.IntegerArray(values[rows], np.asarray(column.isna())[rows])


def _code_kind(categories: Sequence[Any]) -> Any:
    """The smallest integer type that holds the codes of `categories` (the type pandas keeps them
    in)."""
    return np.int8 if len(categories) < 2**7 else np.int16 if len(categories) < 2**15 else np.int32


def _trial_frame(
    records: list[TrialRecord],
    n_reports: list[int],
    finals: dict[str, list[tuple[int, float]]],
    arm_order: list[str],
) -> pd.DataFrame:
    n = len(records)
    get: Callable[..., Any] = dict.get  # records are TypedDicts: read as the dicts they are
    nan = math.nan
    phases = [get(r, "phase") for r in records]
    arms = [get(r, "arm") for r in records]
    columns: dict[str, Any] = {
        "trial_id": pd.array([str(get(r, "trial_id")) for r in records], dtype="string"),
        "phase": pd.Categorical(phases, categories=_ordered(phases, PHASES)),
        "arm": pd.Categorical(arms, categories=_ordered(arms, arm_order)),
        "seed": _ints([get(r, "seed") for r in records]),
        "index": _ints([get(r, "index") for r in records]),
        "status": pd.Categorical([get(r, "status") for r in records]),
        "exposure": _ints([get(r, "exposure") for r in records]),
        "attempts": _ints([get(r, "attempts", 1) for r in records]),
        "duration_s": _numeric([get(r, "duration_s", nan) for r in records]),
        "started": _times([get(r, "started") for r in records]),
        "ended": _times([get(r, "ended") for r in records]),
        "host": pd.array([get(r, "host") for r in records], dtype="string"),
        "n_reports": np.asarray(n_reports, dtype=np.int64),
        "error": pd.array([_last_error(get(r, "errors")) for r in records], dtype="string"),
    }
    for key, col in _param_columns(records).items():
        columns[f"param.{key}"] = col
    for name in sorted(finals):
        column = np.full(n, nan)
        idx, vals = zip(*finals[name], strict=True)
        column[list(idx)] = vals
        columns[f"final.{name}"] = column
    return pd.DataFrame(columns, index=pd.RangeIndex(n))


def _ints(values: list[Any]) -> Any:
    """A nullable integer column; a value that is not an integer (a damaged record) is NA."""
    try:
        return pd.array(values, dtype="Int64")
    except (TypeError, ValueError):
        return pd.array(
            [v if isinstance(v, int) and not isinstance(v, bool) else None for v in values],
            dtype="Int64",
        )


def _times(values: list[Any]) -> Any:
    # no cache of unique strings: trials start and end at distinct times (its mapping back cost 4x
    # the parse)
    return pd.to_datetime(
        pd.Series(values, dtype=object), utc=True, format="ISO8601", errors="coerce", cache=False
    ).array


def _ordered(values: list[Any], preferred: list[str]) -> list[str]:
    present = {v for v in values if v is not None}
    return [p for p in preferred if p in present] + sorted(
        str(v) for v in present if v not in preferred
    )


def _empty_reports(phase_cat: pd.Categorical, arm_cat: pd.Categorical) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "trial_id": pd.Categorical([]),
            "phase": pd.Categorical([], dtype=phase_cat.dtype),
            "arm": pd.Categorical([], dtype=arm_cat.dtype),
            "seed": pd.array([], dtype="Int64"),
            "step": np.array([], dtype=np.int64),
            "metric": pd.Categorical([]),
            "value": np.array([], dtype=float),
            "time_s": np.array([], dtype=float),
        }
    )


def _last_error(errors: Any) -> str | None:
    if not errors or not isinstance(errors[-1], dict):
        return None
    e = errors[-1]
    return f"{e.get('type') or 'Error'}: {e.get('message') or ''}".strip()


def _param_columns(records: list[TrialRecord]) -> dict[str, Any]:
    """`params` by dotted key, one column each (NA where a trial has no such param)."""
    n = len(records)
    cols: dict[str, list[Any]] = {}
    for i, r in enumerate(records):
        params = r.get("params") or {}
        if not params:
            continue
        for key, value in flatten(params).items():
            col = cols.get(key)
            if col is None:
                col = cols[key] = [None] * n
            col[i] = value
    out = {}
    for key in sorted(cols):
        col = cols[key]
        present = [v for v in col if v is not None]
        if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
            out[key] = _numeric([math.nan if v is None else v for v in col])
        else:
            out[key] = pd.array(
                [None if v is None else (v if isinstance(v, str) else str(v)) for v in col],
                dtype="string",
            )
    return out


def _decisions(doc: dict[str, Any], contract: dict[str, Any]) -> pd.DataFrame:
    """One row per treatment arm: decisions.json's entry, or NA while undecided."""
    rows: dict[Any, dict[str, Any]] = {
        d.get("arm"): d for d in doc.get("decisions") or [] if isinstance(d, dict)
    }
    arms = [a for a in facts.arm_names(contract)[1:]]
    arms += [a for a in rows if a not in arms]
    data: dict[str, Any] = {}
    for col in DECISION_COLUMNS:
        vals = [rows.get(arm, {}).get(col) if col != "arm" else arm for arm in arms]
        if col in ("effect", "ci_low", "ci_high", "p_value", "alpha_adjusted"):
            data[col] = _numeric([math.nan if v is None else v for v in vals])
        elif col in ("n_baseline", "n_arm"):
            data[col] = _ints(vals)
        else:
            data[col] = pd.array(vals, dtype="string")
    return pd.DataFrame(data, index=pd.RangeIndex(len(arms)))


def _inside_run(run_dir: Path, out: Path) -> Path | None:
    """`out` spelled from `run_dir` when it lies inside the run folder in any spelling (relative,
    absolute, with `..`, or through a link above the run folder), else None."""
    wanted = Path(os.path.abspath(out))
    for base, path in (
        (Path(os.path.abspath(run_dir)), wanted),
        (run_dir.resolve(), wanted.parent.resolve() / wanted.name),
    ):
        try:
            return run_dir / path.relative_to(base)
        except ValueError:
            continue
    return None


def _spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as a spreadsheet may open it: every header and text cell that would run as a formula
    (`=HYPERLINK(...)` as a metric name) prefixed with `'`; numeric columns untouched."""
    out = frame.rename(columns=lambda name: spreadsheet_safe(str(name)))
    for column in out.columns:
        values = out[column]
        if not (
            pd.api.types.is_numeric_dtype(values)
            or pd.api.types.is_bool_dtype(values)
            or pd.api.types.is_datetime64_any_dtype(values)
        ):
            out[column] = values.map(spreadsheet_safe, na_action="ignore")
    return out


def export_tables(
    results: RunResults, out_dir: str | os.PathLike, fmt: str = "parquet"
) -> list[Path]:
    """Write trials, reports and decisions as parquet or csv files in `out_dir`; return their
    paths."""
    if fmt not in ("parquet", "csv"):
        raise rf.UsageError(f"unknown export format {fmt!r}: use parquet or csv")
    out = Path(out_dir)
    inside = _inside_run(
        Path(results.run_dir), out
    )  # RUN_DIR/export: no link followed below the run folder
    if inside is not None:
        here = Path(results.run_dir)
        for part in inside.relative_to(here).parts:
            here = here / part
            if here.is_symlink():
                raise rf.RunError(
                    f"{here} is a symbolic link, not a folder inside the run folder: planner "
                    f"follows "
                    "no link there; remove it, or export with -o to a folder of your choice"
                )
        out = inside
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise rf.UsageError(f"cannot create {out}: {error.strerror or error}") from None
    paths = []
    for name in ("trials", "reports", "decisions"):
        frame: pd.DataFrame = getattr(results, name)
        path = out / f"{name}.{fmt}"
        if fmt == "parquet":
            data = frame.to_parquet(index=False)
        else:
            data = _spreadsheet_safe(frame).to_csv(index=False)
        try:
            write_atomic(path, data, root=results.run_dir if inside is not None else None)
        except OSError as error:
            raise rf.UsageError(f"cannot write {path}: {error.strerror or error}") from None
        paths.append(path)
    return paths
