"""What a run's records show, computed beside the one reader (planner._store.read), without pandas.

`plan status`, the report, `load_run`, the audit, MLflow and reeval derive the same
facts from the same records here: the failures, the protocol violations, the held-out
ledger, the budget used, each trial's seconds per step, and the small accessors of the
frozen contract and of plan.json. Every function is a function of its arguments: it
returns a value and never writes into the records it is given (a record is a
`TrialRecord`, planner._core.records).

A slimmed record (`slim_record`) is a new record without its reports, unless they
show a violation, that carries a `summary` (metric names, first and last step and time)
so the facts below answer the same for it as for the full record.
"""

from __future__ import annotations

import math
import re
from typing import Any

from planner._contract.paths import get_path
from planner._core.contract_terms import decision_mode
from planner._core.records import (
    ReportSummary,
    TrialRecord,
    error_key,
    first_line,
)
from planner._core.status import UNUSABLE, TrialStatus
from planner._core.text import parse_duration

# ---------------------------------------------------------------- the frozen contract and plan.json


def contract_get(contract: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """The value at a dotted path of the frozen contract; `default` when it is absent or null."""
    value = get_path(contract, dotted, None)
    return default if value is None else value


def contract_decision_mode(contract: dict[str, Any]) -> str:
    """The frozen contract's decision direction (`metric.heldout_mode` for a held-out metric, else
    `metric.mode`)."""
    return decision_mode(
        str(contract_get(contract, "metric.mode", "max")),
        contract_get(contract, "metric.heldout"),
        contract_get(contract, "metric.heldout_mode"),
    )


def arm_names(contract: dict[str, Any]) -> list[str]:
    """The baseline first, then the treatment arms, in contract order."""
    names = [contract_get(contract, "baseline.name")]
    names += [a.get("name") for a in contract.get("arms") or [] if isinstance(a, dict)]
    return [n for n in names if n]


def planned_count(plan: dict[str, Any] | None) -> int | None:
    """How many trials plan.json plans: its `planned_count`, else its listed trials counted."""
    if not plan:
        return None
    for key in ("planned_count", "planned_trials"):
        if isinstance(plan.get(key), int):
            return plan[key]
    return len(plan_entries(plan)) or None


def plan_entries(plan: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The trials plan.json lists, each with its phase, in plan order (a count: `planned_count`)."""
    if not plan:
        return []
    out: list[dict[str, Any]] = []
    for phase in plan.get("phases") or []:
        name = phase.get("phase") or phase.get("name")
        for trial in phase.get("trials") or []:
            out.append({"phase": trial.get("phase", name), **trial})
    for trial in plan.get("trials") or []:  # a flat list is accepted too
        out.append(trial)
    return out


# ---------------------------------------------------------------- one record's reports


def reports_of(record: TrialRecord) -> list[Any]:
    """The record's reports; anything but a list (a damaged record) reads as none."""
    reports = record.get("reports")
    return reports if isinstance(reports, list) else []


def summarize_reports(
    record: TrialRecord, names: set[str] | frozenset[str] | None = None
) -> ReportSummary:
    """The summary of a record's reports (its own `summary` when the reader slimmed it).

    `names`: the metric names when the caller already has them (else the union over every report).
    """
    summary = record.get("summary")
    if isinstance(summary, ReportSummary):
        return summary
    reports = reports_of(record)
    first = reports[0] if reports and isinstance(reports[0], dict) else {}
    last = reports[-1] if reports and isinstance(reports[-1], dict) else {}
    if names is None:
        names = set().union(*[p.get("metrics") or {} for p in reports if isinstance(p, dict)])
    return ReportSummary(
        frozenset(names),
        first.get("step"),
        first.get("time_s"),
        last.get("step"),
        last.get("time_s"),
    )


def record_last_step(record: TrialRecord) -> Any:
    """The step of the record's last report (None without reports)."""
    return summarize_reports(
        record, frozenset()
    ).last_step  # the names are not needed: not gathered


def report_timing(record: TrialRecord) -> tuple[Any, Any, Any, Any]:
    """(first step, its time_s, last step, its time_s) of the record's reports."""
    s = summarize_reports(record, frozenset())
    return s.first_step, s.first_time_s, s.last_step, s.last_time_s


def seconds_per_step(record: TrialRecord) -> float | None:
    """Seconds per step of one trial: the slope of its reports' time_s over their steps.

    Set-up inside the trainable (before the first report) is not a step. A trial
    with one report: its time_s over its step. None without timed reports.
    """
    s0, t0, s1, t1 = report_timing(record)
    if not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in (s0, t0, s1, t1)
    ):
        return None
    if s1 > s0:
        return max(0.0, (t1 - t0) / (s1 - s0))
    return t1 / s1 if s1 > 0 else None


def metric_names(record: TrialRecord) -> frozenset[str]:
    """The names of the metrics a trial reported."""
    return summarize_reports(record).metric_names


def slim_record(
    record: TrialRecord,
    contract: dict[str, Any],
    names: set[str] | frozenset[str] | None = None,
    *,
    limits: tuple[Any, Any] | None = None,
) -> TrialRecord:
    """A new record: `record` without its reports, unless they show a violation (kept for
    `violations`), with the `summary` the facts need of them. `record` itself is left as it is.

    `names`: the metric names when the caller already has them. A run of 10k trials x 100 reports
    then fits in little memory. `limits`: `report_limits(contract)`, when a caller slims many
    records.
    """
    summary = summarize_reports(record, names)
    slim: TrialRecord = {**record, "summary": summary}
    if not reports_kept(record, summary, report_limits(contract) if limits is None else limits):
        slim["reports"] = []
    return slim


def report_limits(contract: dict[str, Any]) -> tuple[Any, Any]:
    """(budget.exposure, metric.heldout): what `reports_kept` holds a record's reports against."""
    return contract_get(contract, "budget.exposure"), contract_get(contract, "metric.heldout")


def reports_kept(record: TrialRecord, summary: ReportSummary, limits: tuple[Any, Any]) -> bool:
    """True when a slimmed record keeps its reports: they show a violation (a report past the
    budget's exposure, the held-out metric reported while tuning), which `violations` reads them
    for. `limits`: `report_limits(contract)`."""
    exposure, heldout = limits
    steps = [s for s in (record.get("exposure"), summary.last_step) if isinstance(s, int | float)]
    return (exposure is not None and any(s > exposure for s in steps)) or (
        heldout is not None and record.get("phase") == "tune" and heldout in summary.metric_names
    )


def kept_of_tuning(
    record: TrialRecord, contract: dict[str, Any], metric: str, k: int | None = None
) -> TrialRecord:
    """What a running driver keeps of a tuning trial once its whole record is on disk
    (trials.jsonl): `slim_record` (the `summary` the facts read; every report when the reports show
    a violation) with the last `k` (default 1) reports that hold `metric`, the selection metric:
    all that selection reads of a tuning trial (`_stats.select.score`: the final value, or the mean
    of the last k) and what the searcher is told. A sweep of trials with 100 reports each then
    holds a few of each in the driver, not all. A new record; `record` is left as it is."""
    slim = slim_record(record, contract)
    if not slim["reports"]:
        holding: list[Any] = [
            p
            for p in reports_of(record)
            if isinstance(p, dict) and isinstance(p.get("metrics"), dict) and metric in p["metrics"]
        ]
        slim["reports"] = holding[-max(k or 1, 1) :]
    return slim


# ---------------------------------------------------------------- failures and violations


def traceback_line(traceback: str | None) -> str:
    """The line of a traceback that says where it broke: its innermost `File ...` line."""
    if not traceback:
        return ""
    frames = [line.strip() for line in traceback.splitlines() if line.strip().startswith("File ")]
    if frames:
        return frames[-1]
    lines = [line.strip() for line in traceback.splitlines() if line.strip()]
    return lines[0] if lines else ""


def failures(records: list[TrialRecord]) -> list[dict[str, Any]]:
    """Trials that did not end well (UNUSABLE), and trials that needed retries, with their last
    error."""
    out = []
    for r in records:
        errors = r.get("errors") or []
        status = r.get("status")
        if status not in UNUSABLE and not errors:
            continue
        last = errors[-1] if errors and isinstance(errors[-1], dict) else {}
        message = last.get("message") or ""
        if not last and status == TrialStatus.DIVERGED:
            message = "the decision metric went NaN or infinite"
        out.append(
            {
                "trial_id": r.get("trial_id"),
                "phase": r.get("phase"),
                "arm": r.get("arm"),
                "seed": r.get("seed"),
                "status": status,
                "attempts": r.get("attempts", 1),
                "error_type": last.get("type") or "",
                "message": message,
                "where": traceback_line(last.get("traceback")),
                "retried": len(errors) > 0 and status not in UNUSABLE,
                "error": _one_line(last.get("type") or "", message),
            }
        )
    return out


def _one_line(kind: str, message: str) -> str:
    """ "Type: first line of the message", as `plan run`'s summary shows an error (the traceback
    and the last lines of stderr stay in trials.jsonl and the trial's logs)."""
    line = first_line(message)
    return f"{kind}: {line}" if kind and line else kind or line


def failure_groups(
    failures: list[dict[str, Any]], run_dir: str | None = None
) -> list[dict[str, Any]]:
    """`failures` grouped by their one-line error as `plan run` groups them
    (planner._core.records.error_key), in order of first occurrence: [{"error", "status", "where",
    "first", "trial_ids", "count"}]; with `run_dir`, an error that does not say where its logs are
    says so (the first trial's folder)."""
    groups: dict[tuple[str, Any], dict[str, Any]] = {}
    for f in failures:
        group = groups.setdefault(
            (error_key(f["error"]), f["status"]),
            {
                "error": f["error"],
                "error_type": f["error_type"],
                "status": f["status"],
                "where": f["where"],
                "first": f["trial_id"],
                "trial_ids": [],
                "count": 0,
            },
        )
        group["trial_ids"].append(f["trial_id"])
        group["count"] += 1
    out = list(groups.values())
    if run_dir is not None:
        for group in out:
            if group["error_type"] and "(logs in " not in group["error"]:
                group["logs"] = f"{run_dir}/trials/{group['first']}"
    return out


NOT_VIOLATIONS = {
    "diverged"
}  # logged as notes by the runner, but a result (see failures), not a broken rule
_PAST_BUDGET = re.compile(r"step (\d+) is past the budget", re.IGNORECASE)


def _logged_violations(
    r: TrialRecord, base: dict[str, Any], kinds: set[str]
) -> list[dict[str, Any]]:
    out = []
    for v in r.get("violations") or []:
        if not isinstance(v, dict) or v.get("kind") in NOT_VIOLATIONS:
            continue
        kind = str(v.get("kind", "unknown"))
        if (
            kind == "heldout_in_tuning" and kind in kinds
        ):  # one per trial, at its first step (older runs
            continue  # logged one per step)
        kinds.add(kind)
        detail = ", ".join(f"{k}={v[k]}" for k in v if k not in ("kind", "step"))
        out.append(
            {**base, "kind": kind, "step": v.get("step"), "detail": detail, "source": "logged"}
        )
    return out


def _record_violations(
    r: TrialRecord, base: dict[str, Any], kinds: set[str], exposure: Any, heldout: Any
) -> list[dict[str, Any]]:
    """What the record's reports and protocol error show that it did not log."""
    out = []
    reports = [p for p in reports_of(r) if isinstance(p, dict)]
    last_step = record_last_step(r)
    if (
        exposure is not None
        and "report_past_budget" not in kinds
        and any(isinstance(s, int | float) and s > exposure for s in (r.get("exposure"), last_step))
    ):
        past = [
            p.get("step")
            for p in reports
            if isinstance(p.get("step"), int | float) and p["step"] > exposure
        ]
        kinds.add("report_past_budget")
        out.append(
            {
                **base,
                "kind": "report_past_budget",
                "step": past[0] if past else r.get("exposure"),
                "detail": f"budget={exposure}",
                "source": "reports",
            }
        )
    if (
        heldout
        and r.get("phase") == "tune"
        and "heldout_in_tuning" not in kinds
        and heldout in metric_names(r)
    ):
        steps = [p.get("step") for p in reports if heldout in (p.get("metrics") or {})]
        if steps:
            kinds.add("heldout_in_tuning")
            out.append(
                {
                    **base,
                    "kind": "heldout_in_tuning",
                    "step": steps[0],
                    "detail": f"metric={heldout}",
                    "source": "reports",
                }
            )
    if r.get("status") == TrialStatus.PROTOCOL_ERROR and not kinds:
        errors = r.get("errors") or [{}]
        message = str((errors[-1] or {}).get("message", ""))
        past_budget = _PAST_BUDGET.search(message)
        out.append(
            {
                **base,
                "kind": "report_past_budget" if past_budget else "protocol_error",
                "step": int(past_budget.group(1)) if past_budget else r.get("exposure"),
                "detail": message,
                "source": "error",
            }
        )
    return out


def violations(records: list[TrialRecord], contract: dict[str, Any]) -> list[dict[str, Any]]:
    """Every protocol violation: logged ones, plus what the records show unlogged.

    Kinds: `heldout_in_tuning` (the held-out metric reported while tuning: test
    exposure), `report_past_budget` (a report after step budget.exposure), and
    whatever other kinds the run logged. `source` says where it was found:
    `logged` (the record's violations), `reports` (its reports show it) or
    `error` (its protocol error says so; a protocol_error trial is always listed).
    """
    exposure = contract_get(contract, "budget.exposure")
    heldout = contract_get(contract, "metric.heldout")
    out = []
    for r in records:
        base = {
            "trial_id": r.get("trial_id"),
            "phase": r.get("phase"),
            "arm": r.get("arm"),
            "seed": r.get("seed"),
        }
        kinds: set[str] = set()
        out += _logged_violations(r, base, kinds)
        out += _record_violations(r, base, kinds, exposure, heldout)
    return out


# ---------------------------------------------------------------- the held-out ledger and the
# budget


def heldout_tuning_trials(records: list[TrialRecord], heldout: str | None) -> list[TrialRecord]:
    """Tuning trials that reported the held-out metric (test exposure): one entry per trial, the
    last record of a trial logged twice. Their reports show it, or (reports the driver rebuilt from
    what Tune streamed, where the held-out metric is never sent) their logged `heldout_in_tuning`
    violation."""
    if not heldout:
        return []
    latest = {r.get("trial_id"): r for r in records if r.get("phase") == "tune"}
    return [
        r
        for r in latest.values()
        if heldout in metric_names(r)
        or any(
            isinstance(v, dict) and v.get("kind") == "heldout_in_tuning"
            for v in r.get("violations") or []
        )
    ]


def heldout_ledger(records: list[TrialRecord], contract: dict[str, Any]) -> dict[str, Any]:
    """How often the held-out metric was evaluated, against its cap.

    Evaluations are the confirmation and reeval trials that reported it; a
    tuning trial that reported it is test exposure, counted apart.
    """
    metric = contract_get(contract, "metric.heldout")
    cap = contract_get(contract, "budget.max_heldout_evaluations")
    by_phase = {"confirm": 0, "reeval": 0, "tune": 0}
    by_arm: dict[str | None, int] = {}  # a record without an arm counts under None
    if metric:
        for r in records:
            phase = r.get("phase")
            if phase is None or phase not in by_phase:
                continue
            if metric in metric_names(r):
                by_phase[phase] += 1
                if phase != "tune":
                    by_arm[r.get("arm")] = by_arm.get(r.get("arm"), 0) + 1
    evaluations = by_phase["confirm"] + by_phase["reeval"]
    return {
        "metric": metric,
        "evaluations": evaluations,
        "confirm": by_phase["confirm"],
        "reeval": by_phase["reeval"],
        "tuning_exposures": len(heldout_tuning_trials(records, metric)),
        "by_arm": by_arm,
        "cap": cap,
        "over_cap": cap is not None and evaluations > cap,
    }


def _finite(value: Any) -> float:
    """A number from a record, 0 when it is absent or not a finite number."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value
        and abs(value) != math.inf
    ):
        return float(value)
    return 0.0


def _seconds(value: Any) -> float | None:
    """A contract's duration in seconds (`parse_duration`); None when absent or unreadable."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError:
        return None


def budget_used(
    records: list[TrialRecord],
    contract: dict[str, Any],
    state: dict[str, Any] | None,
    plan: dict[str, Any] | None,
) -> dict[str, Any]:
    """Trials, steps of exposure and wall time used, against what was planned and allowed.

    `plan reeval` trials are not part of the plan: they are counted apart (`reeval_trials`,
    `reeval_steps`).
    """
    reeval = [r for r in records if r.get("phase") == "reeval"]
    records = [r for r in records if r.get("phase") != "reeval"]
    exposure = contract_get(contract, "budget.exposure")
    n_planned = planned_count(plan)
    steps = int(sum(_finite(r.get("exposure")) for r in records))
    st_budget = (state or {}).get("budget") or {}
    return {
        "trials_ended": len(records),
        "trials_planned": n_planned,
        "max_trials": contract_get(contract, "budget.max_trials"),
        "steps": steps,
        "steps_planned": None if not (n_planned and exposure) else n_planned * exposure,
        "unit": contract_get(contract, "budget.unit", "step"),
        "wall_time_s": st_budget.get("wall_time_s"),
        "max_wall_time_s": _seconds(contract_get(contract, "budget.max_wall_time")),
        "trial_time_s": round(sum(_finite(r.get("duration_s")) for r in records), 3),
        "reeval_trials": len(reeval),
        "reeval_steps": int(sum(_finite(r.get("exposure")) for r in reeval)),
    }


# ---------------------------------------------------------------- resumes


def resumes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each time the run was resumed (events.jsonl's `run_resumed`, in order): when, the state it
    resumed from, and how many trials started after it (until the next resume), of tuning among
    them. A resumed run draws its tuning configurations as an uninterrupted one would
    (docs/running.md, "Resume")."""
    out: list[dict[str, Any]] = []
    for e in events:
        kind = e.get("event")
        if kind == "run_resumed":
            out.append(
                {
                    "at": e.get("time"),
                    "previous_state": e.get("previous_state"),
                    "trials_after": 0,
                    "tuning_trials_after": 0,
                }
            )
        elif kind == "trial_started" and out:
            out[-1]["trials_after"] += 1
            out[-1]["tuning_trials_after"] += e.get("phase") == "tune"
    return out


def resume_line(resume: dict[str, Any]) -> str:
    """A resume of the run (one of `resumes`), as `plan status` and the report say it."""
    return (
        f"resumed {resume.get('at') or '?'} (from {resume.get('previous_state') or '?'}): "
        f"{resume.get('trials_after', 0)} trials started after it, "
        f"{resume.get('tuning_trials_after', 0)} of them tuning, drawn as an uninterrupted run "
        f"draws"
    )
