"""A run folder's results as pandas DataFrames: `planner.load_run(run_dir)`.

    run = planner.load_run("runs/adam-vs-sgd/20261129-181700-a3f2")
    run.trials      one row per ended trial: ids, status, exposure, timing, param.<key>, final.<metric>
    run.reports     long format: one row per (trial, report, metric)
    run.decisions   one row per treatment arm, from decisions.json (NA until decided)

Frames are built from column arrays collected while reading trials.jsonl, never
from per-row dicts (see shared/design/MEASUREMENTS.md). A torn last line of
trials.jsonl is skipped and listed in `run.notes`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner import _runfolder_read as rf

TRIAL_COLUMNS = ["trial_id", "phase", "arm", "seed", "index", "status", "exposure", "attempts",
                 "duration_s", "started", "ended", "host", "n_reports", "error"]
REPORT_COLUMNS = ["trial_id", "phase", "arm", "seed", "step", "metric", "value", "time_s"]
DECISION_COLUMNS = ["arm", "decision", "effect", "ci_low", "ci_high", "p_value", "alpha_adjusted",
                    "n_baseline", "n_arm", "reason"]
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
    failures: list[dict[str, Any]] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    heldout: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def run_state(self) -> str:
        return str(self.state.get("state") or "unknown")

    @property
    def baseline(self) -> str | None:
        return rf.contract_get(self.contract, "baseline.name")

    @property
    def arms(self) -> list[str]:
        """The baseline first, then the treatments; arms seen only in trials come last."""
        names = rf.arm_names(self.contract)
        for arm in self.trials["arm"].dropna().unique().tolist() if len(self.trials) else []:
            if arm not in names:
                names.append(arm)
        return names

    @property
    def metric(self) -> str | None:
        return rf.contract_get(self.contract, "metric.name")

    @property
    def decision_metric(self) -> str | None:
        return rf.contract_get(self.contract, "metric.heldout") or self.metric

    def __repr__(self) -> str:
        return (f"RunResults({self.run_id!r}, state={self.run_state!r}, trials={len(self.trials)}, "
                f"reports={len(self.reports)}, decisions={len(self.decisions)})")


def load_run(run_dir: str | os.PathLike, *, reports: bool = True) -> RunResults:
    """Read a run folder into DataFrames. `reports=False` skips the long reports table."""
    folder = rf.open_run(run_dir)
    contract = folder.contract()
    info = folder.run_info()
    lines = folder.trials()
    records, notes = _dedupe(lines.records)
    notes = lines.notes + notes
    state = folder.state() or {}
    plan = folder.plan()
    trials, report_frame = _frames(records, want_reports=reports)
    decision_doc = folder.decisions() or {}
    return RunResults(
        run_dir=folder.path, run_id=str(info.get("run_id")),
        name=str(info.get("name") or contract.get("name") or ""), contract=contract, state=state,
        trials=trials, reports=report_frame, decisions=_decisions(decision_doc, contract),
        decision_info={k: v for k, v in decision_doc.items() if k != "decisions"},
        identity=folder.identity(), plan=plan, selection=folder.selection(), configs=folder.configs(),
        lock=folder.lock(), failures=rf.failures(records), violations=rf.violations(records, contract),
        heldout=rf.heldout_ledger(records, contract), budget=rf.budget_used(records, contract, state, plan),
        notes=notes,
    )


def _dedupe(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Keep the last record of a trial logged twice (a resumed run re-ran it)."""
    seen: dict[Any, int] = {}
    for i, r in enumerate(records):
        if "trial_id" not in r:
            raise rf.RunError(f"record {i + 1} of trials.jsonl has no trial_id: the file is not a trials log")
        seen[r["trial_id"]] = i
    if len(seen) == len(records):
        return records, []
    keep = sorted(seen.values())
    return [records[i] for i in keep], [f"{len(records) - len(keep)} trial(s) were logged twice; the last record of each is used"]


def _numeric(values: list[Any]) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)


def _frames(records: list[dict[str, Any]], want_reports: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(records)
    get = dict.get
    trial_ids = [str(get(r, "trial_id")) for r in records]
    phases = [get(r, "phase") for r in records]
    arms = [get(r, "arm") for r in records]
    seeds = [get(r, "seed") for r in records]

    # Reports, long format: flat value lists per column, plus run lengths for the repeated keys.
    steps: list[Any] = []
    times: list[Any] = []
    values: list[Any] = []
    run_trial: list[int] = []
    run_metric: list[int] = []
    run_length: list[int] = []
    metric_code: dict[str, int] = {}
    finals: dict[str, np.ndarray] = {}
    n_reports = np.zeros(n, dtype=np.int64)
    nan = math.nan
    for i, r in enumerate(records):
        reps = get(r, "reports") or []
        n_reports[i] = len(reps)
        if not reps:
            r["_metric_names"] = set()
            continue
        mets = [get(p, "metrics") or {} for p in reps]
        names = set().union(*mets)
        r["_metric_names"] = names
        step_i = [get(p, "step") for p in reps] if want_reports else None
        time_i = [get(p, "time_s", nan) for p in reps] if want_reports else None
        for name in sorted(names):
            vals = [get(m, name) for m in mets]
            if None in vals:
                keep = [j for j, v in enumerate(vals) if v is not None]
                vals = [vals[j] for j in keep]
                s_i = [step_i[j] for j in keep] if want_reports else None
                t_i = [time_i[j] for j in keep] if want_reports else None
            else:
                s_i, t_i = step_i, time_i
            column = finals.get(name)
            if column is None:
                column = finals[name] = np.full(n, nan)
            last = vals[-1]
            column[i] = last if isinstance(last, int | float) else nan
            if want_reports:
                code = metric_code.setdefault(name, len(metric_code))
                steps.extend(s_i)
                times.extend(t_i)
                values.extend(vals)
                run_trial.append(i)
                run_metric.append(code)
                run_length.append(len(vals))

    phase_cat = pd.Categorical(phases, categories=_ordered(phases, PHASES))
    arm_cat = pd.Categorical(arms, categories=_ordered(arms, []))
    seed_arr = pd.array(seeds, dtype="Int64")
    columns: dict[str, Any] = {
        "trial_id": pd.array(trial_ids, dtype="string"),
        "phase": phase_cat,
        "arm": arm_cat,
        "seed": seed_arr,
        "index": pd.array([get(r, "index") for r in records], dtype="Int64"),
        "status": pd.Categorical([get(r, "status") for r in records]),
        "exposure": pd.array([get(r, "exposure") for r in records], dtype="Int64"),
        "attempts": pd.array([get(r, "attempts", 1) for r in records], dtype="Int64"),
        "duration_s": _numeric([get(r, "duration_s", nan) for r in records]),
        "started": pd.to_datetime(pd.Series([get(r, "started") for r in records], dtype=object), utc=True,
                                  format="ISO8601", errors="coerce").array,
        "ended": pd.to_datetime(pd.Series([get(r, "ended") for r in records], dtype=object), utc=True,
                                format="ISO8601", errors="coerce").array,
        "host": pd.array([get(r, "host") for r in records], dtype="string"),
        "n_reports": n_reports,
        "error": pd.array([_last_error(get(r, "errors")) for r in records], dtype="string"),
    }
    for key, col in _param_columns(records).items():
        columns[f"param.{key}"] = col
    for name in sorted(finals):
        columns[f"final.{name}"] = finals[name]
    trials = pd.DataFrame(columns, index=pd.RangeIndex(n))

    if not want_reports or not run_length:
        return trials, _empty_reports(phase_cat, arm_cat)
    lengths = np.asarray(run_length, dtype=np.int64)
    trial_idx = np.repeat(np.asarray(run_trial, dtype=np.int64), lengths)
    metric_names = sorted(metric_code, key=metric_code.get)
    tid_codes = pd.Categorical(trial_ids).codes if len(set(trial_ids)) == n else None
    reports = pd.DataFrame({
        "trial_id": (pd.Categorical.from_codes(np.asarray(tid_codes)[trial_idx], categories=sorted(set(trial_ids)))
                     if tid_codes is not None else pd.Categorical(np.asarray(trial_ids, dtype=object)[trial_idx])),
        "phase": pd.Categorical.from_codes(phase_cat.codes[trial_idx], dtype=phase_cat.dtype),
        "arm": pd.Categorical.from_codes(arm_cat.codes[trial_idx], dtype=arm_cat.dtype),
        "seed": seed_arr[trial_idx],
        "step": _int_or_float(steps),
        "metric": pd.Categorical.from_codes(np.repeat(np.asarray(run_metric, dtype=np.int64), lengths),
                                            categories=metric_names),
        "value": _numeric(values),
        "time_s": _numeric(times),
    })
    return trials, reports


def _int_or_float(values: list[Any]) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return _numeric(values)


def _ordered(values: list[Any], preferred: list[str]) -> list[str]:
    present = {v for v in values if v is not None}
    return [p for p in preferred if p in present] + sorted(str(v) for v in present if v not in preferred)


def _empty_reports(phase_cat: pd.Categorical, arm_cat: pd.Categorical) -> pd.DataFrame:
    return pd.DataFrame({
        "trial_id": pd.Categorical([]), "phase": pd.Categorical([], dtype=phase_cat.dtype),
        "arm": pd.Categorical([], dtype=arm_cat.dtype), "seed": pd.array([], dtype="Int64"),
        "step": np.array([], dtype=np.int64), "metric": pd.Categorical([]),
        "value": np.array([], dtype=float), "time_s": np.array([], dtype=float),
    })


def _last_error(errors: Any) -> str | None:
    if not errors or not isinstance(errors[-1], dict):
        return None
    e = errors[-1]
    return f"{e.get('type') or 'Error'}: {e.get('message') or ''}".strip()


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def _param_columns(records: list[dict[str, Any]]) -> dict[str, Any]:
    """`params` by dotted key, one column each (NA where a trial has no such param)."""
    n = len(records)
    cols: dict[str, list[Any]] = {}
    for i, r in enumerate(records):
        params = r.get("params") or {}
        if not params:
            continue
        flat: dict[str, Any] = {}
        _flatten("", params, flat)
        for key, value in flat.items():
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
            out[key] = pd.array([None if v is None else (v if isinstance(v, str) else str(v)) for v in col],
                                dtype="string")
    return out


def _decisions(doc: dict[str, Any], contract: dict[str, Any]) -> pd.DataFrame:
    """One row per treatment arm: decisions.json's entry, or NA while undecided."""
    rows = {d.get("arm"): d for d in doc.get("decisions") or [] if isinstance(d, dict)}
    arms = [a for a in rf.arm_names(contract)[1:]]
    arms += [a for a in rows if a not in arms]
    data: dict[str, Any] = {}
    for col in DECISION_COLUMNS:
        vals = [rows.get(arm, {}).get(col) if col != "arm" else arm for arm in arms]
        if col in ("effect", "ci_low", "ci_high", "p_value", "alpha_adjusted"):
            data[col] = _numeric([math.nan if v is None else v for v in vals])
        elif col in ("n_baseline", "n_arm"):
            data[col] = pd.array(vals, dtype="Int64")
        else:
            data[col] = pd.array(vals, dtype="string")
    return pd.DataFrame(data, index=pd.RangeIndex(len(arms)))


def export_tables(results: RunResults, out_dir: str | os.PathLike, fmt: str = "parquet") -> list[Path]:
    """Write trials, reports and decisions as parquet or csv files in `out_dir`; return their paths."""
    if fmt not in ("parquet", "csv"):
        raise rf.UsageError(f"unknown export format {fmt!r}: use parquet or csv")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise rf.UsageError(f"cannot create {out}: {error.strerror or error}") from None
    paths = []
    for name in ("trials", "reports", "decisions"):
        frame: pd.DataFrame = getattr(results, name)
        path = out / f"{name}.{fmt}"
        tmp = path.with_name(path.name + ".tmp")
        if fmt == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        os.replace(tmp, path)
        paths.append(path)
    return paths
