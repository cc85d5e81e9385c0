"""The run report: one summary of a run folder, rendered as JSON, Markdown or HTML.

`summarize(results)` gathers everything a reviewer needs into plain data (the
JSON report is exactly that); `render_markdown` and `render_html` lay the same
content out. All are pure: they return strings, and only the CLI prints or
writes. HTML lives in `planner._results.html` (templates and plotly figures);
`planner._results.render` picks the format.
"""

from __future__ import annotations

import json
import math
import re
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from planner._contract.paths import diff_rows, shown_side
from planner._core.status import UNUSABLE, RunState, TrialStatus
from planner._core.text import format_duration, number, terminal_safe
from planner._data.checks import summary_lines
from planner._lineage.record import lineage_lines
from planner._plan.explored import ArmReach, arm_reach, reach_said
from planner._plan.space import frozen_space
from planner._stats.decide import collect, latest_outcomes
from planner._store import facts
from planner._store.claims import decision_findings

if TYPE_CHECKING:  # pragma: no cover
    from planner._results.tables import RunResults

KEY_PACKAGES = (
    "planner",
    "ray",
    "optuna",
    "torch",
    "jax",
    "tensorflow",
    "numpy",
    "pandas",
    "scikit-learn",
    "hydra-core",
    "transformers",
)
MAX_ROWS = 100  # failures and violations listed in md and html; json lists them all
SOURCES = {"logged": "logged", "reports": "found in the reports", "error": "from the trial's error"}


# ---------------------------------------------------------------- the summary


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None, numpy and pandas scalars plain Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def _decisions(results: RunResults) -> list[dict[str, Any]]:
    cols = [
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
    frame = results.decisions
    return [_clean({c: frame[c].iloc[i] for c in cols}) for i in range(len(frame))]


def per_seed(results: RunResults) -> dict[str, Any]:
    """Confirmation values of the decision metric, by seed (rows) and arm (columns).

    Each cell is the trial's last value and its status; the mean per arm is over
    the values the decision takes (`planner._stats.decide.collect`): completed
    trials, and with `failures.diverged_value` a diverged seed at that value
    (its cell shows it, `counted_as`), not left out.
    """
    metric = results.decision_metric
    t = results.trials
    conf = t[t["phase"] == "confirm"] if len(t) else t
    arms = results.arms
    column = f"final.{metric}"
    diverged_value = facts.contract_get(results.contract, "failures.diverged_value")
    if not (
        isinstance(diverged_value, int | float)
        and not isinstance(diverged_value, bool)
        and math.isfinite(diverged_value)
    ):
        diverged_value = None
    cells: dict[tuple[Any, str], dict[str, Any]] = {}
    logged = []
    for i in range(len(conf)):
        row = conf.iloc[i]
        value = float(row[column]) if column in conf.columns else math.nan
        cells[(row["seed"], row["arm"])] = {
            "value": _clean(value),
            "status": row["status"],
        }  # a seed's last
        if row["seed"] is not pd.NA and row["seed"] is not None:
            logged.append(
                (
                    str(row["arm"]),
                    int(row["seed"]),
                    None if math.isnan(value) else value,
                    str(row["status"]),
                )
            )
    seeds = sorted({s for s, _ in cells if s is not pd.NA and s is not None})
    planned = [p for p in facts.plan_entries(results.plan) if p.get("phase") == "confirm"]
    seeds = sorted(set(seeds) | {p.get("seed") for p in planned if p.get("seed") is not None})
    rows = []
    for seed in seeds:
        rows.append({"seed": int(seed), "values": {arm: cells.get((seed, arm)) for arm in arms}})
    planned_seeds = facts.contract_get(results.contract, "seeds")
    planned_seeds = (
        [s for s in planned_seeds if isinstance(s, int)]
        if isinstance(planned_seeds, list)
        else sorted({seed for _, seed, _, _ in logged})
    )
    taken = latest_outcomes(logged, arms, planned_seeds)
    means = {}
    for arm in arms:
        counted = collect(taken[arm], planned_seeds, diverged_value)[
            0
        ]  # the values the decision takes
        for outcome in taken[arm]:
            if (
                outcome.seed in counted and counted[outcome.seed] != outcome.value
            ):  # diverged, at diverged_value
                cells[(outcome.seed, arm)].update(
                    value=counted[outcome.seed], counted_as="failures.diverged_value"
                )
        means[arm] = _clean(float(np.mean(list(counted.values())))) if counted else None
    missing = "pending" if results.run_state == RunState.RUNNING else "missing"
    skipped = (
        set()
    )  # sequential confirmation: seeds no arm needed are not missing (docs/planning.md)
    if "sequential" in results.decision_info:
        skipped = {
            tid
            for e in results.events
            if e.get("event") == "trials_skipped" and e.get("by_design")
            for tid in e.get("trial_ids") or []
        }
    not_needed = [[p.get("seed"), p.get("arm")] for p in planned if p.get("trial_id") in skipped]
    return {
        "metric": metric,
        "arms": arms,
        "rows": rows,
        "mean": means,
        "missing": missing,
        "not_needed": not_needed,
    }


def sequential_looks(results: RunResults) -> list[dict[str, Any]]:
    """Sequential confirmation: one row per arm and look taken (decisions.json `looks`), else []."""
    return list(results.looks) if "sequential" in results.decision_info else []


def tuning_summary(results: RunResults) -> list[dict[str, Any]]:
    """Per arm: tuning trials planned, ended, at full exposure, stopped early, failed; the selected
    one."""
    t = results.trials
    tune = t[t["phase"] == "tune"] if len(t) else t
    exposure = facts.contract_get(results.contract, "budget.exposure")
    planned = [p for p in facts.plan_entries(results.plan) if p.get("phase") == "tune"]
    selection = (results.selection or {}).get("arms") or {}
    rows = []
    for arm in results.arms:
        sub = tune[tune["arm"] == arm] if len(tune) else tune
        status = sub["status"].astype(str) if len(sub) else pd.Series([], dtype=str)
        ok = ~status.isin(UNUSABLE).to_numpy()
        full = (
            int(((sub["exposure"] >= exposure).to_numpy(dtype=bool, na_value=False) & ok).sum())
            if exposure is not None and len(sub)
            else 0
        )
        sel = selection.get(arm) or {}
        rows.append(
            {
                "arm": arm,
                "planned": sum(1 for p in planned if p.get("arm") == arm) or None,
                "ended": int(len(sub)),
                "completed": int((status == TrialStatus.COMPLETED).sum()),
                "full_exposure": full,
                "early_stopped": int((status == TrialStatus.EARLY_STOPPED).sum()),
                "failed": int(status.isin(UNUSABLE).sum()),
                "selected_trial": sel.get("trial_id"),
                "selected_value": _clean(sel.get("score", sel.get("value"))),
                "selected_params": _clean(sel.get("params") or {}),
            }
        )
    if not planned and not len(tune):
        return []
    return rows


def _drawn(value: Any) -> bool:
    return not (value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)))


def tuning_reach(results: RunResults) -> list[ArmReach]:
    """How far each arm's tuning explored its space (planner._plan.explored): its tuning trials'
    params and its selected ones, against the frozen contract's space."""
    t = results.trials
    tune = t[t["phase"] == "tune"] if len(t) else t
    selection = (results.selection or {}).get("arms") or {}
    out = []
    for arm in results.arms:
        space = frozen_space(results.contract, arm)
        if not space:
            continue
        sub = tune[tune["arm"] == arm] if len(tune) else tune
        columns = {k: sub[f"param.{k}"].tolist() for k in space if f"param.{k}" in sub.columns}
        params = [
            {k: column[i] for k, column in columns.items() if _drawn(column[i])}
            for i in range(len(sub))
        ]
        chosen = (selection.get(arm) or {}).get("params") if selection.get(arm) else None
        out.append(arm_reach(arm, space, params, chosen if isinstance(chosen, dict) else None))
    return out


def tuning_reach_summary(results: RunResults) -> dict[str, Any]:
    """The report's `tuning_reach`: the decision's sentence; per arm and key, what it explored."""
    reaches = tuning_reach(results)
    rows = [
        {
            "arm": r.arm,
            "draws": k.draws,
            "key": k.key,
            "kind": k.kind,
            "range": list(k.bounds),
            "distinct": k.distinct,
            "explored": None if k.low is None else [k.low, k.high],
            "share": k.share,
            "selected": k.selected,
            "edge": k.edge,
            "edge_of": k.edge_of,
        }
        for r in reaches
        for k in r.keys
    ]
    return {"summary": reach_said(reaches), "rows": rows}


def status_counts(results: RunResults) -> list[dict[str, Any]]:
    """Trials ended by phase, arm and status, against the planned count."""
    t = results.trials
    planned = facts.plan_entries(results.plan)
    plan_count: dict[tuple[Any, Any], int] = {}
    for p in planned:
        key = (p.get("phase"), p.get("arm"))
        plan_count[key] = plan_count.get(key, 0) + 1
    counts: dict[tuple[str, str], dict[str, int]] = {}
    if len(t):
        grouped = t.groupby(["phase", "arm", "status"], observed=True).size()
        for (phase, arm, status), n in grouped.items():
            counts.setdefault((phase, arm), {})[str(status)] = int(n)
    keys = list(dict.fromkeys(list(plan_count) + list(counts)))
    order = {p: i for i, p in enumerate(["tune", "confirm", "reeval"])}
    arm_order = {a: i for i, a in enumerate(results.arms)}
    keys.sort(key=lambda k: (order.get(k[0], 9), arm_order.get(k[1], 99), str(k[1])))
    return [
        {
            "phase": k[0],
            "arm": k[1],
            "ended": sum(counts.get(k, {}).values()),
            "planned": plan_count.get(k),
            "statuses": counts.get(k, {}),
        }
        for k in keys
    ]


def identity_summary(identity: dict[str, Any] | None) -> dict[str, Any]:
    if not identity:
        return {}
    code = identity.get("code") or {}
    host = identity.get("host") or {}
    packages = identity.get("packages") or {}
    key = {k: packages[k] for k in KEY_PACKAGES if k in packages}
    return _clean(
        {
            "commit": code.get("commit"),
            "dirty": code.get("dirty"),
            "repo": code.get("repo"),
            "trainable": code.get("trainable"),
            "python": identity.get("python"),
            "packages": key,
            "other_packages": len(packages) - len(key),
            "host": host.get("hostname"),
            "platform": host.get("platform"),
            "cpus": host.get("cpus"),
            "memory_bytes": host.get("memory_bytes"),
            "data": identity.get("data") or {},
            "contract_sha256": identity.get("contract_sha256"),
        }
    )


def summarize(results: RunResults) -> dict[str, Any]:
    """Everything the report shows, as JSON-able data (the JSON report)."""
    c = results.contract
    configs = results.configs
    base = results.baseline
    arms_info = []
    for arm in results.arms:
        overrides = []
        for a in [c.get("baseline") or {}] + list(c.get("arms") or []):
            if isinstance(a, dict) and a.get("name") == arm:
                overrides = list(a.get("overrides") or [])
        diff = (
            diff_rows(configs[base], configs[arm])
            if base in configs and arm in configs and arm != base
            else []
        )
        arms_info.append(
            {
                "arm": arm,
                "baseline": arm == base,
                "overrides": overrides,
                "config_diff": diff,
                "has_config": arm in configs,
            }
        )
    state = results.state
    return _clean(
        {
            "run_id": results.run_id,
            "name": results.name,
            "run_dir": str(results.run_dir),
            "run_state": results.run_state,
            "state_reason": state.get("reason"),
            "state_updated": state.get("updated"),
            "lock": results.lock,
            "resumes": facts.resumes(results.events),  # docs/running.md, "Resume"
            "hypothesis": c.get("hypothesis"),
            "factor": {
                "name": facts.contract_get(c, "factor.name"),
                "keys": facts.contract_get(c, "factor.keys", []),
            },
            "baseline": base,
            "arms": arms_info,
            # then decisions.json's own keys (docs/run-folder.md), with the decision metric's name
            # as `metric`
            "metric": results.decision_metric,
            **{
                k: results.decision_info.get(k, facts.contract_get(c, f"acceptance.{k}"))
                for k in ("test", "alpha", "correction", "min_effect")
            },
            "decisions": _decisions(results),
            "metrics": {
                "name": results.metric,
                "mode": facts.contract_get(c, "metric.mode"),
                "heldout": facts.contract_get(c, "metric.heldout"),
                "decision": results.decision_metric,
                "decision_mode": facts.contract_decision_mode(c),
            },
            "acceptance": {
                k: facts.contract_get(c, f"acceptance.{k}")
                for k in ("min_effect", "alpha", "test", "correction")
            },
            "budget": results.budget,
            "trials": status_counts(results),
            "tuning": tuning_summary(results),
            "tuning_reach": tuning_reach_summary(results),
            "per_seed": per_seed(results),
            "looks": sequential_looks(results),
            "failures": results.failures,
            "violations": results.violations,
            "heldout": results.heldout,
            "data": results.data,
            "reevals": reeval_summary(results.reevals),
            "lineage": results.lineage,  # docs/lineage.md
            "identity": identity_summary(results.identity),
            "notes": results.notes,
            "cost": results.cost,
            "findings": [
                f for f in results.decision_info.get("findings") or [] if isinstance(f, dict)
            ]
            + decision_findings(
                {
                    "min_effect": results.decision_info.get("min_effect"),
                    "decisions": _decisions(results),
                }
            ),
        }
    )


def reeval_summary(reevals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per `plan reeval` logged in reevals.jsonl (docs/reeval.md)."""
    rows = []
    for r in reevals:
        rows.append(
            {
                "reeval": r.get("reeval"),
                "arm": r.get("arm"),
                "seeds": r.get("seeds"),
                "new_seeds": r.get("new_seeds"),
                "tolerance": r.get("tolerance"),
                "verdict": r.get("verdict"),
                "identity_differences": [
                    d.get("what") for d in r.get("identity_differences") or []
                ],
                "started": r.get("started"),
            }
        )
    return rows


def render_json(results: RunResults) -> str:
    return json.dumps(summarize(results), indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------- markdown


# a missing figure is a dash in a table cell
_fmt = partial(number, none="–")


_MD_SPECIAL = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "|": "\\|",
        "[": "\\[",
        "]": "\\]",
        "`": "\\`",
        "*": "\\*",
    }
)


def _md(text: Any) -> str:
    """Text from the run folder in markdown: one line, no raw HTML, no markup of its own (links,
    code, emphasis)."""
    return terminal_safe(" ".join(str(text).split())).translate(_MD_SPECIAL)


_MD_ESCAPED = re.compile(r"&(amp|lt|gt);|\\([|\[\]`*])")
_MD_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}


def terminal_markdown(markdown: str) -> str:
    """The markdown report as plain text for a terminal: `_md`'s escapes undone in one pass
    (`&lt;absent&gt;` reads `<absent>`, `\\[0.9, 0.999\\]` reads `[0.9, 0.999]`). The text was made
    terminal-safe before it was escaped, so nothing undone here reaches the terminal as a
    control."""
    return _MD_ESCAPED.sub(
        lambda m: _MD_ENTITIES[m.group(1)] if m.group(1) else m.group(2), markdown
    )


def _code(text: Any) -> str:
    """Text from the run folder as a markdown code span (its own backticks cannot end the span)."""
    return "`" + terminal_safe(" ".join(str(text).split())).replace("`", "'") + "`"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines + [""]


def budget_lines(b: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, used of allowed) pairs for the budget."""

    def of(used: Any, total: Any) -> str:
        return f"{_fmt(used)} of {_fmt(total)}" if total else _fmt(used)

    rows = [("trials ended", of(b.get("trials_ended"), b.get("trials_planned")) + " planned")]
    if b.get("max_trials"):
        rows.append(("max_trials", _fmt(b["max_trials"])))
    rows.append(
        (
            f"exposure ({b.get('unit') or 'step'}s)",
            of(b.get("steps"), b.get("steps_planned")) + " planned",
        )
    )
    wall = format_duration(b.get("wall_time_s"))
    if b.get("max_wall_time_s"):
        wall += f" of {format_duration(b['max_wall_time_s'])} allowed"
    rows.append(("wall time", wall))
    rows.append(("trial time (sum)", format_duration(b.get("trial_time_s"))))
    return rows


def more_line(total: int) -> list[str]:
    """The line under a table cut at MAX_ROWS rows, or nothing."""
    if total <= MAX_ROWS:
        return []
    return [
        f"... and {total - MAX_ROWS} more: `plan report --format json` and `plan export` list "
        f"them all.",
        "",
    ]


def heldout_line(h: dict[str, Any]) -> str:
    if not h.get("metric"):
        return "No held-out metric is declared: the decision uses the tuning metric."
    cap = (
        f" of at most {h['cap']}"
        if h.get("cap") is not None
        else " (no cap set: budget.max_heldout_evaluations)"
    )
    text = (
        f"{_code(h['metric'])} was evaluated {h['evaluations']} time(s){cap}: {h['confirm']} in "
        f"confirmation, "
        f"{h['reeval']} in re-evaluation."
    )
    if h.get("over_cap"):
        text += " **Over the cap.**"
    if h.get("tuning_exposures"):
        text += f" **{h['tuning_exposures']} tuning trial(s) reported it: test exposure.**"
    return text


def data_lines(s: dict[str, Any]) -> list[str]:
    """The Data section: per split, presentations, distinct units and groups, overlaps, data
    violations."""
    data = s.get("data") or {}
    return [
        f"- {line.strip()}" if not line.startswith("  ") else f"  - {line.strip()}"
        for line in summary_lines(data, {"unit": data.get("unit")})
    ]


def render_markdown(results: RunResults) -> str:
    s = summarize(results)
    acc = s["acceptance"]
    out = [f"# Run report: {_md(s['name'])} / {_md(s['run_id'])}", ""]
    out += [
        f"**Run state:** {_md(s['run_state'])}"
        + (f" ({_md(s['state_reason'])})" if s.get("state_reason") else "")
        + (f", updated {_md(s['state_updated'])}" if s.get("state_updated") else ""),
        "",
    ]
    if s.get("resumes"):
        out += [f"- {_md(facts.resume_line(r).capitalize())}." for r in s["resumes"]] + [""]
    if s.get("lock"):
        lk = s["lock"]
        out += [
            f"Locked by pid {_md(lk.get('pid'))} on {_md(lk.get('host'))} since "
            f"{_md(lk.get('started'))}: "
            "the run is in progress.",
            "",
        ]
    out += ["## Hypothesis", "", _md(str(s.get("hypothesis") or "–").strip()), ""]
    m = s["metrics"]
    out += [
        f"Factor **{_md(s['factor']['name'])}** (keys: "
        f"{', '.join(_md(k) for k in s['factor']['keys'] or [])}); "
        f"baseline **{_md(s['baseline'])}**; metric {_code(m['name'])} ({_md(m['mode'])}), "
        f"decision on "
        f"{_code(m['decision'])} ({_md(m['decision_mode'])}); {_md(acc['test'])} test, alpha "
        f"{_md(acc['alpha'])}, {_md(acc['correction'])} "
        f"correction, min_effect {_md(acc['min_effect'])}.",
        "",
    ]
    out += ["## Arms", ""]
    for a in s["arms"]:
        title = f"**{_md(a['arm'])}**" + (" (baseline)" if a["baseline"] else "")
        over = ", ".join(_code(o) for o in a["overrides"]) or "no overrides"
        out.append(f"- {title}: {over}")
        for d in a["config_diff"]:
            out.append(
                f"  - {_code(d['path'])}: {_md(shown_side(d, 'baseline'))} → "
                f"{_md(shown_side(d, 'arm'))}"
            )
    out.append("")
    out += ["## Decisions", ""]
    out += [f"**Warning: {f.get('message') or f.get('kind')}.**" for f in s.get("findings") or []]
    out += [""] if s.get("findings") else []
    if s["decisions"]:
        rows = [
            [
                d["arm"],
                d["decision"] or "not decided",
                _fmt(d["effect"]),
                _fmt(d["ci_low"]),
                _fmt(d["ci_high"]),
                _fmt(d["p_value"]),
                _fmt(d["alpha_adjusted"]),
                _fmt(d["n_baseline"]),
                _fmt(d["n_arm"]),
                d["reason"] or "",
            ]
            for d in s["decisions"]
        ]
        out += _table(
            [
                "arm",
                "decision",
                "effect",
                "CI low",
                "CI high",
                "p",
                "alpha adj.",
                "n baseline",
                "n arm",
                "reason",
            ],
            rows,
        )
    else:
        out += ["No treatment arms.", ""]
    out += reach_lines(s["tuning_reach"])
    if s.get("looks"):  # sequential confirmation (docs/planning.md)
        out += ["### Looks", ""]
        rows = [
            [
                lk["arm"],
                lk.get("look"),
                f"{_fmt(lk.get('n_arm'))} vs {_fmt(lk.get('n_baseline'))}",
                _fmt(lk.get("effect")),
                f"{_fmt(lk.get('ci_low'))} to {_fmt(lk.get('ci_high'))}",
                _fmt(lk.get("statistic")),
                lk.get("note") or _fmt(lk.get("boundary")),
                lk.get("action"),
            ]
            for lk in s["looks"]
        ]
        out += _table(
            [
                "arm",
                "look",
                "n arm vs baseline",
                "effect",
                "repeated CI",
                "t",
                "boundary",
                "action",
            ],
            rows,
        )
        out += [
            "Seeds after an arm's last look were not needed: the sequential confirmation stopped "
            "it.",
            "",
        ]
    ps = s["per_seed"]
    out += [f"## Confirmation by seed ({_code(ps['metric'])})", ""]
    if ps["rows"]:
        rows = []
        for r in ps["rows"]:
            cells = []
            for arm in ps["arms"]:
                c = r["values"].get(arm)
                absent = (
                    "not needed" if [r["seed"], arm] in ps.get("not_needed", []) else ps["missing"]
                )
                cells.append(
                    absent
                    if c is None
                    else _fmt(c["value"])
                    if c["status"] == TrialStatus.COMPLETED
                    else f"{_fmt(c['value'])} ({c['status']})"
                )
            rows.append([r["seed"], *cells])
        rows.append(["mean", *[_fmt(ps["mean"].get(a)) for a in ps["arms"]]])
        out += _table(["seed", *ps["arms"]], rows)
    else:
        out += ["No confirmation trials yet.", ""]
    if s["tuning"]:
        out += ["## Tuning", ""]
        rows = [
            [
                t["arm"],
                _fmt(t["planned"]),
                t["ended"],
                t["full_exposure"],
                t["early_stopped"],
                t["failed"],
                t["selected_trial"] or "–",
                _fmt(t["selected_value"]),
                ", ".join(f"{k}={_fmt(v)}" for k, v in t["selected_params"].items()),
            ]
            for t in s["tuning"]
        ]
        out += _table(
            [
                "arm",
                "planned",
                "ended",
                "full exposure",
                "stopped early",
                "failed",
                "selected",
                "value",
                "params",
            ],
            rows,
        )
    out += ["## Data", ""] + data_lines(s) + [""]
    out += ["## Trials and budget", ""]
    rows = [
        [
            t["phase"],
            t["arm"],
            f"{t['ended']} / {_fmt(t['planned'])}",
            ", ".join(f"{k} {v}" for k, v in sorted(t["statuses"].items())),
        ]
        for t in s["trials"]
    ]
    out += _table(["phase", "arm", "ended / planned", "statuses"], rows)
    out += _table(["budget", "used"], [list(r) for r in budget_lines(s["budget"])])
    out += cost_lines(s["cost"])
    out += _failure_md(s) + _identity_md(s)
    return "\n".join(out).rstrip() + "\n"


def reach_lines(reach: dict[str, Any]) -> list[str]:
    """Beside the decisions: how far each arm's tuning explored, which the CI (seed noise) leaves
    out; then per arm and key, the draws, what they explored and where the selected value sits."""
    if not reach.get("summary"):
        return []
    out = [f"**Tuning:** {_md(reach['summary'])}.", ""]
    rows = []
    for r in reach["rows"]:
        explored = r["explored"]
        if r["kind"] == "choice":
            seen = f"{r['distinct']} of {len(r['range'])} choices"
        else:
            seen = "–" if explored is None else f"{_fmt(explored[0])} to {_fmt(explored[1])}"
        share = "–" if r["share"] is None else f"{100 * r['share']:.0f} %"
        edge = _edge_said(r["edge"], r["edge_of"])
        rows.append([r["arm"], r["key"], r["draws"], seen, share, _fmt(r["selected"]), edge])
    return out + _table(
        ["arm", "key", "draws", "explored", "share of range", "selected", "selected at"], rows
    )


def _edge_said(side: str | None, of: str | None) -> str:
    """Where a selected value sits: its arm's smallest or largest draw, or an end of the range."""
    if side is None:
        return ""
    if of == "explored":
        return f"its {'smallest' if side == 'low' else 'largest'} draw"
    return f"the {side} end of the range"


def _failure_md(s: dict[str, Any]) -> list[str]:
    """Failures, protocol violations, the held-out ledger, re-evaluations and the lineage, in
    markdown."""
    out: list[str] = []
    out += ["## Failures", ""]
    if s["failures"]:
        rows = [
            [
                f["trial_id"],
                f["status"] + (" (retried)" if f["retried"] else ""),
                f["attempts"],
                f["error"],
                f["where"],
            ]  # one line: the traceback stays in trials.jsonl and the trial's logs
            for f in s["failures"][:MAX_ROWS]
        ]
        out += _table(["trial", "status", "attempts", "error", "where"], rows) + more_line(
            len(s["failures"])
        )
    else:
        out += ["None.", ""]
    out += ["## Protocol violations", ""]
    if s["violations"]:
        rows = [
            [
                v["kind"],
                v["trial_id"],
                _fmt(v["step"]),
                v["detail"],
                SOURCES.get(v["source"], v["source"]),
            ]
            for v in s["violations"][:MAX_ROWS]
        ]
        out += _table(["kind", "trial", "step", "detail", "source"], rows) + more_line(
            len(s["violations"])
        )
    else:
        out += ["None.", ""]
    out += ["## Held-out ledger", "", heldout_line(s["heldout"]), ""]
    if s.get("reevals"):
        out += ["## Re-evaluations (plan reeval)", ""]
        out += _table(
            ["reeval", "arm", "seeds", "tolerance", "verdict", "identity differences", "started"],
            [
                [
                    _fmt(r["reeval"]),
                    r["arm"],
                    ", ".join(map(str, r["seeds"] or [])),
                    _fmt(r["tolerance"]),
                    r["verdict"],
                    ", ".join(r["identity_differences"]) or "none",
                    r["started"] or "–",
                ]
                for r in s["reevals"]
            ],
        )
    if s.get("lineage"):
        out += (
            ["## Lineage", ""] + [f"- {_md(line)}" for line in lineage_lines(s["lineage"])] + [""]
        )
    return out


def _identity_md(s: dict[str, Any]) -> list[str]:
    """The run's identity and the notes of reading it, in markdown."""
    out: list[str] = []
    ident = s["identity"]
    out += ["## Identity", ""]
    if ident:
        pk = ", ".join(f"{k} {v}" for k, v in ident["packages"].items())
        out += _table(
            ["", ""],
            [
                [
                    "commit",
                    f"{ident.get('commit') or 'not recorded (not a git checkout?)'}"
                    + (" (dirty)" if ident.get("dirty") else ""),
                ],
                ["repo", ident.get("repo") or "–"],
                ["trainable", ident.get("trainable") or "–"],
                ["python", ident.get("python") or "–"],
                [
                    "packages",
                    pk
                    + (
                        f" (+{ident['other_packages']} more)" if ident.get("other_packages") else ""
                    ),
                ],
                [
                    "host",
                    f"{ident.get('host') or '–'} ({ident.get('platform') or '?'}, "
                    f"{ident.get('cpus') or '?'} CPUs)",
                ],
                ["data", ", ".join(f"{p}: {str(h)[:12]}" for p, h in ident["data"].items()) or "–"],
            ],
        )
    else:
        out += ["identity.json is missing.", ""]
    if s["notes"]:
        out += ["## Notes", ""] + [f"- {_md(n)}" for n in s["notes"]] + [""]
    return out


# ---------------------------------------------------------------- cost (apart from the decision)

COST_NOTE = (
    "What each arm cost, whatever it decided: trial-seconds summed over its trials, the median "
    "seconds "
    "per step (slope of report time over step), and the cpu- and gpu-seconds its trials reserved."
)


def _disk(n: Any) -> str:
    if not isinstance(n, int) or isinstance(n, bool):
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def cost_table(cost: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The Cost table: arm, trials, trial-seconds, (the disk its trials used, when any trial
    measured it: command trials' `disk_bytes`), median s/step, cpu-seconds, gpu-seconds."""
    disk = any(c.get("disk_bytes") is not None for c in cost)
    rows = [
        [c["arm"], _fmt(c["trials"]), format_duration(c["trial_seconds"])]
        + ([_disk(c.get("disk_bytes"))] if disk else [])
        + [_fmt(c["median_s_per_step"]), _fmt(c["cpu_seconds"]), _fmt(c["gpu_seconds"])]
        for c in cost
    ]
    return COST_HEADER[:3] + (["disk"] if disk else []) + COST_HEADER[3:], rows


COST_HEADER = ["arm", "trials", "trial time", "median s / step", "cpu-seconds", "gpu-seconds"]


def cost_lines(cost: list[dict[str, Any]]) -> list[str]:
    """The markdown Cost section (empty without trials)."""
    if not any(c["trials"] for c in cost):
        return []
    return ["## Cost (apart from the decision)", "", COST_NOTE, ""] + _table(*cost_table(cost))
