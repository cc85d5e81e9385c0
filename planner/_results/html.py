"""The HTML report: one self-contained page a reviewer reads offline.

No network, no scripts, no external CSS: styles inline, plots as base64 PNG
data URIs. Every value that comes from the run folder is escaped.
"""

from __future__ import annotations

import base64
from html import escape
from typing import TYPE_CHECKING, Any

from planner._contract.paths import shown_side
from planner._core.status import TrialStatus
from planner._lineage.record import lineage_lines
from planner._results import plots as _plots
from planner._results import report as rp
from planner._results.report import SOURCES, _fmt
from planner._store import facts

if TYPE_CHECKING:  # pragma: no cover
    from planner._results.tables import RunResults

CSS = """
body{font:15px/1.5 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1f2328;max-width:1100px;margin:24px auto;padding:0 20px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{background:#f6f8fa;padding:1px 4px;border-radius:4px;font-size:13px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600;font-size:13px}
.accept{background:#1a7f37}.reject{background:#cf222e}.inconclusive{background:#9a6700}.incomplete,.none{background:#6e7781}.invalid{background:#8250df}
.state{background:#0969da}.warn{background:#fff8c5;border:1px solid #d4a72c;padding:8px 12px;border-radius:6px}
.muted{color:#656d76}.hyp{font-size:16px;background:#f6f8fa;border-left:4px solid #0969da;padding:8px 14px}
img{max-width:100%;display:block;margin:8px 0}.kv th{font-weight:600;white-space:nowrap}
td.id{white-space:nowrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.glance td{border:0;padding:2px 12px 2px 0}.glance{margin:0}.bad{color:#cf222e;font-weight:600}
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _f(value: Any) -> str:
    return _e(_fmt(value))


def _table(header: list[str] | None, rows: list[list[str]], num: set[int] | None = None) -> str:
    """A table from already-escaped cells; no header row for a key-value table (header None)."""
    num = num or set()
    if header is None:
        body = "".join(f"<tr><th>{r[0]}</th><td>{r[1]}</td></tr>" for r in rows)
        return f"<table class='kv'><tbody>{body}</tbody></table>"
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>" for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _id(trial_id: Any) -> str:
    return f"<span style='white-space:nowrap'>{_e(trial_id)}</span>"


def _img(svg: bytes, alt: str) -> str:
    """A plot as an image of the page: a browser runs no script of an SVG shown as an <img>, nor loads what it names."""
    data = base64.b64encode(svg).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/svg+xml;base64,{data}">'


def _badge(decision: Any) -> str:
    cls = (
        decision
        if decision in ("accept", "reject", "inconclusive", "incomplete", "invalid")
        else "none"
    )
    return f'<span class="badge {cls}">{_e(decision or "not decided")}</span>'


def render_html(results: RunResults) -> str:
    # the curves first: their sort's scratch memory (a million rows) is then reused by what follows (the
    # summary, SciPy's import for the decision rule, the plots) instead of adding to the peak
    curves = rp.curves(results), rp.selected_curves(results)
    s = rp.summarize(results)
    parts = (
        _state_parts(s) + [_glance(s)] + _hypothesis_parts(s) + _arm_parts(s) + _decision_parts(s)
    )
    parts += (
        _per_seed_parts(s)
        + _curve_parts(s, results, *curves)
        + _tuning_parts(s)
        + _failure_parts(s)
    )
    parts += _violation_parts(s) + _heldout_parts(s) + _identity_parts(s)
    title = f"{s['name']} / {s['run_id']}: run report"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="generator" content="planner report">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def _state_parts(s: dict[str, Any]) -> list[str]:
    """The title, the run state, the lock and the notes."""
    parts = [f"<h1>{_e(s['name'])} <span class='muted'>/ {_e(s['run_id'])}</span></h1>"]
    state = f"<span class='badge state'>{_e(s['run_state'])}</span>"
    if s.get("state_reason"):
        state += f" {_e(s['state_reason'])}"
    if s.get("state_updated"):
        state += f" <span class='muted'>(updated {_e(s['state_updated'])})</span>"
    parts.append(f"<p>Run state: {state}</p>")
    if s.get("lock"):
        lk = s["lock"]
        parts.append(
            f"<p class='warn'>Locked by pid {_e(lk.get('pid'))} on {_e(lk.get('host'))} since "
            f"{_e(lk.get('started'))}: the run is in progress and this report is partial.</p>"
        )
    for note in s["notes"]:
        parts.append(f"<p class='warn'>{_e(note)}</p>")
    return parts


def _hypothesis_parts(s: dict[str, Any]) -> list[str]:
    """The hypothesis, the factor, the metric and the acceptance rule."""
    m, acc = s["metrics"], s["acceptance"]
    parts: list[str] = []
    parts.append("<h2>Hypothesis</h2>")
    parts.append(f"<p class='hyp'>{_e(str(s.get('hypothesis') or '–').strip())}</p>")
    parts.append(
        f"<p>Factor <b>{_e(s['factor']['name'])}</b> (keys: {', '.join(f'<code>{_e(k)}</code>' for k in s['factor']['keys'] or [])}); "
        f"baseline <b>{_e(s['baseline'])}</b>. Metric <code>{_e(m['name'])}</code> ({_e(m['mode'])}); the decision uses "
        f"<code>{_e(m['decision'])}</code> ({_e(m['decision_mode'])}). {_e(acc['test'])} test, alpha {_f(acc['alpha'])}, {_e(acc['correction'])} "
        f"correction, min_effect {_f(acc['min_effect'])}.</p>"
    )
    return parts


def _arm_parts(s: dict[str, Any]) -> list[str]:
    """Each arm's overrides and config diff against the baseline."""
    parts: list[str] = []
    parts.append("<h2>Arms and their config against the baseline</h2>")
    rows = []
    for a in s["arms"]:
        name = f"<b>{_e(a['arm'])}</b>" + (
            " <span class='muted'>(baseline)</span>" if a["baseline"] else ""
        )
        over = " ".join(f"<code>{_e(o)}</code>" for o in a["overrides"]) or "–"
        if a["baseline"]:
            diff = "<span class='muted'>the reference</span>"
        elif not a["has_config"]:
            diff = "<span class='muted'>configs/ has no file for this arm</span>"
        else:
            diff = (
                "<br>".join(
                    f"<code>{_e(d['path'])}</code>: {_e(shown_side(d, 'baseline'))} → <b>{_e(shown_side(d, 'arm'))}</b>"
                    for d in a["config_diff"]
                )
                or "<span class='muted'>no difference</span>"
            )
        rows.append([name, over, diff])
    parts.append(_table(["arm", "overrides", "config diff vs the baseline"], rows))
    return parts


def _decision_parts(s: dict[str, Any]) -> list[str]:
    """The decisions, their warnings and the forest plot."""
    m, acc = s["metrics"], s["acceptance"]
    parts: list[str] = []
    parts.append("<h2>Decisions</h2>")
    parts += [
        f"<p class='bad'><b>Warning: {_e(f.get('message') or f.get('kind'))}.</b></p>"
        for f in s.get("findings") or []
    ]
    if s["decisions"]:
        rows = [
            [
                _e(d["arm"]),
                _badge(d["decision"]),
                _f(d["effect"]),
                f"[{_f(d['ci_low'])}, {_f(d['ci_high'])}]",
                _f(d["p_value"]),
                _f(d["alpha_adjusted"]),
                _f(d["n_baseline"]),
                _f(d["n_arm"]),
                _e(d["reason"] or ""),
            ]
            for d in s["decisions"]
        ]
        parts.append(
            _table(
                [
                    "arm",
                    "decision",
                    "effect",
                    "CI",
                    "p",
                    "alpha adj.",
                    "n baseline",
                    "n arm",
                    "reason",
                ],
                rows,
                num={2, 4, 5, 6, 7},
            )
        )
        parts.append(
            _img(
                _plots.forest_svg(s["decisions"], acc["min_effect"], m["decision"]),
                "forest plot of the effects",
            )
        )
    else:
        parts.append("<p>No treatment arms.</p>")
    return parts


def _per_seed_parts(s: dict[str, Any]) -> list[str]:
    """Confirmation values by seed and arm."""
    parts: list[str] = []
    ps = s["per_seed"]
    parts.append(f"<h2>Confirmation by seed <span class='muted'>({_e(ps['metric'])})</span></h2>")
    if ps["rows"]:
        rows = []
        for r in ps["rows"]:
            cells = [_f(r["seed"])]
            for arm in ps["arms"]:
                c = r["values"].get(arm)
                absent = (
                    "not needed" if [r["seed"], arm] in ps.get("not_needed", []) else ps["missing"]
                )
                cells.append(
                    f"<span class='muted'>{_e(absent)}</span>"
                    if c is None
                    else _f(c["value"])
                    if c["status"] == TrialStatus.COMPLETED
                    else f"{_f(c['value'])} <b>({_e(c['status'])})</b>"
                )
            rows.append(cells)
        rows.append(["<b>mean</b>", *[f"<b>{_f(ps['mean'].get(a))}</b>" for a in ps["arms"]]])
        parts.append(_table(["seed", *ps["arms"]], rows, num=set(range(1, len(ps["arms"]) + 1))))
    else:
        parts.append("<p>No confirmation trials yet.</p>")
    return parts


def _curve_parts(
    s: dict[str, Any], results: RunResults, curves: Any, selected: dict[str, Any]
) -> list[str]:
    """The learning curves per arm (`rp.curves` and `rp.selected_curves` of `results`)."""
    m = s["metrics"]
    parts: list[str] = []
    parts.append(f"<h2>Learning curves <span class='muted'>({_e(m['name'])})</span></h2>")
    unit = str(s["budget"].get("unit") or "step")
    exposure = facts.contract_get(results.contract, "budget.exposure")
    parts.append(
        _img(
            _plots.curves_svg(curves, results.arms, str(m["name"]), unit, exposure, selected),
            "learning curves per arm",
        )
    )
    parts.append(
        "<p class='muted'>Tuning: the median and middle half of every tuning trial of the arm, whatever "
        "its params (trials stopped early leave the band at their last step); dashed, the trial selected "
        "for confirmation. Confirmation: the median and the range over seeds.</p>"
    )
    return parts


def _tuning_parts(s: dict[str, Any]) -> list[str]:
    """Tuning per arm, the data, the trials, the budget and the cost."""
    parts: list[str] = []
    if s["tuning"]:
        parts.append("<h2>Tuning</h2>")
        rows = [
            [
                _e(t["arm"]),
                _f(t["planned"]),
                _f(t["ended"]),
                _f(t["full_exposure"]),
                _f(t["early_stopped"]),
                _f(t["failed"]),
                _e(t["selected_trial"] or "–"),
                _f(t["selected_value"]),
                ", ".join(f"<code>{_e(k)}</code>={_f(v)}" for k, v in t["selected_params"].items()),
            ]
            for t in s["tuning"]
        ]
        parts.append(
            _table(
                [
                    "arm",
                    "planned",
                    "ended",
                    "full exposure",
                    "stopped early",
                    "failed",
                    "selected",
                    "value",
                    "selected params",
                ],
                rows,
                num={1, 2, 3, 4, 5, 7},
            )
        )

    parts.append("<h2>Data</h2>")
    parts.append(
        "<ul>" + "".join(f"<li>{_e(line.lstrip('- '))}</li>" for line in rp.data_lines(s)) + "</ul>"
    )

    parts.append("<h2>Trials and budget</h2>")
    rows = [
        [
            _e(t["phase"]),
            _e(t["arm"]),
            f"{_f(t['ended'])} / {_f(t['planned'])}",
            ", ".join(f"{_e(k)} {_f(v)}" for k, v in sorted(t["statuses"].items())),
        ]
        for t in s["trials"]
    ]
    parts.append(_table(["phase", "arm", "ended / planned", "statuses"], rows))
    parts.append(_table(None, [[_e(a), _e(b)] for a, b in rp.budget_lines(s["budget"])]))

    parts += _cost(s["cost"], _plots)
    return parts


def _failure_parts(s: dict[str, Any]) -> list[str]:
    """Failed and retried trials."""
    parts: list[str] = []
    parts.append("<h2>Failures</h2>")
    if s["failures"]:
        rows = [
            [
                _id(f["trial_id"]),
                _e(f["status"]) + (" (retried)" if f["retried"] else ""),
                _f(f["attempts"]),
                _e(
                    f["error"]
                ),  # one line: the traceback stays in trials.jsonl and the trial's logs
                f"<code>{_e(f['where'])}</code>" if f["where"] else "",
            ]
            for f in s["failures"][: rp.MAX_ROWS]
        ]
        parts.append(
            _table(["trial", "status", "attempts", "error", "where (innermost frame)"], rows)
        )
        parts.append(_more(len(s["failures"])))
    else:
        parts.append("<p>None.</p>")
    return parts


def _violation_parts(s: dict[str, Any]) -> list[str]:
    """Protocol violations."""
    parts: list[str] = []
    parts.append(
        "<h2>Protocol violations"
        + (f" <span class='badge reject'>{len(s['violations'])}</span>" if s["violations"] else "")
        + "</h2>"
    )
    if s["violations"]:
        labels = {
            "heldout_in_tuning": "held-out metric in tuning (test exposure)",
            "report_past_budget": "report past the budget",
        }
        rows = [
            [
                _e(labels.get(v["kind"], v["kind"])),
                _id(v["trial_id"]),
                _f(v["step"]),
                _e(v["detail"]),
                SOURCES.get(v["source"], v["source"]),
            ]
            for v in s["violations"][: rp.MAX_ROWS]
        ]
        parts.append(_table(["violation", "trial", "step", "detail", "source"], rows))
        parts.append(_more(len(s["violations"])))
    else:
        parts.append("<p>None.</p>")
    return parts


def _heldout_parts(s: dict[str, Any]) -> list[str]:
    """The held-out ledger, re-evaluations and the lineage."""
    parts: list[str] = []
    parts.append("<h2>Held-out ledger</h2>")
    h = s["heldout"]
    parts.append(f"<p>{_md_to_html(rp.heldout_line(h))}</p>")
    if h.get("by_arm"):
        parts.append(
            _table(
                ["arm", "evaluations"], [[_e(a), _f(n)] for a, n in h["by_arm"].items()], num={1}
            )
        )
    if s.get("reevals"):
        parts.append("<h2>Re-evaluations (plan reeval)</h2>")
        parts.append(
            _table(
                [
                    "reeval",
                    "arm",
                    "seeds",
                    "tolerance",
                    "verdict",
                    "identity differences",
                    "started",
                ],
                [
                    [
                        _f(r["reeval"]),
                        _e(r["arm"]),
                        _e(", ".join(map(str, r["seeds"] or []))),
                        _f(r["tolerance"]),
                        _e(r["verdict"]),
                        _e(", ".join(r["identity_differences"]) or "none"),
                        _e(r["started"] or "–"),
                    ]
                    for r in s["reevals"]
                ],
            )
        )
    if s.get("lineage"):  # docs/lineage.md
        parts.append(
            "<h2>Lineage</h2><ul>"
            + "".join(f"<li>{_e(line)}</li>" for line in lineage_lines(s["lineage"]))
            + "</ul>"
        )
    return parts


def _identity_parts(s: dict[str, Any]) -> list[str]:
    """The run's identity and its folder."""
    parts: list[str] = []
    parts.append("<h2>Identity</h2>")
    ident = s["identity"]
    if ident:
        pk = ", ".join(f"{_e(k)} {_e(v)}" for k, v in ident["packages"].items())
        if ident.get("other_packages"):
            pk += f" <span class='muted'>(+{_f(ident['other_packages'])} more in identity.json)</span>"
        dirty = " <span class='badge reject'>dirty</span>" if ident.get("dirty") else ""
        rows = [
            [
                "commit",
                (
                    f"<code>{_e(ident['commit'])}</code>"
                    if ident.get("commit")
                    else "<span class='muted'>not recorded (not a git checkout?)</span>"
                )
                + dirty,
            ],
            ["repo", _e(ident.get("repo") or "–")],
            ["trainable", f"<code>{_e(ident.get('trainable') or '–')}</code>"],
            ["python", _e(ident.get("python") or "–")],
            ["packages", pk or "–"],
            [
                "host",
                _e(
                    f"{ident.get('host') or '–'} ({ident.get('platform') or '?'}, {ident.get('cpus') or '?'} CPUs)"
                ),
            ],
            [
                "data",
                "<br>".join(
                    f"<code>{_e(p)}</code> sha256 {_e(str(hh)[:16])}…"
                    for p, hh in ident["data"].items()
                )
                or "–",
            ],
            ["contract sha256", f"<code>{_e(ident.get('contract_sha256') or '–')}</code>"],
        ]
        parts.append(_table(None, rows))
    else:
        parts.append("<p>identity.json is missing.</p>")
    parts.append(f"<p class='muted'>Run folder: <code>{_e(s['run_dir'])}</code></p>")
    return parts


def _more(total: int) -> str:
    lines = rp.more_line(total)
    return f"<p class='muted'>{_md_to_html(lines[0])}</p>" if lines else ""


def _glance(s: dict[str, Any]) -> str:
    """Run state, decisions, budget and protocol: three facts kept apart, at the top."""
    decisions = (
        ", ".join(
            f"{_e(d['arm'])} {_badge(d['decision'])}"
            + (
                f" {_f(d['effect'])} [{_f(d['ci_low'])}, {_f(d['ci_high'])}]"
                if d.get("effect") is not None
                else ""
            )
            for d in s["decisions"]
        )
        or "–"
    )
    b = s["budget"]
    lines = dict(rp.budget_lines(b))
    budget = f"{_f(b.get('trials_ended'))} of {_f(b.get('trials_planned'))} trials; " + "; ".join(
        f"{_e(k)} {_e(v)}" for k, v in lines.items() if k.startswith(("exposure", "wall"))
    )
    h = s["heldout"]
    protocol = []
    if s["violations"]:
        protocol.append(f"<span class='bad'>{len(s['violations'])} violation(s)</span>")
    fails = [f for f in s["failures"] if not f["retried"]]
    protocol.append(f"{len(fails)} failed trial(s)")
    if h.get("metric"):
        cap = f" of {_f(h['cap'])}" if h.get("cap") is not None else ""
        protocol.append(
            f"held-out evaluated {_f(h['evaluations'])}{cap}"
            + (" <span class='bad'>(over the cap)</span>" if h.get("over_cap") else "")
        )
    rows = [["decisions", decisions], ["budget used", budget], ["protocol", "; ".join(protocol)]]
    return (
        "<table class='glance'><tbody>"
        + "".join(f"<tr><td class='muted'>{k}</td><td>{v}</td></tr>" for k, v in rows)
        + "</tbody></table>"
    )


def _md_to_html(text: str) -> str:
    """The ledger sentence's `code` and **bold** marks, after escaping."""
    out = _e(text)
    while "`" in out and out.count("`") >= 2:
        out = out.replace("`", "<code>", 1).replace("`", "</code>", 1)
    while out.count("**") >= 2:
        out = out.replace("**", "<b>", 1).replace("**", "</b>", 1)
    return out


def _cost(cost: list[dict[str, Any]], plots: Any) -> list[str]:
    """The Cost section with its small plot, apart from the decisions (nothing without trials)."""
    if not any(c["trials"] for c in cost):
        return []
    header, cells = rp.cost_table(cost)
    rows = [[_e(cell) for cell in row] for row in cells]
    return [
        "<h2>Cost <span class='muted'>(apart from the decision)</span></h2>",
        f"<p class='muted'>{_e(rp.COST_NOTE)}</p>",
        _table(header, rows, num=set(range(1, len(header)))),
        _img(plots.cost_svg(cost), "trial time and seconds per step per arm"),
    ]
