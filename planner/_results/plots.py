"""The report's plots as PNG bytes: a forest plot of effects, learning curves.

Drawn on matplotlib's Agg canvas directly (no pyplot, so no global backend is
changed in a user's session); imported only when an HTML report is rendered.
"""

from __future__ import annotations

import functools
import io
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

DECISION_COLORS = {"accept": "#1a7f37", "reject": "#cf222e", "inconclusive": "#9a6700", "incomplete": "#6e7781", "invalid": "#8250df"}
ARM_COLORS = ["#0969da", "#bc4c00", "#8250df", "#1a7f37", "#cf222e", "#6e7781", "#bf3989", "#0a3069"]
DPI = 96
DRAWN = 1e300  # a finite value past this is drawn at it: matplotlib cannot lay out an axis up to 1.7e308


def _drawable(values: Any) -> np.ndarray:
    """Values as floats, each finite one held within +-DRAWN (a run folder's metric may be any finite number)."""
    a = np.asarray(values, dtype=float)
    return np.where(np.isfinite(a), np.clip(a, -DRAWN, DRAWN), a)


def _literal(draw):
    """Draw with mathtext off: metric and arm names come from the run folder and are drawn as written
    (`val_$\\sqrt{acc$` is a name, not a formula that fails to parse)."""
    import matplotlib

    @functools.wraps(draw)
    def literal(*args, **kwargs):
        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return literal


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


@_literal
def forest_png(decisions: list[dict[str, Any]], min_effect: float | None, metric: str) -> bytes:
    """Each arm's effect with its CI, 0 and min_effect marked."""
    rows = [d for d in decisions if d.get("effect") is not None]
    fig = Figure(figsize=(8, 0.6 * max(len(rows), 1) + 1.4))
    ax = fig.add_subplot()
    if not rows:
        why = "no decisions yet" if not decisions else "no effect to plot: no arm has a complete comparison"
        ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return _png(fig)
    for y, d in enumerate(reversed(rows)):
        color = DECISION_COLORS.get(str(d.get("decision")), "#24292f")
        effect = float(_drawable(d["effect"]))
        lo = float(_drawable(d["ci_low"])) if d.get("ci_low") is not None else effect
        hi = float(_drawable(d["ci_high"])) if d.get("ci_high") is not None else effect
        ax.plot([lo, hi], [y, y], color=color, lw=2.5, solid_capstyle="butt")
        ax.plot([effect], [y], "o", color=color, ms=8)
        ax.annotate(f"{d.get('decision')}", (hi, y), xytext=(6, 0), textcoords="offset points",
                    va="center", color=color, fontsize=9)
    ax.axvline(0, color="#57606a", lw=1)
    if min_effect is not None:
        ax.axvline(float(_drawable(min_effect)), color="#cf222e", lw=1.2, ls="--", label=f"min_effect = {min_effect:g}")
        ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_yticks(range(len(rows)), [str(d["arm"]) for d in reversed(rows)])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"effect on {metric} vs the baseline, positive = better (CI at the adjusted alpha)")
    ax.margins(x=0.25)
    ax.grid(axis="x", alpha=0.3)
    width = max(len(str(d["arm"])) for d in rows)
    fig.subplots_adjust(left=min(0.35, 0.06 + 0.011 * width), right=0.97, top=0.95,
                        bottom=0.8 / fig.get_figheight())  # fixed margins: tight_layout costs a second draw
    return _png(fig)


@_literal
def curves_png(curves: pd.DataFrame, arms: list[str], metric: str, unit: str, exposure: int | None = None,
               selected: dict[str, pd.DataFrame] | None = None) -> bytes:
    """Median per step with its spread, per arm; tuning and confirmation side by side.

    `selected` (arm -> step, value) draws each arm's selected tuning trial, dashed, on the tuning panel.
    """
    selected = selected or {}
    phases = [p for p in ("tune", "confirm", "reeval") if p in set(curves["phase"].astype(str))]
    titles = {"tune": "tuning: median, 25–75 % of trials", "confirm": "confirmation: median, min–max over seeds",
              "reeval": "re-evaluation: median, min–max"}
    n = max(len(phases), 1)
    fig = Figure(figsize=(5.2 * n, 3.6))
    axes = [fig.add_subplot(1, n, i + 1) for i in range(n)]
    if not phases:
        axes[0].text(0.5, 0.5, f"no reports of {metric} yet", ha="center", va="center", transform=axes[0].transAxes)
        axes[0].set_axis_off()
        return _png(fig)
    phase_col = curves["phase"].astype(str).to_numpy()
    arm_col = curves["arm"].astype(str).to_numpy()
    for ax, phase in zip(axes, phases, strict=False):
        for i, arm in enumerate(arms):
            sub = curves[(phase_col == phase) & (arm_col == arm)]
            if not len(sub):
                continue
            color = ARM_COLORS[i % len(ARM_COLORS)]
            x = sub["step"].to_numpy()
            lo, hi = ("q25", "q75") if phase == "tune" else ("min", "max")
            ax.fill_between(x, _drawable(sub[lo]), _drawable(sub[hi]), color=color, alpha=0.18, lw=0)
            ax.plot(x, _drawable(sub["median"]), color=color, lw=1.8, label=arm)
            if phase == "tune" and arm in selected:
                sel = selected[arm]
                ax.plot(sel["step"].to_numpy(), _drawable(sel["value"]), color=color, lw=1.1, ls="--")
        if phase == "tune" and selected:
            ax.plot([], [], color="#57606a", lw=1.1, ls="--", label="selected trial")
        if exposure is not None and float(curves["step"].to_numpy()[phase_col == phase].max()) > exposure:
            ax.axvline(exposure, color="#cf222e", lw=1, ls=":", label="budget")
        ax.set_title(titles[phase], fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(unit)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(metric)
    axes[0].legend(fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.4 / fig.get_figwidth() * 2, right=0.98, top=0.92, bottom=0.14, wspace=0.18)
    return _png(fig)


@_literal
def cost_png(cost: list[dict[str, Any]]) -> bytes:
    """Per arm: trial time (hours, by phase) and the median seconds per step, side by side, small."""
    arms = [str(c["arm"]) for c in cost]
    fig = Figure(figsize=(8, 0.35 * max(len(arms), 1) + 1.3))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    y = list(range(len(arms)))[::-1]
    phases = sorted({p for c in cost for p in c.get("phases") or {}}, key=lambda p: ("tune", "confirm", "reeval").index(p)
                    if p in ("tune", "confirm", "reeval") else 9)
    total = max((c.get("trial_seconds") or 0.0 for c in cost), default=0.0)
    unit, scale = ("s", 1.0) if total < 120 else ("min", 60.0) if total < 7200 else ("h", 3600.0)
    start = [0.0] * len(arms)
    for j, phase in enumerate(phases):
        widths = [((c.get("phases") or {}).get(phase) or {}).get("trial_seconds", 0.0) / scale for c in cost]
        left.barh(y, widths, left=start, color=ARM_COLORS[j % len(ARM_COLORS)], alpha=0.8, label=phase)
        start = [a + b for a, b in zip(start, widths, strict=True)]
    left.set_yticks(y, arms)
    left.set_xlabel(f"trial time ({unit})")
    left.legend(fontsize=7, frameon=False, loc="lower right")
    per_step = [c.get("median_s_per_step") or 0.0 for c in cost]
    right.barh(y, per_step, color="#57606a")
    right.set_yticks(y, [""] * len(arms))
    right.set_xlabel("median seconds per step")
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    width = max((len(a) for a in arms), default=4)
    fig.subplots_adjust(left=min(0.3, 0.05 + 0.011 * width), right=0.98, top=0.95, bottom=0.7 / fig.get_figheight(),
                        wspace=0.08)
    return _png(fig)
