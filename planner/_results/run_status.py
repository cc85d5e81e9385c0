"""`plan status RUN_DIR`: where a run stands, read from its folder alone.

`read_status(run_dir)` gathers the facts (plain data; no pandas, no Ray, so it
starts fast and can run while `plan run` writes); `format_status(status)`
returns the text the CLI prints.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from functools import partial
from typing import Any, TypedDict

from planner._core.records import TrialRecord, finite_final_value
from planner._core.status import RunState, TrialStatus
from planner._core.text import clock, format_duration, number, terminal_safe
from planner._core.text_tables import text_table
from planner._data.checks import data_summary, summary_lines
from planner._store import facts
from planner._store import read as rf
from planner._store.claims import decision_findings
from planner._store.live import dashboard_command, read_live_progress, read_live_reports
from planner._store.lock import stale_reason

# keyed by a record's phase, which a damaged record lacks (None sorts last)
PHASE_ORDER: dict[str | None, int] = {"tune": 0, "confirm": 1, "reeval": 2}


def _lock_alive(lock: dict[str, Any] | None) -> bool | None:
    """True/False when the holder runs on this host; None when it cannot be told from here.

    The lock's own rule (`stale_reason`): a lock whose process is gone, whose pid
    now belongs to another process, or that was taken before a reboot is not alive.
    """
    if not lock or lock.get("host") != socket.gethostname() or not isinstance(lock.get("pid"), int):
        return None
    return stale_reason(lock) is None


class RunningTrial(TypedDict):
    """A trial started and not ended, with its latest live report (None before its first)."""

    trial_id: str
    phase: str | None
    arm: str | None
    step: int | None
    time_s: float | None
    metric: str | None
    value: float | None


class Live(TypedDict):
    """What the driver last wrote of its progress (live/progress.json); None in every field when the
    run wrote none (a run of an earlier planner, or one that never started a trial)."""

    phase: str | None
    updated: str | None
    steps_done: int | None
    steps_expected: float | None
    eta_s: float | None


def _slim_with_finals(
    folder: rf.RunFolder, contract: dict[str, Any], notes: list[str]
) -> tuple[list[TrialRecord], dict[str, float]]:
    """The trial records slimmed (planner._store.facts.slim_record: memory stays flat), and trial
    id -> the finite final value of a completed trial's metric (the tuning metric while tuning, the
    decision metric after), taken from its reports before they are dropped."""
    metric = facts.contract_get(contract, "metric.name")
    decision_metric = facts.contract_get(contract, "metric.decision_metric") or metric
    limits = facts.report_limits(contract)
    records: list[TrialRecord] = []
    finals: dict[str, float] = {}
    for record in folder.iter_trials(notes):
        wanted = metric if record.get("phase") == "tune" else decision_metric
        value = None if wanted is None else finite_final_value(dict(record), wanted)
        if value is not None and record.get("status") == TrialStatus.COMPLETED:
            finals[str(record.get("trial_id"))] = value
        records.append(facts.slim_record(record, contract, limits=limits))
    return records, finals


def _best(values: list[float], mode: str) -> float | None:
    if not values:
        return None
    return max(values) if mode == "max" else min(values)


def _running_trials(
    folder: rf.RunFolder, running: list[str], planned: list[dict], metric: str | None
) -> list[RunningTrial]:
    """Each running trial with its latest live report: the step and the value of the tuning
    metric."""
    live = read_live_reports(folder.path) if running else {}
    by_id = {p.get("trial_id"): p for p in planned}
    out: list[RunningTrial] = []
    for trial_id in running:
        entry = by_id.get(trial_id) or {}
        reports = live.get(trial_id)
        last = reports[-1] if reports else None
        out.append(
            RunningTrial(
                trial_id=str(trial_id),
                phase=entry.get("phase"),
                arm=entry.get("arm"),
                step=None if last is None else last.step,
                time_s=None if last is None else last.time_s,
                metric=metric,
                value=None if last is None or metric is None else last.metrics.get(metric),
            )
        )
    return out


def _live(folder: rf.RunFolder) -> Live:
    p = read_live_progress(folder.path)
    if p is None:
        return Live(phase=None, updated=None, steps_done=None, steps_expected=None, eta_s=None)
    return Live(
        phase=p.phase,
        updated=p.updated,
        steps_done=p.steps_done,
        steps_expected=p.steps_expected,
        eta_s=p.eta_s,
    )


def read_status(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The facts `plan status` shows, as plain data (`plan status --json` prints it)."""
    folder = rf.open_run(run_dir)
    contract = folder.contract()
    info = folder.run_info()
    state = folder.state() or {}
    plan = folder.plan()
    notes: list[str] = []
    records, finals = _slim_with_finals(folder, contract, notes)
    planned = facts.plan_entries(plan)
    arm_order: dict[str | None, int] = {a: i for i, a in enumerate(facts.arm_names(contract))}

    events = folder.events().records
    not_needed = {
        tid
        for e in events
        if e.get("event") == "trials_skipped" and e.get("by_design")
        for tid in e.get("trial_ids") or []
    }  # sequential looks stopped early: not pending
    plan_count = Counter(
        (p.get("phase"), p.get("arm")) for p in planned if p.get("trial_id") not in not_needed
    )
    ended: dict[tuple[Any, Any], Counter] = {}
    for r in records:
        ended.setdefault((r.get("phase"), r.get("arm")), Counter())[str(r.get("status"))] += 1
    keys = sorted(
        set(plan_count) | set(ended),
        key=lambda k: (PHASE_ORDER.get(k[0], 9), arm_order.get(k[1], 99), str(k[1])),
    )
    metric = facts.contract_get(contract, "metric.name")
    decision_metric = facts.contract_get(contract, "metric.decision_metric") or metric

    def _value_of(rows: list[TrialRecord], phase: Any) -> dict[str, Any]:
        """While tuning the best value so far (what selection picks); in confirmation the mean
        (what the decision compares), as the live table of `plan run` shows them."""
        values = [finals[t] for r in rows if (t := str(r.get("trial_id"))) in finals]
        if phase == "tune":
            mode = facts.contract_get(contract, "metric.mode", "max")
            return {"metric": metric, "best": _best(values, mode), "mean": None}
        mean = sum(values) / len(values) if values else None
        return {"metric": decision_metric, "best": None, "mean": mean}

    rows = [
        {
            "phase": k[0],
            "arm": k[1],
            "planned": plan_count.get(k) or None,
            "ended": sum(ended.get(k, Counter()).values()),
            "statuses": dict(ended.get(k, Counter())),
            "metric": metric if k[0] == "tune" else decision_metric,
            **_value_of([r for r in records if (r.get("phase"), r.get("arm")) == k], k[0]),
        }
        for k in keys
    ]

    ended_ids: set[str | None] = {r.get("trial_id") for r in records}
    started: dict[Any, None] = {}
    for e in events:
        kind, tid = e.get("event"), e.get("trial_id")
        if kind == "trial_started":
            started[tid] = None
        elif kind in ("trial_ended", "trial_cancelled"):
            ended_ids.add(tid)
    running = [tid for tid in started if tid not in ended_ids]
    decisions = folder.decisions() or {}
    lock = folder.lock()
    planned_total = facts.planned_count(plan)
    return {
        "run_id": info.get("run_id"),
        "name": info.get("name") or contract.get("name"),
        "run_dir": str(folder.path),
        "dashboard": dashboard_command(folder.path),
        "state": state.get("state") or "unknown",
        "reason": state.get("reason"),
        "updated": state.get("updated"),
        "lock": lock,
        "lock_alive": _lock_alive(lock),
        "trials": rows,
        "trials_ended": sum(r.get("phase") != "reeval" for r in records),
        "trials_planned": None if planned_total is None else planned_total - len(not_needed),
        "not_needed": len(not_needed),
        "running": running,
        "running_trials": _running_trials(folder, running, planned, metric),
        "live": _live(folder),
        "failures": facts.failures(records),
        "violations": facts.violations(records, contract),
        "budget": facts.budget_used(records, contract, state, plan),
        "heldout": facts.heldout_ledger(records, contract),
        "decisions": [
            {"arm": d.get("arm"), "decision": d.get("decision")}
            for d in decisions.get("decisions") or []
        ],
        "notes": notes,
        "resumes": facts.resumes(events),
        "data": data_summary(records, contract.get("data") if isinstance(contract, dict) else None),
        "findings": [f for f in decisions.get("findings") or [] if isinstance(f, dict)]
        + decision_findings(decisions),
    }


# what the lock or the plan does not say is unknown
_n = partial(number, none="?")


def failure_line(group: dict[str, Any]) -> str:
    """One line per error, as `plan run` sums them up: its first trial, where it broke, where its
    logs are, and the other trials that failed the same way
    (planner._store.facts.failure_groups)."""
    line = f"  {group['first']} {group['status']}: {group['error']}"
    line += f"  [{group['where']}]" if group["where"] else ""
    line += f" (logs in {group['logs']})" if group.get("logs") else ""
    others = group["trial_ids"][1:]
    if others:
        line += f"; the same in {len(others)} more: {', '.join(map(str, others[:5]))}" + (
            " ..." if len(others) > 5 else ""
        )
    return line


def _row_value(row: dict[str, Any]) -> str:
    if row.get("best") is not None:
        return f"; best {row['metric']} {number(row['best'])}"
    if row.get("mean") is not None:
        return f"; mean {row['metric']} {number(row['mean'])}"
    return ""


def format_status(status: dict[str, Any]) -> str:
    """The status as text: state, trials vs plan, failures, budget, held-out ledger, lock."""
    s = status
    out = [
        f"run {s['name']} / {s['run_id']}: {s['state']}"
        + (f" ({s['reason']})" if s.get("reason") else "")
        + (f", updated {s['updated']}" if s.get("updated") else "")
    ]
    lock = s.get("lock")
    if lock:
        by = f"`{lock['command']}`, " if lock.get("command") else ""
        holder = (
            f"locked by {by}pid {_n(lock.get('pid'))} on {_n(lock.get('host'))} since "
            f"{_n(lock.get('started'))}"
        )
        if s.get("lock_alive") is False:
            holder += " (that process is gone: a stale lock)"
        elif (
            s["state"] != RunState.RUNNING and lock.get("command") != "plan reeval"
        ):  # a reeval runs on a finished run
            holder += f" (but the state is {s['state']}: the lock may be stale)"
        out.append(holder)
    reevals = s["budget"].get("reeval_trials")
    out.append(
        f"trials ended: {s['trials_ended']} of {_n(s['trials_planned'])} planned"
        + (
            f" ({s['not_needed']} more not needed: the sequential confirmation stopped early)"
            if s.get("not_needed")
            else ""
        )
        + (f" (and {reevals} in re-evaluation, not planned)" if reevals else "")
    )
    rows = []
    for t in s["trials"]:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(t["statuses"].items())) or "none ended"
        planned = "-" if t["phase"] == "reeval" else _n(t["planned"])
        rows.append([t["phase"], t["arm"], t["ended"], f"/ {planned}", statuses + _row_value(t)])
    if rows:
        out.extend(text_table(rows, right=[2]))
    live = s.get("live") or {}
    if s["state"] == RunState.RUNNING and live.get("phase"):
        eta = live.get("eta_s")
        out.append(
            f"phase: {live['phase']}, {live.get('steps_done')} steps done"
            + (
                f" of about {live['steps_expected']:.0f} expected"
                if live.get("steps_expected") is not None
                else ""
            )
            + ("" if eta is None else f", about {clock(eta)} left")
            + f" (as of {live.get('updated')})"
        )
    for r in s.get("running_trials") or []:
        if r["step"] is not None:
            shown = number(r["value"])
            out.append(
                f"  running {r['trial_id']} ({r['arm']}): step {r['step']}, {r['metric']} {shown}"
            )
    if s.get("dashboard"):
        out.append(f"tuning studies: {terminal_safe(s['dashboard'])}")
    out += [facts.resume_line(r) for r in s.get("resumes") or []]
    if s["running"]:
        shown = ", ".join(s["running"][:5]) + (
            f" and {len(s['running']) - 5} more" if len(s["running"]) > 5 else ""
        )
        label = (
            "started, not ended"
            if s["state"] == RunState.RUNNING
            else "started, never ended (no record)"
        )
        out.append(f"{label}: {shown}")
    fails = [f for f in s["failures"] if not f["retried"]]
    retried = [f for f in s["failures"] if f["retried"]]
    if fails or retried:
        kinds = Counter(f["status"] for f in fails)
        out.append(
            f"failures: {len(fails) or 'none'}"
            + (f" ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})" if kinds else "")
            + (f"; {len(retried)} trial(s) succeeded after a retry" if retried else "")
        )
        groups = facts.failure_groups(fails, s["run_dir"])
        out += [failure_line(g) for g in groups[:10]]
        if len(groups) > 10:
            out.append(f"  ... and {len(groups) - 10} more errors (plan report shows all)")
    else:
        out.append("failures: none")
    b = s["budget"]
    budget = f"budget: {b['trials_ended']} trials"
    if b.get("max_trials"):
        budget += f" (max_trials {b['max_trials']})"
    budget += (
        f", {b['steps']}"
        + (f" of {b['steps_planned']}" if b.get("steps_planned") else "")
        + f" {b['unit']}s of exposure"
    )
    budget += f", wall time {format_duration(b.get('wall_time_s'))}"
    if b.get("max_wall_time_s"):
        budget += f" of {format_duration(b['max_wall_time_s'])}"
    out.append(budget)
    h = s["heldout"]
    if h.get("metric"):
        cap = f" of at most {h['cap']}" if h.get("cap") is not None else ""
        line = (
            f"held-out ledger: {h['metric']} evaluated {h['evaluations']} time(s){cap} "
            f"(confirm {h['confirm']}, reeval {h['reeval']})"
        )
        if h.get("cap") is None:
            line += "; no cap set (budget.max_heldout_evaluations)"
        if h.get("over_cap"):
            line += "; OVER THE CAP"
        if h.get("tuning_exposures"):
            line += f"; {h['tuning_exposures']} tuning trial(s) reported it: test exposure"
        out.append(line)
    else:
        out.append("held-out ledger: no held-out metric declared")
    if s["violations"]:
        kinds = Counter(v["kind"] for v in s["violations"])
        out.append(
            f"protocol violations: {len(s['violations'])} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})"
        )
    data = s.get("data") or {}
    if data.get("splits") or data.get("violations"):
        out.append("data:")
        out += ["  " + line for line in summary_lines(data, {"unit": data.get("unit")})]
    if s["decisions"]:
        out.append("decisions: " + ", ".join(f"{d['arm']} {d['decision']}" for d in s["decisions"]))
    else:
        out.append("decisions: none yet")
    out += [f"warning: {f.get('message') or f.get('kind')}" for f in s.get("findings") or []]
    out += [f"note: {n}" for n in s["notes"]]
    return (
        terminal_safe("\n".join(out)) + "\n"
    )  # text of the run folder is shown, never obeyed by the terminal
