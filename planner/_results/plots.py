"""The report's plots as SVG: a forest plot of effects, learning curves, the cost per arm.

Written as text by planner._results.svg (no plotting library is imported: matplotlib's import and
drawing cost more than a second of a report, docs/speed.md); imported only when an HTML report is
rendered. Metric and arm names come from the run folder and are drawn as written (escaped).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from planner._results.svg import Chart, text_width

DECISION_COLORS = {
    "accept": "#1a7f37",
    "reject": "#cf222e",
    "inconclusive": "#9a6700",
    "incomplete": "#6e7781",
    "invalid": "#8250df",
}
ARM_COLORS = [
    "#0969da",
    "#bc4c00",
    "#8250df",
    "#1a7f37",
    "#cf222e",
    "#6e7781",
    "#bf3989",
    "#0a3069",
]
DPI = 96  # px per inch of the sizes below
DRAWN = 1e300  # a finite value past this is drawn at it: an axis up to 1.7e308 has no room for its margins


def _drawable(values: Any) -> np.ndarray:
    """Values as floats, each finite one held within +-DRAWN (a run folder's metric may be any finite number)."""
    a = np.asarray(values, dtype=float)
    return np.where(np.isfinite(a), np.clip(a, -DRAWN, DRAWN), a)


def _label_room(labels: list[str], size: float = 11, most: float = 260) -> float:
    """The px a panel leaves on its left for these tick labels."""
    return min(most, max((text_width(label, size) for label in labels), default=0) + 20)


def forest_svg(decisions: list[dict[str, Any]], min_effect: float | None, metric: str) -> bytes:
    """Each arm's effect with its CI, 0 and min_effect marked."""
    rows = [d for d in decisions if d.get("effect") is not None]
    width, height = 8 * DPI, (0.6 * max(len(rows), 1) + 1.4) * DPI
    chart = Chart(width, height)
    if not rows:
        why = (
            "no decisions yet"
            if not decisions
            else "no effect to plot: no arm has a complete comparison"
        )
        chart.panel(0, 0, width, height, note=why)
        return chart.svg()
    names = [str(d["arm"]) for d in reversed(rows)]
    left = max(60.0, _label_room(names))
    panel = chart.panel(
        left,
        12,
        width - left - 90,
        height - 12 - 52,
        x_margin=0.25,
        grid="x",
        y_range=(-0.7, len(rows) - 0.3),
        y_labels=list(enumerate(names)),
        xlabel=f"effect on {metric} vs the baseline, positive = better (CI at the adjusted alpha)",
        legend_at="lower right",
    )
    panel.vline(0, "#57606a", 1.0)
    if min_effect is not None:
        panel.vline(
            float(_drawable(min_effect)), "#cf222e", 1.2, "--", label=f"min_effect = {min_effect:g}"
        )
    for y, d in enumerate(reversed(rows)):
        color = DECISION_COLORS.get(str(d.get("decision")), "#24292f")
        effect = float(_drawable(d["effect"]))
        lo = float(_drawable(d["ci_low"])) if d.get("ci_low") is not None else effect
        hi = float(_drawable(d["ci_high"])) if d.get("ci_high") is not None else effect
        panel.line([lo, hi], [y, y], color, 2.5)
        panel.point(effect, y, color)
        panel.text(
            hi if np.isfinite(hi) else effect, y, str(d.get("decision")), color, size=11, dx=6
        )
    return chart.svg()


def curves_svg(
    curves: pd.DataFrame,
    arms: list[str],
    metric: str,
    unit: str,
    exposure: int | None = None,
    selected: dict[str, pd.DataFrame] | None = None,
) -> bytes:
    """Median per step with its spread, per arm; tuning and confirmation side by side.

    `selected` (arm -> step, value) draws each arm's selected tuning trial, dashed, on the tuning panel.
    """
    selected = selected or {}
    phases = [p for p in ("tune", "confirm", "reeval") if p in set(curves["phase"].astype(str))]
    titles = {
        "tune": "tuning: median, 25–75 % of trials",
        "confirm": "confirmation: median, min–max over seeds",
        "reeval": "re-evaluation: median, min–max",
    }
    n = max(len(phases), 1)
    width, height = 5.2 * n * DPI, 3.8 * DPI
    chart = Chart(width, height)
    if not phases:
        chart.panel(0, 0, width, height, note=f"no reports of {metric} yet")
        return chart.svg()
    phase_col = curves["phase"].astype(str).to_numpy()
    arm_col = curves["arm"].astype(str).to_numpy()
    left, gap, right = 70.0, 50.0, 12.0
    each = (width - left - right - gap * (n - 1)) / n
    for k, phase in enumerate(phases):
        panel = chart.panel(
            left + k * (each + gap),
            28,
            each,
            height - 28 - 72,
            title=titles[phase],
            xlabel=unit,
            ylabel=metric if k == 0 else None,
            x_integer=True,
            legend_at="below",
        )
        for i, arm in enumerate(arms):
            sub = curves[(phase_col == phase) & (arm_col == arm)]
            if not len(sub):
                continue
            color = ARM_COLORS[i % len(ARM_COLORS)]
            x = sub["step"].to_numpy(dtype=float)
            lo, hi = ("q25", "q75") if phase == "tune" else ("min", "max")
            panel.band(x, _drawable(sub[lo]), _drawable(sub[hi]), color)
            panel.line(x, _drawable(sub["median"]), color, 1.8, label=arm if k == 0 else None)
            if phase == "tune" and arm in selected:
                sel = selected[arm]
                panel.line(
                    sel["step"].to_numpy(dtype=float), _drawable(sel["value"]), color, 1.1, "--"
                )
        if phase == "tune" and selected and k == 0:
            panel.legend.append(("selected trial", "#57606a", "--", "line"))
        if (
            exposure is not None
            and float(curves["step"].to_numpy()[phase_col == phase].max()) > exposure
        ):
            panel.vline(exposure, "#cf222e", 1.0, ":", label="budget" if k == 0 else None)
    return chart.svg()


def cost_svg(cost: list[dict[str, Any]]) -> bytes:
    """Per arm: trial time (by phase) and the median seconds per step, side by side, small."""
    arms = [str(c["arm"]) for c in cost]
    width, height = 8 * DPI, (0.35 * max(len(arms), 1) + 1.3) * DPI
    chart = Chart(width, height)
    y = list(range(len(arms)))[::-1]
    phases = sorted(
        {p for c in cost for p in c.get("phases") or {}},
        key=lambda p: (
            ("tune", "confirm", "reeval").index(p) if p in ("tune", "confirm", "reeval") else 9
        ),
    )
    total = max((c.get("trial_seconds") or 0.0 for c in cost), default=0.0)
    unit, scale = ("s", 1.0) if total < 120 else ("min", 60.0) if total < 7200 else ("h", 3600.0)
    left, gap, right, top = max(40.0, _label_room(arms)), 16.0, 12.0, 10.0
    each = (width - left - right - gap) / 2
    span = (-0.6, len(arms) - 0.4)
    times = chart.panel(
        left,
        top,
        each,
        height - top - 48,
        xlabel=f"trial time ({unit})",
        grid="x",
        x_from_zero=True,
        y_range=span,
        y_labels=list(zip(y, arms, strict=True)),
        legend_at="lower right",
    )
    start = [0.0] * len(arms)
    for j, phase in enumerate(phases):
        widths = [
            ((c.get("phases") or {}).get(phase) or {}).get("trial_seconds", 0.0) / scale
            for c in cost
        ]
        for row, w, s0 in zip(y, widths, start, strict=True):
            times.hbar(row, w, s0, ARM_COLORS[j % len(ARM_COLORS)], opacity=0.8, label=phase)
        start = [a + b for a, b in zip(start, widths, strict=True)]
    steps = chart.panel(
        left + each + gap,
        top,
        each,
        height - top - 48,
        xlabel="median seconds per step",
        grid="x",
        x_from_zero=True,
        y_range=span,
        y_labels=[(row, "") for row in y],
    )
    for row, c in zip(y, cost, strict=True):
        steps.hbar(row, c.get("median_s_per_step") or 0.0, 0.0, "#57606a")
    return chart.svg()
