"""`plan audit RUN_DIR`: from a run's evidence to findings, missing evidence and the next control.

    audit = audit_run(run_dir)       read the folder (no Ray, no trainable import), compute all
    audit_json(audit)                the `--json` object
    contract_text(audit, path)       the next control as YAML for `--next FILE`
    (planner._audit.control)

Only reading is done here; the CLI prints (planner._cli.audit_text) and writes.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from planner._audit import control as _control
from planner._audit.evidence import Evidence, read_evidence
from planner._audit.findings import Finding, find_all
from planner._audit.recipes import missing_evidence, what_ran
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
