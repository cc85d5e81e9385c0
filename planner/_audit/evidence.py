"""A run folder, read once for the audit: the evidence every finding is a function of.

Reading goes through the one reader (`planner._store.read`) and streams
trials.jsonl: a tuning trial keeps only what the findings need (status,
params, exposure, timing, where its decision metric went non-finite); a
confirmation or re-evaluation trial keeps its curve (every report's metrics)
and its config. So a 10,000-trial run audits in flat memory. A trial logged
twice (a resumed run) counts once: its last record.
"""

from __future__ import annotations

import gc
import math
import os
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from planner._core.errors import RunError
from planner._core.records import TrialError, TrialRecord
from planner._core.records import curve as record_curve
from planner._core.status import TrialStatus
from planner._store import facts
from planner._store import read as rf

CURVE_PHASES = ("confirm", "reeval")
_NON_FINITE = {"nan", "inf", "-inf", "NaN", "Infinity", "-Infinity"}


def number(value: Any) -> float:
    """A metric value as a float: "nan", "inf", "-inf" (how a run folder stores them) read back;
    else NaN."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in _NON_FINITE:
        return float(value.replace("Infinity", "inf"))
    return math.nan


def finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Trial:
    """One ended trial, as much of it as the audit uses."""

    trial_id: str
    phase: str
    arm: str
    seed: Any
    index: Any
    status: str
    exposure: Any
    params: dict[str, Any]
    duration_s: float | None
    s_per_step: float | None
    attempts: int
    errors: list[TrialError]
    violations: list[dict[str, Any]]
    metric_names: set[str]
    worker: str | None = (
        None  # host:pid of the process that ran it (the first trial of a worker pays its imports)
    )
    started: str | None = None
    startup_s: float | None = (
        None  # seconds before its first step began: the first report's time less its steps
    )
    nonfinite_step: Any = None  # first step where a decision metric was not finite (None: never)
    nonfinite_metric: str | None = None
    final: dict[str, float] = field(default_factory=dict)  # last value of each decision metric
    curve: list[tuple[Any, dict[str, float]]] | None = (
        None  # confirm / reeval: (step, metrics) per report
    )
    # confirm / reeval: the record's reports as `planner._core.records.curve` compares them
    curve_key: tuple = ()
    config: dict[str, Any] | None = None  # confirm / reeval, and one tuning trial per arm


@dataclass
class Evidence:
    """The run folder's facts: files as plain data, trials as `Trial`s."""

    run_dir: str
    run_id: str
    name: str
    contract: dict[str, Any]
    contract_path: str | None
    state: dict[str, Any]
    identity: dict[str, Any] | None
    selection: dict[str, Any] | None
    decisions: dict[str, Any] | None
    trials: list[Trial]
    # slim records (no reports), for the shared facts of planner._store.read
    records: list[TrialRecord]
    notes: list[str] = field(default_factory=list)

    @property
    def arms(self) -> list[str]:
        """The baseline first, then the treatments; arms seen only in trials last."""
        names = facts.arm_names(self.contract)
        for arm in dict.fromkeys(t.arm for t in self.trials):
            if arm not in names:
                names.append(arm)
        return names

    @property
    def baseline(self) -> str | None:
        return facts.contract_get(self.contract, "baseline.name")

    @property
    def metric(self) -> str | None:
        return facts.contract_get(self.contract, "metric.name")

    @property
    def heldout(self) -> str | None:
        return facts.contract_get(self.contract, "metric.heldout")

    @property
    def decision_metric(self) -> str | None:
        return self.heldout or self.metric

    @property
    def mode(self) -> str:
        return str(facts.contract_get(self.contract, "metric.mode", "max"))

    def mode_of(self, metric: str | None) -> str:
        """The direction `metric` is read in: the decision's for the held-out metric, else
        `mode`."""
        held = facts.contract_get(self.contract, "metric.heldout")
        return facts.contract_decision_mode(self.contract) if held and metric == held else self.mode

    @property
    def exposure(self) -> int | None:
        return facts.contract_get(self.contract, "budget.exposure")

    def of(self, *, arm: str | None = None, phase: str | None = None) -> list[Trial]:
        """The trials of an arm and/or a phase, in log order (indexed once: audits ask often)."""
        index = self.__dict__.get("_index")
        if index is None:
            index = {}
            for t in self.trials:
                for key in ((t.arm, t.phase), (t.arm, None), (None, t.phase), (None, None)):
                    index.setdefault(key, []).append(t)
            self.__dict__["_index"] = index
        return list(index.get((arm, phase), []))


def read_evidence(run_dir: str | os.PathLike) -> Evidence:
    """Read a run folder for the audit (UsageError when it is not one, RunError when a file is
    damaged)."""
    folder = rf.open_run(run_dir)
    contract = folder.contract()
    if not contract:
        raise RunError(
            f"{folder.path} has no frozen contract.yaml: there is nothing to audit against"
        )
    info = folder.run_info()
    watched = [
        m
        for m in (
            facts.contract_get(contract, "metric.name"),
            facts.contract_get(contract, "metric.heldout"),
        )
        if m
    ]
    notes: list[str] = []
    trials: list[Trial] = []
    records: list[TrialRecord] = []
    collecting = gc.isenabled()
    # the records read only grow: a cyclic collection every few thousand objects is wasted time
    gc.disable()
    try:
        _read_trials(folder, contract, watched, notes, trials, records)
    finally:
        if collecting:
            gc.enable()
    return Evidence(
        run_dir=str(folder.path),
        run_id=str(info.get("run_id")),
        name=str(info.get("name") or contract.get("name") or ""),
        contract=contract,
        contract_path=info.get("contract_path"),
        state=folder.state() or {},
        identity=folder.identity(),
        selection=folder.selection(),
        decisions=folder.decisions(),
        trials=trials,
        records=records,
        notes=notes,
    )


def _read_trials(
    folder: Any,
    contract: dict[str, Any],
    watched: list[str],
    notes: list[str],
    trials: list[Trial],
    records: list[TrialRecord],
) -> None:
    by_id: dict[str, int] = {}
    tuned_config_arms: set[str] = set()
    for record in folder.iter_trials(notes):  # checked by the shared schema, as every reader is
        if "trial_id" not in record:
            raise RunError(
                f"a record of {folder.file('trials.jsonl')} has no trial_id: the file is not a "
                f"trials log"
            )
        trial = _trial(record, watched, tuned_config_arms)
        records.append(facts.slim_record(record, contract, trial.metric_names))
        tid = trial.trial_id
        if tid in by_id:
            trials[by_id[tid]] = trial
            records[by_id[tid]] = records.pop()
            notes.append(f"trial {tid} is logged twice: the last record counts")
        else:
            by_id[tid] = len(trials)
            trials.append(trial)


def _trial(r: TrialRecord, watched: list[str], tuned_config_arms: set[str]) -> Trial:
    """The audit's view of one record (the record itself is left as it is).

    A tuning trial's reports are read at their ends only, and, for a trial
    that diverged, in one pass to find where: 10,000 trials x 100 reports stay cheap.
    """
    reports = facts.reports_of(r)
    phase, arm = str(r.get("phase")), str(r.get("arm"))
    first = reports[0] if reports and isinstance(reports[0], dict) else {}
    last_report = reports[-1] if reports and isinstance(reports[-1], dict) else {}
    last = last_report.get("metrics") or {}
    # The metric names of the first and last report (a union over every report would cost a pass): a
    # held-out metric reported mid-way through a tuning trial is found by the violation the runner
    # logs.
    names = set(first.get("metrics") or {}) | set(last)
    t = Trial(
        trial_id=str(r.get("trial_id")),
        phase=phase,
        arm=arm,
        seed=r.get("seed"),
        index=r.get("index"),
        status=str(r.get("status")),
        exposure=r.get("exposure"),
        params=dict(r.get("params") or {}),
        duration_s=r.get("duration_s") if finite(r.get("duration_s")) else None,
        s_per_step=facts.seconds_per_step(r),
        attempts=int(r.get("attempts") or 1),
        errors=[e for e in r.get("errors") or [] if isinstance(e, dict)],
        violations=[v for v in r.get("violations") or [] if isinstance(v, dict)],
        metric_names=names,
        worker=f"{r.get('host')}:{r.get('pid')}" if r.get("pid") is not None else None,
        started=str(r["started"]) if r.get("started") else None,
    )
    if t.s_per_step is not None and finite(first.get("time_s")) and finite(first.get("step")):
        t.startup_s = max(0.0, float(first["time_s"]) - float(first["step"]) * t.s_per_step)
    for m in watched:
        if m in last:
            t.final[m] = number(last[m])
    suspicious = (
        t.status == TrialStatus.DIVERGED
        or any(not math.isfinite(v) for v in t.final.values())
        or any(v.get("kind") == "diverged" for v in t.violations)
    )
    if suspicious:  # where it went non-finite: one pass over the reports of this trial only
        for p in reports:
            metrics = (p.get("metrics") or {}) if isinstance(p, dict) else {}
            bad = next(
                (m for m in watched if m in metrics and not math.isfinite(number(metrics[m]))), None
            )
            if bad is not None:
                t.nonfinite_step, t.nonfinite_metric = p.get("step"), bad
                break
        if t.nonfinite_step is None:
            logged = next((v for v in t.violations if v.get("kind") == "diverged"), None)
            t.nonfinite_step = logged.get("step") if logged else t.exposure
    if phase in CURVE_PHASES:
        t.curve = [
            (p.get("step"), {k: number(v) for k, v in (p.get("metrics") or {}).items()})
            for p in reports
            if isinstance(p, dict)
        ]
        t.curve_key = record_curve(r)
        for (
            _,
            metrics,
        ) in t.curve:  # every name a confirmation trial reported (a sparse train row included)
            t.metric_names.update(metrics)
        t.config = r.get("config") if isinstance(r.get("config"), dict) else None
    elif arm not in tuned_config_arms and isinstance(r.get("config"), dict):
        tuned_config_arms.add(arm)
        t.config = r.get("config")
    return t
