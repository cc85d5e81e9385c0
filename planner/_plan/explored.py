"""How far each arm's tuning reached into its space: said with the decision, the report, the audit.

For each tuned key of an arm: how many of its tuning trials drew it, the part of the declared range
the draws explored (the smallest to the largest value drawn, as a share of the range on its scale,
the log scale for `log_uniform`), or for a `choice` how many of its options were drawn; and whether
the selected value sits at an edge: of the declared range (its outer `BOUNDARY`), or of what was
explored (the smallest or largest value drawn, the declared range going on beyond it). The
decision's CI covers seed noise only; a range the draws barely explored is not in it, so the
decision says how far the search reached (docs/statistics.md, "How well each arm was tuned").

Pure: functions of an arm's tuning params, its space (the contract model's dimensions or a frozen
contract's, `planner._plan.space`) and its selected params.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from planner._core.text import number
from planner._plan.space import Dimensional

BOUNDARY = 0.10  # a selected value in the outer 10 % of its declared range is at the range's edge
RANGES = ("log_uniform", "uniform", "int")

Side = Literal["low", "high"]
EdgeOf = Literal["range", "explored"]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def position(kind: str, bounds: Any, value: Any) -> float | None:
    """Where `value` lies in a range, 0 at the low end, 1 at the high end (log scale for
    log_uniform); None for a choice, a value that is no finite number, or a range with no width."""
    if kind not in RANGES or not _number(value):
        return None
    lo, hi, v = float(bounds[0]), float(bounds[1]), float(value)
    if kind == "log_uniform":
        if v <= 0 or lo <= 0:
            return None
        lo, hi, v = math.log(lo), math.log(hi), math.log(v)
    return None if hi == lo else (v - lo) / (hi - lo)


@dataclass(frozen=True)
class KeyReach:
    """One tuned key of one arm: what its draws explored, and where the selected value sits.

    `share`: for a range, the part of it between the smallest and largest draw (0 for one distinct
    value); for a choice, the share of its options drawn. `edge`/`edge_of`: the selected value's
    side and whether it is the edge of the declared range or of what the draws explored.
    """

    key: str
    kind: str
    bounds: tuple[Any, ...]
    draws: int  # tuning trials of the arm that drew the key
    distinct: int  # distinct values drawn (finite numbers for a range)
    low: float | None  # a range's smallest and largest draw
    high: float | None
    share: float | None
    selected: Any = None
    position: float | None = None  # the selected value's, in the declared range
    edge: Side | None = None
    edge_of: EdgeOf | None = None

    @property
    def beyond(self) -> float | None:
        """The share of the declared range past the selected value, on its edge's side."""
        if self.edge is None or self.position is None:
            return None
        return self.position if self.edge == "low" else 1 - self.position


@dataclass(frozen=True)
class ArmReach:
    """One arm's tuning: its draws (tuning trials) and each key of its space."""

    arm: str
    draws: int
    keys: tuple[KeyReach, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _edge(kind: str, bounds: Any, value: Any, low: Any, high: Any, distinct: int) -> tuple:
    """(position, side, of what) of a selected value; side and of-what None at no edge."""
    u = position(kind, bounds, value)
    if u is None:
        return None, None, None
    if u <= BOUNDARY or u >= 1 - BOUNDARY:
        return u, "low" if u <= BOUNDARY else "high", "range"
    if distinct >= 2 and value <= low:  # one value drawn explored nothing: no edge to be at
        return u, "low", "explored"
    if distinct >= 2 and value >= high:
        return u, "high", "explored"
    return u, None, None


def key_reach(key: str, dim: Dimensional, drawn: Sequence[Any], selected: Any = None) -> KeyReach:
    """What the draws `drawn` (every value the arm's trials gave `key`) explored of `dim`."""
    bounds = tuple(dim.bounds)
    if dim.kind not in RANGES:
        hit = sum(1 for o in bounds if any(v == o or str(v) == str(o) for v in drawn))
        share = hit / len(bounds) if bounds else None
        return KeyReach(key, dim.kind, bounds, len(drawn), hit, None, None, share, selected)
    values = sorted({float(v) for v in drawn if _number(v)})
    if not values:
        return KeyReach(key, dim.kind, bounds, len(drawn), 0, None, None, None, selected)
    lo, hi = position(dim.kind, bounds, values[0]), position(dim.kind, bounds, values[-1])
    share = None if lo is None or hi is None else hi - lo
    u, side, of = _edge(dim.kind, bounds, selected, values[0], values[-1], len(values))
    return KeyReach(
        key,
        dim.kind,
        bounds,
        len(drawn),
        len(values),
        values[0],
        values[-1],
        share,
        selected,
        u,
        side,
        of,
    )


def arm_reach(
    arm: str,
    space: Mapping[str, Dimensional],
    params: Iterable[Mapping[str, Any]],
    selected: Mapping[str, Any] | None = None,
) -> ArmReach:
    """The arm's tuning reach: `params` holds each of its tuning trials' params (one per trial),
    `selected` the params of the trial selected for confirmation (None: nothing selected yet)."""
    trials = [p for p in params if isinstance(p, Mapping)]
    chosen = selected or {}
    keys = tuple(
        key_reach(key, dim, [p[key] for p in trials if key in p], chosen.get(key))
        for key, dim in space.items()
    )
    return ArmReach(arm, len(trials), keys)


# ---------------------------------------------------------------- the sentence


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _names(arms: Sequence[str]) -> str:
    return arms[0] if len(arms) == 1 else f"{', '.join(arms[:-1])} and {arms[-1]}"


def _draws_said(reaches: Sequence[ArmReach]) -> str:
    counts = {r.draws for r in reaches}
    if len(counts) == 1:
        n = counts.pop()
        return f"tuned with {n} draw{'' if n == 1 else 's'} per arm"
    return "tuned with " + ", ".join(
        f"{r.draws} draw{'' if r.draws == 1 else 's'} of {r.arm}" for r in reaches
    )


def _explored_said(k: KeyReach) -> str | None:
    """What one arm's draws of a key explored, without the key's name; None: nothing drawn."""
    if k.kind not in RANGES:
        return None if not k.draws else f"drew {k.distinct} of its {len(k.bounds)} choices"
    if k.low is None:
        return None
    scale = " on its log scale" if k.kind == "log_uniform" else ""
    declared = f"[{number(k.bounds[0])}, {number(k.bounds[1])}]"
    if k.distinct == 1:
        return f"drew one value, {number(k.low)}, of {declared}"
    share = "" if k.share is None else f"{_pct(k.share)} of "
    return f"explored {number(k.low)}-{number(k.high)} ({share}{declared}{scale})"


def _keys_said(reaches: Sequence[ArmReach]) -> list[str]:
    """Per key, what the draws explored: once when every arm's explored the same, else by arm."""
    out = []
    for key in dict.fromkeys(k.key for r in reaches for k in r.keys):
        said: dict[str, list[str]] = {}
        for r in reaches:
            for k in r.keys:
                text = _explored_said(k) if k.key == key else None
                if text is not None:
                    said.setdefault(text, []).append(r.arm)
        if len(said) == 1:
            out.append(f"{key} {next(iter(said))}")
        elif said:
            out.append(f"{key} " + ", ".join(f"{t} by {_names(a)}" for t, a in said.items()))
    return out


def _edges_said(reaches: Sequence[ArmReach]) -> list[str]:
    """The selected values at an edge, the arms that share one said together."""
    groups: dict[tuple, list[str]] = {}
    for r in reaches:
        for k in r.keys:
            if k.edge is not None:
                beyond = _pct(k.beyond) if k.beyond is not None else ""
                groups.setdefault(
                    (k.key, k.edge, k.edge_of, number(k.selected), beyond), []
                ).append(r.arm)
    out = []
    for (key, side, of, value, beyond), arms in groups.items():
        whose = "its" if len(arms) == 1 else "their"
        if of == "explored":
            word, where = ("smallest", "below") if side == "low" else ("largest", "above")
            out.append(
                f"{_names(arms)} selected {whose} {word} {key} draw ({value}), the edge of what "
                f"was explored: {beyond} of the range {where} it never tried"
            )
        else:
            out.append(
                f"{_names(arms)} selected {key} = {value}, in the outer {_pct(BOUNDARY)} of "
                f"{whose} declared range at the {side} end"
            )
    return out


def reach_said(reaches: Sequence[ArmReach]) -> str | None:
    """One sentence for the decision: the draws per arm, the part of each range they explored, and a
    selected value at an edge of what was explored (or of the range); None when no arm was tuned."""
    reaches = [r for r in reaches if r.draws]
    if not reaches:
        return None
    parts = [_draws_said(reaches), *_keys_said(reaches)]
    edges = _edges_said(reaches)
    selected = any(k.position is not None for r in reaches for k in r.keys)
    if edges:
        parts += edges
    elif selected:
        parts.append("every selected value lies inside what its arm's draws explored")
    return "; ".join(parts)
