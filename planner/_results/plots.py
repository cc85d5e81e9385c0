"""The report's plots of the decision and the cost, drawn with plotly; what they share with the
search's.

Each function returns a `Figure`: plotly's figure as plain data (traces and a layout, as plotly.js
reads them), which `figure_html` writes into the page with `plotly.io.to_html` as a `<div>` and the
call that draws it, unvalidated: plotly's `graph_objects` check every property as it is set, at
several times the cost of the whole drawing here. The page carries plotly.js once (`plotly_js`), so
the report stays one file that opens offline. Names of arms and metrics come from a run folder: in
a figure they are data, written by plotly's JSON encoder (which writes `<`, `>` and `/` as escapes,
so no text ends the page's script), and shown as written (`label`: plotly reads a few HTML tags and
entities in its text; escaped, a name stays text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.io
import plotly.offline
from markupsafe import Markup, escape

from planner._results.report import _fmt

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
GREY = "#57606a"
FONT = "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
# a finite value past this is drawn at it: plotly's autorange adds margins, and a span near 1.7e308
# overflows to infinity in the browser (a blank plot)
DRAWN = 1e300
# a trace with more points than this is drawn with WebGL (Scattergl): SVG slows past a few thousand
GL_POINTS = 5000
# no button bar over the plots (it covers titles and legends): drag to zoom, double-click to reset
CONFIG = {"displaylogo": False, "responsive": True, "displayModeBar": False}
AXIS = {
    "showgrid": True,
    "gridcolor": "#eaeef2",
    "zeroline": False,
    "showline": True,
    "linecolor": "#d0d7de",
    "ticks": "outside",
    "tickcolor": "#d0d7de",
    "automargin": True,
}
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
PHASE_ORDER = ("tune", "confirm", "reeval")


def merge(into: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """`patch` set into `into`, a nested mapping merged key by key (as plotly's `update` does)."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


def trace(kind: str, **props: Any) -> dict[str, Any]:
    """A plotly trace of type `kind` (scatter, bar, box...); a property set to None is left out."""
    return {"type": kind, **{k: v for k, v in props.items() if v is not None}}


@dataclass
class Figure:
    """A plotly figure as data: its traces and its layout, and the grid of its subplots (each cell's
    axes, by (row, column), from 1)."""

    data: list[dict[str, Any]] = field(default_factory=list)
    layout: dict[str, Any] = field(default_factory=dict)
    cells: dict[tuple[int, int], str] = field(default_factory=dict)  # -> axis suffix: "", "2"...

    def add_trace(
        self, trace_: dict[str, Any], row: int | None = None, col: int | None = None
    ) -> None:
        if row is not None and col is not None and self.cells[(row, col)]:
            suffix = self.cells[(row, col)]
            trace_ = {**trace_, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        self.data.append(trace_)

    def update_layout(self, **props: Any) -> None:
        merge(self.layout, {k: v for k, v in props.items() if v is not None})

    def axes(self, letter: str, row: int | None = None, col: int | None = None) -> list[str]:
        """The layout keys of the `letter` (x, y) axes in `row` and `col` (every one when None)."""
        return [
            f"{letter}axis{suffix}"
            for (r, c), suffix in (self.cells or {(1, 1): ""}).items()
            if row in (None, r) and col in (None, c)
        ]

    def update_xaxes(
        self,
        patch: Mapping[str, Any] | None = None,
        *,
        row: int | None = None,
        col: int | None = None,
        **props: Any,
    ) -> None:
        self._update_axes("x", {**(patch or {}), **props}, row, col)

    def update_yaxes(
        self,
        patch: Mapping[str, Any] | None = None,
        *,
        row: int | None = None,
        col: int | None = None,
        **props: Any,
    ) -> None:
        self._update_axes("y", {**(patch or {}), **props}, row, col)

    def _update_axes(
        self, letter: str, props: dict[str, Any], row: int | None, col: int | None
    ) -> None:
        """`props` set on the axes in `row` and `col` (`title_text`: the axis title's text)."""
        if "title_text" in props:
            props["title"] = {"text": props.pop("title_text")}
        for key in self.axes(letter, row, col):
            merge(self.layout.setdefault(key, {}), props)

    def add_vline(self, x: float, line: Mapping[str, Any], annotation: str | None = None) -> None:
        """A vertical line at `x` across every subplot, with `annotation` over its top."""
        for suffix in (self.cells or {(1, 1): ""}).values():
            ref = {"xref": f"x{suffix}", "yref": f"y{suffix} domain"}
            shape = {"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": dict(line)}
            self.layout.setdefault("shapes", []).append({**shape, **ref})
            if annotation is not None:
                note = {"x": x, "y": 1, "text": annotation, "showarrow": False}
                self.add_annotation(**note, yanchor="bottom", **ref)

    def add_annotation(self, **props: Any) -> None:
        self.layout.setdefault("annotations", []).append(props)


def label(value: Any) -> str:
    """A name from a run folder as plotly text, shown as written: escaped, so that plotly reads no
    tag or entity in it; a control character or lone surrogate (a damaged file) becomes U+FFFD,
    which JSON and the page can hold."""
    return str(escape(_NOT_TEXT.sub("\ufffd", str(value))))


def arm_color(index: int) -> str:
    return ARM_COLORS[index % len(ARM_COLORS)]


def drawable(values: Any) -> np.ndarray:
    """Values as floats, each finite one held within +-DRAWN; NaN and infinities stay (plotly leaves
    a gap where JSON writes them as null)."""
    a = np.asarray(values, dtype=float)
    return np.where(np.isfinite(a), np.clip(a, -DRAWN, DRAWN), a)


def scatter(n_points: int, **kwargs: Any) -> dict[str, Any]:
    """A scatter trace, drawn with WebGL when it holds many points."""
    return trace("scattergl" if n_points > GL_POINTS else "scatter", **kwargs)


def new_figure(
    height: int, *, title: str | None = None, legend: bool = True, **layout: Any
) -> Figure:
    """An empty figure in the report's style, its plot `height` px high (margins apart)."""
    fig = Figure()
    style_figure(fig, height, title=title, legend=legend, **layout)
    return fig


def style_figure(
    fig: Figure, height: int, *, title: str | None = None, legend: bool = True, **layout: Any
) -> None:
    """The report's style on `fig`, whose plot is `height` px high; room for a legend below it."""
    top, bottom = 50 if title else 30, 110 if legend else 60
    # no plotly template: the few settings the report wants are set here
    fig.update_layout(
        paper_bgcolor="white",
        plot_bgcolor="white",
        height=height + top + bottom,
        font={"family": FONT, "size": 12, "color": "#1f2328"},
        margin={"l": 60, "r": 20, "t": top, "b": bottom},
        showlegend=legend,
        title={"text": title, "font": {"size": 14}, "x": 0, "xanchor": "left"} if title else None,
        # below the plot: above it, a legend meets the subplots' titles and plotly's buttons
        legend={
            "orientation": "h",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "x": 0,
            "xanchor": "left",
            "traceorder": "normal",
        },
        hoverlabel={"namelength": -1},
        **layout,
    )
    fig.update_xaxes(AXIS)
    fig.update_yaxes(AXIS)


def add_note(fig: Figure, note: str) -> None:
    """A sentence above the plot, in grey (how it was drawn: thinned, or what it leaves out)."""
    fig.update_layout(
        title={"text": label(note), "font": {"size": 11, "color": GREY}, "x": 0, "xanchor": "left"},
        height=fig.layout["height"] + 30,
        margin={"t": fig.layout["margin"]["t"] + 30},
    )


def note_figure(text: str, height: int = 40) -> Figure:
    """A figure that holds only a sentence (nothing to draw yet)."""
    fig = new_figure(height, legend=False)
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes({"visible": False})
    fig.update_yaxes({"visible": False})
    return fig


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) of `n` subplots: at most three a row (four as two by two)."""
    n = max(n, 1)
    cols = 2 if n == 4 else min(n, 3)
    return -(-n // cols), cols


def grid_cell(index: int, n: int) -> dict[str, int]:
    """The row and column of the index-th of `n` subplots of a `grid_figure`."""
    cols = grid_shape(n)[1]
    return {"row": index // cols + 1, "col": index % cols + 1}


def grid_figure(
    titles: Sequence[str | None],
    *,
    shared_y: bool,
    height_per_row: int,
    legend: bool = True,
    shape: tuple[int, int] | None = None,
    spacing: float | None = None,
) -> Figure:
    """Subplots, one per title (already labels; None: no title), laid out by `grid_shape` (or
    `shape`), as plotly's `make_subplots` lays them: axes numbered row by row from the top left,
    each row's y axes one when `shared_y` (tick labels on its first column only)."""
    rows, cols = shape or grid_shape(len(titles))
    h = (0.06 if shared_y else 0.09) if spacing is None else spacing
    v = min(0.3, 0.45 / rows)
    width, height = (1 - (cols - 1) * h) / cols, (1 - (rows - 1) * v) / rows
    fig = Figure()
    for i, title in enumerate(titles):
        row, col = divmod(i, cols)
        suffix = "" if i == 0 else str(i + 1)
        fig.cells[(row + 1, col + 1)] = suffix
        x0, y1 = col * (width + h), 1 - row * (height + v)
        x, y = [x0, min(x0 + width, 1.0)], [max(y1 - height, 0.0), y1]
        yaxis: dict[str, Any] = {"domain": y, "anchor": f"x{suffix}"}
        if shared_y and col:
            yaxis |= {"matches": f"y{'' if row == 0 else row * cols + 1}", "showticklabels": False}
        fig.layout[f"xaxis{suffix}"] = {"domain": x, "anchor": f"y{suffix}"}
        fig.layout[f"yaxis{suffix}"] = yaxis
        if title is not None:
            fig.add_annotation(
                text=title, x=(x[0] + x[1]) / 2, y=y[1], xref="paper", yref="paper",
                xanchor="center", yanchor="bottom", showarrow=False, font={"size": 16},
            )  # fmt: skip
    style_figure(fig, height_per_row * rows, legend=legend)
    return fig


def figure_html(fig: Figure, div_id: str) -> Markup:
    """The figure as a `<div>` and the script that draws it; plotly.js itself comes once
    (`plotly_js`)."""
    return Markup(
        plotly.io.to_html(
            {"data": fig.data, "layout": fig.layout},
            validate=False,
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config=CONFIG,
            default_width="100%",
        )
    )


def plotly_js() -> Markup:
    """plotly.js, to go into the page once, in a <script> (it holds no `</script`)."""
    return Markup(plotly.offline.get_plotlyjs())


# ---------------------------------------------------------------- the decision


def forest_figure(
    decisions: Sequence[Mapping[str, Any]], min_effect: float | None, metric: str
) -> Figure:
    """Each arm's effect with its CI, 0 and min_effect marked; plotly's axis (its tick labels are
    the values at the ticks)."""
    rows = [d for d in decisions if d.get("effect") is not None]
    if not rows:
        why = "no decisions yet" if not decisions else "no arm has a complete comparison yet"
        return note_figure(f"No effect to plot: {why}.")
    fig = new_figure(40 + 44 * len(rows))
    shown: set[str] = set()
    for d in reversed(rows):
        decision = str(d.get("decision") or "not decided")
        effect = float(drawable(d["effect"]))
        low, high = (d.get(k) for k in ("ci_low", "ci_high"))
        lo = float(drawable(low)) if low is not None else None
        hi = float(drawable(high)) if high is not None else None
        ci = f"[{_fmt(low)}, {_fmt(high)}]" if lo is not None and hi is not None else "unbounded"
        fig.add_trace(
            trace(
                "scatter",
                x=[effect],
                y=[label(d["arm"])],
                mode="markers",
                name=label(decision),
                legendgroup=decision,
                showlegend=decision not in shown,
                marker={"color": DECISION_COLORS.get(decision, "#24292f"), "size": 11},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [max(hi - effect, 0.0) if hi is not None else 0.0],
                    "arrayminus": [max(effect - lo, 0.0) if lo is not None else 0.0],
                    "thickness": 2.5,
                    "width": 6,
                },
                text=[f"{label(d['arm'])}: {label(decision)}, CI {ci}"],
                hovertemplate="%{text}<br>effect %{x:.4g}<extra></extra>",
            )
        )
        shown.add(decision)
    fig.add_vline(x=0, line={"color": GREY, "width": 1})
    if min_effect is not None:
        fig.add_vline(
            x=float(drawable(min_effect)),
            line={"color": "#cf222e", "width": 1.2, "dash": "dash"},
            annotation=f"min_effect = {min_effect:g}",
        )
    fig.update_xaxes(
        title_text=f"effect on {label(metric)} vs the baseline, positive = better "
        "(CI at the adjusted alpha)",
        zeroline=False,
    )
    fig.update_yaxes(type="category")
    return fig


def seed_differences_figure(
    per_seed: Mapping[str, Any],
    baseline: str | None,
    mode: str,
    min_effect: float | None,
) -> Figure:
    """The paired design seed by seed: per treatment arm, its value less the baseline's on each seed
    both ran (turned so that positive = better, as the effect), with the mean and spread as a box.
    """
    metric = str(per_seed.get("metric"))
    sign = -1.0 if mode == "min" else 1.0
    arms = [a for a in per_seed.get("arms") or [] if a != baseline]
    fig = new_figure(40 + 56 * max(len(arms), 1), legend=False)
    drawn = 0
    for i, arm in enumerate(arms):
        seeds, diffs = [], []
        for row in per_seed.get("rows") or []:
            base, other = (_counted(row["values"].get(a)) for a in (baseline, arm))
            if base is not None and other is not None:
                seeds.append(row["seed"])
                diffs.append(sign * (other - base))
        if not diffs:
            continue
        drawn += 1
        fig.add_trace(
            trace(
                "box",
                x=drawable(diffs),
                y=[label(arm)] * len(diffs),
                orientation="h",
                name=label(arm),
                boxpoints="all",
                jitter=0.35,
                pointpos=0,
                boxmean=True,
                marker={"color": arm_color(i + 1), "size": 8},
                line={"color": arm_color(i + 1)},
                fillcolor="rgba(0,0,0,0)",
                text=[f"{label(arm)}, seed {s}" for s in seeds],
                hovertemplate="%{text}: %{x:.4g}<extra></extra>",
                showlegend=False,
            )
        )
    if not drawn:
        return note_figure("No seed has a confirmation value in both an arm and the baseline yet.")
    fig.add_vline(x=0, line={"color": GREY, "width": 1})
    if min_effect is not None:
        fig.add_vline(
            x=float(drawable(min_effect)), line={"color": "#cf222e", "width": 1.2, "dash": "dash"}
        )
    turned = "baseline − arm" if sign < 0 else "arm − baseline"
    fig.update_xaxes(
        title_text=f"{label(metric)}: {turned} on the same seed, positive = better", zeroline=False
    )
    fig.update_yaxes(type="category")
    return fig


def _counted(cell_: Mapping[str, Any] | None) -> float | None:
    """A confirmation cell's value as the decision counts it (completed, or a diverged seed at
    `failures.diverged_value`), else None."""
    if not cell_ or cell_.get("value") is None:
        return None
    if cell_.get("status") == "completed" or cell_.get("counted_as"):
        return float(cell_["value"])
    return None


# ---------------------------------------------------------------- the cost


def cost_figure(cost: Sequence[Mapping[str, Any]]) -> Figure:
    """Per arm: trial time split by phase, and the median seconds per step, side by side."""
    arms = [label(c["arm"]) for c in cost]
    total = max((c.get("trial_seconds") or 0.0 for c in cost), default=0.0)
    unit, scale = ("s", 1.0) if total < 120 else ("min", 60.0) if total < 7200 else ("h", 3600.0)
    fig = grid_figure(
        [None, None], shared_y=True, height_per_row=30 + 34 * len(arms), shape=(1, 2), spacing=0.04
    )
    fig.update_layout(barmode="stack")
    phases = sorted(
        {p for c in cost for p in c.get("phases") or {}},
        key=lambda p: (PHASE_ORDER.index(p) if p in PHASE_ORDER else 9, p),
    )
    for j, phase in enumerate(phases):
        seconds = [((c.get("phases") or {}).get(phase) or {}).get("trial_seconds") for c in cost]
        fig.add_trace(
            trace(
                "bar",
                x=drawable([(s or 0.0) / scale for s in seconds]),
                y=arms,
                orientation="h",
                name=label(phase),
                marker={"color": arm_color(j), "opacity": 0.85},
                text=[label(phase)] * len(arms),
                textposition="none",
                hovertemplate=f"%{{y}}, %{{text}}: %{{x:.3g}} {unit}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        trace(
            "bar",
            x=drawable([c.get("median_s_per_step") for c in cost]),
            y=arms,
            orientation="h",
            name="median s / step",
            marker={"color": GREY},
            showlegend=False,
            hovertemplate="%{x:.3g} s per step<extra>%{y}</extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text=f"trial time ({unit})", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="median seconds per step", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig
