"""What a run folder's files claim, checked against their own numbers.

decisions.json says, per arm, a decision and the numbers it came from (the effect, the CI at the
adjusted alpha, min_effect). A file edited by hand, or damaged, can say `accept` next to a CI that
includes 0. The readers do not believe it: `decision_findings` recomputes each
accept/reject/inconclusive with the contract's one rule (planner._stats.decide.verdict) and returns
a finding for each that does not follow; `plan status` and `plan report` show them as warnings.
`accepted` says whether a run folder shows an arm accepted, consistently (for `plan log`, which
marks a promotion it does not support as unverified).
"""

from __future__ import annotations

import math
from typing import Any

from planner._core.lazy import lazy_import
from planner._core.text import number

decide = lazy_import(
    "planner._stats.decide"
)  # SciPy: plan validate reads claims (a baseline's accept) and loads none


RULED = ("accept", "reject", "inconclusive")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def follows(row: dict[str, Any], min_effect: Any) -> str | None:
    """The decision the row's own numbers give (None when the row is not one the rule decides)."""
    if row.get("decision") not in RULED:
        return None
    effect, low, high = (_number(row.get(k)) for k in ("effect", "ci_low", "ci_high"))
    floor = _number(min_effect)
    if floor is None or effect is None:
        return "inconclusive"
    nan = float("nan")
    return str(
        decide.verdict(effect, nan if low is None else low, nan if high is None else high, floor)
    )


def decision_findings(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A finding for each decisions.json row whose decision does not follow from its own numbers."""
    out: list[dict[str, Any]] = []
    if not isinstance(doc, dict):
        return out
    min_effect = doc.get("min_effect")
    for row in doc.get("decisions") or []:
        if not isinstance(row, dict):
            continue
        expected = follows(row, min_effect)
        if expected is None or expected == row.get("decision"):
            continue
        effect, low, high = (_shown(row.get(k)) for k in ("effect", "ci_low", "ci_high"))
        out.append(
            {
                "kind": "decision_does_not_follow",
                "arm": row.get("arm"),
                "message": (
                    f"decisions.json says {row.get('arm')} {row.get('decision')}, but its own "
                    f"numbers (effect {effect}, "
                    f"CI [{low}, {high}], min_effect {_shown(min_effect)}) give {expected}: the "
                    f"file was edited or is "
                    "damaged, so this decision is not the run's"
                ),
            }
        )
    return out


def _shown(value: Any) -> str:
    return number(_number(value), none="none")


def accepted(doc: dict[str, Any] | None, arm: str) -> str | None:
    """None when decisions.json `doc` shows `arm` accepted by its own numbers, else why not (a
    sentence)."""
    rows = [
        r for r in (doc or {}).get("decisions") or [] if isinstance(r, dict) and r.get("arm") == arm
    ]
    if not rows:
        return f"its run folder has no decision for arm {arm}"
    row = rows[-1]
    if row.get("decision") != "accept":
        return f"its run folder shows arm {arm} {row.get('decision')}, not accepted"
    if follows(row, (doc or {}).get("min_effect")) != "accept":
        return f"its run folder says arm {arm} accept, but the numbers there do not give accept"
    return None
