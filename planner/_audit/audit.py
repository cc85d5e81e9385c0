"""`plan audit RUN_DIR`: from a run's evidence to findings, missing evidence and the next control.

    audit = audit_run(run_dir)       read the folder (no Ray, no trainable import), compute
    everything format_audit(audit)              the text `plan audit` prints
    audit_json(audit)                the `--json` object
    contract_text(audit, path)       the next control as YAML for `--next FILE`
    (planner._audit.control)

Only reading is done here; the CLI prints and writes.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from planner._audit import control as _control
from planner._audit.evidence import Evidence, read_evidence
from planner._audit.findings import Finding, _g, find_all
from planner._audit.recipes import missing_evidence, what_ran
from planner._core.text import terminal_safe
from planner._core.text_tables import text_table
from planner._results.cost import cost_by_arm


@dataclass
class Audit:
    evidence: Evidence
    recipes: list[dict[str, Any]]
    findings: list[Finding]
    missing: list[dict[str, str]]
    next: dict[str, Any] | None
    cost: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def audit_run(run_dir: str | os.PathLike) -> Audit:
    ev = read_evidence(run_dir)
    notes = list(ev.notes)
    cost = cost_by_arm(ev.records, ev.contract)
    findings = find_all(ev, cost)
    return Audit(
        ev,
        what_ran(ev),
        findings,
        missing_evidence(ev, findings),
        _control.next_control(ev, findings, notes),
        cost,
        notes,
    )


def contract_text(audit: Audit, target: str | os.PathLike) -> tuple[str, list[str]]:
    if audit.next is None:
        raise ValueError("no next control to write")
    return _control.contract_text(audit.evidence, audit.next, target)


def no_control_sentence(audit: Audit) -> str:
    """Why there is no next control."""
    if not audit.findings:
        return "No finding calls for a next control: nothing to change."
    codes = sorted({f.code for f in audit.findings})
    return (
        f"No finding calls for a next control: {', '.join(codes)} "
        f"{'has' if len(codes) == 1 else 'have'} no contract change that answers "
        f"{'it' if len(codes) == 1 else 'them'} (see Missing evidence, and the findings' own "
        f"sentences)."
    )


# ---------------------------------------------------------------- JSON


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def audit_json(audit: Audit) -> dict[str, Any]:
    ev = audit.evidence
    return _clean(
        {
            "run": {
                "dir": ev.run_dir,
                "run_id": ev.run_id,
                "name": ev.name,
                "state": ev.state.get("state"),
                "decisions": [
                    {k: d.get(k) for k in ("arm", "decision", "effect", "ci_low", "ci_high")}
                    for d in (ev.decisions or {}).get("decisions") or []
                    if isinstance(d, dict)
                ],
            },
            "recipes": audit.recipes,
            "findings": [f.as_dict() for f in audit.findings],
            "missing": audit.missing,
            "next": audit.next,
            "notes": audit.notes,
        }
    )


def render_json(audit: Audit) -> str:
    return json.dumps(audit_json(audit), indent=2, allow_nan=False, default=str) + "\n"


# ---------------------------------------------------------------- text


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
