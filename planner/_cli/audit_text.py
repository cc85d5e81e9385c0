"""The text `plan audit` prints: what ran, the findings with their evidence, the missing evidence
and the next control (planner._audit.audit computes them)."""

from __future__ import annotations

from functools import partial
from typing import Any

from planner._audit.audit import Audit, no_control_sentence
from planner._core.text import number, terminal_safe
from planner._core.text_tables import text_table

_g = partial(number, none="none")  # as the findings' sentences write a number


def _params(params: dict[str, Any]) -> str:
    out = []
    for k, v in params.items():
        if isinstance(v, dict) and "min" in v:
            out.append(f"{k} {_g(v['min'])}..{_g(v['max'])}")
        elif isinstance(v, dict) and "values" in v:
            out.append(f"{k} {{{', '.join(v['values'])}}}")
        else:
            out.append(f"{k}={_g(v)}")
    return ", ".join(out) or "no tuned params"


def _seeds(seeds: list[Any]) -> str:
    ints = [s for s in seeds if isinstance(s, int)]
    if (
        len(ints) == len(seeds)
        and len(ints) > 3
        and ints == list(range(ints[0], ints[0] + len(ints)))
    ):
        return f"{ints[0]}-{ints[-1]}"
    return ",".join(map(str, seeds))


def _compact(value: Any) -> str:
    """A value of the evidence in a line: numbers to 4 significant digits, long lists cut."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        shown = [_compact(v) for v in value[:6]]
        return (
            "[" + ", ".join(shown + ([f"... {len(value)} in all"] if len(value) > 6 else [])) + "]"
        )
    return _g(value)


def _evidence_line(item: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_compact(v)}" for k, v in item.items())


def format_audit(audit: Audit, max_evidence: int = 5) -> str:
    ev = audit.evidence
    state = ev.state.get("state") or "unknown"
    lines = [f"audit of {ev.name} / {ev.run_id} ({state})", ""]
    decisions = [d for d in (ev.decisions or {}).get("decisions") or [] if isinstance(d, dict)]
    if decisions:
        lines.append(
            "decisions: "
            + "; ".join(
                f"{d.get('arm')} {d.get('decision')} (effect {_g(d.get('effect'))}, CI "
                f"[{_g(d.get('ci_low'))}, "
                f"{_g(d.get('ci_high'))}])"
                for d in decisions
            )
        )
        lines.append("")
    lines.append("What ran")
    header = ["arm", "phase", "recipe", "trials", "seeds", "statuses", "exposure", "s/step"]
    rows = []
    for r in audit.recipes:
        exposure = r["exposure"]
        reach = (
            "–"
            if exposure is None
            else (
                str(exposure["max"])
                if exposure["min"] == exposure["max"]
                else f"{exposure['min']}-{exposure['max']}"
            )
        )
        recipe = ("sampled: " if r["sampled"] else "") + _params(r["params"])
        rows.append(
            [
                r["arm"],
                r["phase"],
                recipe,
                str(r["trials"]),
                _seeds(r["seeds"]),
                ", ".join(f"{k} {n}" for k, n in r["statuses"].items()),
                reach,
                _g(r["s_per_step"]) if r["s_per_step"] is not None else "–",
            ]
        )
    if rows:
        lines.extend(text_table(rows, header=header))
    else:
        lines.append("  no trial ended yet")
    for r in audit.recipes:
        if r["config_vs_baseline"] and r["phase"] != "tune":
            diff = ", ".join(f"{k}={_g(v)}" for k, v in r["config_vs_baseline"].items())
            lines.append(f"  {r['arm']} ran, against the baseline's logged config: {diff}")
    lines.append("")
    lines.append(f"Findings ({len(audit.findings)})")
    if not audit.findings:
        lines.append("  none")
    for f in audit.findings:
        lines.append(f"  {f.code} [{f.kind}]" + (f" {f.arm}" if f.arm else "") + f": {f.summary}")
        for item in f.evidence[:max_evidence]:
            lines.append(f"      - {_evidence_line(item)}")
        if len(f.evidence) > max_evidence:
            lines.append(
                f"      - ... and {len(f.evidence) - max_evidence} more (--json lists them all)"
            )
    lines.append("")
    lines.append("Missing evidence")
    if not audit.missing:
        lines.append("  none")
    for m in audit.missing:
        lines.append(f"  - {m['what']}: {m['why']}")
    lines.append("")
    lines.append("Next control")
    n = audit.next
    if n is None:
        lines.append(f"  {no_control_sentence(audit)}")
    else:
        lines.append(f"  answers: {n['code']}" + (f" ({n['arm']})" if n.get("arm") else ""))
        lines.append(f"  contract: {n['name']}")
        lines.append(f"  change: {n['change']['summary']}")
        if n["change"]["budget"]:
            lines.append(
                "  budget raised with it: "
                + "; ".join(
                    f"{c['path']}: {_g(c['from'])} -> {_g(c['to'])}" for c in n["change"]["budget"]
                )
            )
        lines.append(f"  held fixed: {n['held_fixed']}")
        lines.append(f"  falsifier: {n['falsifier']}")
        lines.append(f"  expected: {n['expected']}")
        lines.append("  write it with --next FILE, then `plan validate FILE`")
    if audit.notes:
        lines.append("")
        lines += [f"note: {note}" for note in audit.notes]
    return (
        terminal_safe("\n".join(lines)) + "\n"
    )  # text of the run folder is shown, never obeyed by the terminal
