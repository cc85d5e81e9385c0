"""The report's plots of the search, drawn with plotly from `load_run`'s frames.

- `history_figure`: per arm, each tuning trial's final value in the order the trials started, and
  the best so far over the trials that ran to the end;
- `params_figure`: each tuned parameter against the metric, every arm on one axis (a log axis for a
  `log_uniform` dimension);
- `curves_figure`: every tuning trial's curve, one panel per arm, with the point where the scheduler
  stopped a trial (and where a trial failed) marked and the selected trial drawn bold;
- `seed_curves_figure`: every confirmation (or re-evaluation) seed's curve, the arms on one axis;
- `importance_figure`: the parameters' importance per arm (`planner._results.importance`).

A large run is drawn whole but lighter: the curves of one figure are one trace per arm (trials apart
by gaps), in WebGL past a few thousand points, and past MAX_CURVE_POINTS each trial keeps every k-th
report and its last; the figure says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner._core.status import UNUSABLE, TrialStatus
from planner._core.text import number
from planner._results.plots import (
    Figure,
    add_note,
    arm_color,
    drawable,
    grid_cell,
    grid_figure,
    label,
    new_figure,
    scatter,
    trace,
)

MAX_CURVE_POINTS = 120_000  # points of trial curves in one figure; past it each trial is thinned
HOVER_POINTS = 20_000  # curves with more points than this hover only at their marked points
STOPPED = str(TrialStatus.EARLY_STOPPED)
COMPLETED = str(TrialStatus.COMPLETED)


@dataclass(frozen=True)
class Dimension:
    """How a tuned parameter is drawn: its key, and whether its axis is logarithmic."""

    key: str
    log: bool


def _tuning(trials: pd.DataFrame) -> pd.DataFrame:
    return trials.loc[(trials["phase"] == "tune").to_numpy(dtype=bool, na_value=False)]


def _values(frame: pd.DataFrame, metric: str) -> np.ndarray:
    column = f"final.{metric}"
    return drawable(frame[column]) if column in frame.columns else np.full(len(frame), np.nan)


def trial_hover(frame: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """Per trial of `frame`: its id and tuned values, as plotly hover text."""
    ids = frame["trial_id"].astype(str).tolist()
    columns = [
        (f"{label(key)} = ", frame[f"param.{key}"].tolist())
        for key in keys
        if f"param.{key}" in frame
    ]
    out = []
    for i, tid in enumerate(ids):
        values = ", ".join(name + _shown(col[i]) for name, col in columns)
        out.append(label(tid) + (f"<br>{values}" if values else ""))
    return out


def _hover_of(frame: pd.DataFrame, hover: Mapping[str, str]) -> np.ndarray:
    """Each trial's hover text, from `hover` by its id (its id alone when not there)."""
    ids = frame["trial_id"].astype(str).tolist()
    return np.array([hover.get(t) or label(t) for t in ids], dtype=object)


def _shown(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return number(value) if isinstance(value, float) else label(value)


# ---------------------------------------------------------------- optimization history


def history_figure(
    trials: pd.DataFrame, arms: Sequence[str], metric: str, mode: str, hover: Mapping[str, str]
) -> Figure | None:
    """Per arm, each tuning trial's final `metric` by the order the trials started; the best so far
    over the trials that ran to the end (a trial stopped early shows the value at its last step)."""
    tune = _tuning(trials)
    if not len(tune):
        return None
    fig = new_figure(300)
    best_of = np.fmin.accumulate if mode == "min" else np.fmax.accumulate
    arm_col = tune["arm"].astype(str).to_numpy()
    for i, arm in enumerate(arms):
        sub = tune.loc[arm_col == arm].sort_values(["started", "index"], na_position="last")
        if not len(sub):
            continue
        y = _values(sub, metric)
        status = sub["status"].astype(str).to_numpy()
        x = np.arange(1, len(sub) + 1)
        text = _hover_of(sub, hover)
        color, name = arm_color(i), label(arm)
        done, stopped = status == COMPLETED, status == STOPPED
        for mask, what, symbol in (
            (done, "", "circle"),
            (stopped, ", stopped early", "circle-open"),
        ):
            if mask.any():
                fig.add_trace(
                    scatter(
                        int(mask.sum()),
                        x=x[mask],
                        y=y[mask],
                        mode="markers",
                        name=name + what,
                        legendgroup=name,
                        marker={"color": color, "symbol": symbol, "size": 6, "opacity": 0.75},
                        text=text[mask],
                        hovertemplate="%{text}<br>%{y:.4g}<extra></extra>",
                    )
                )
        best = best_of(np.where(done & np.isfinite(y), y, np.nan))
        fig.add_trace(
            scatter(
                len(x),
                x=x,
                y=best,
                mode="lines",
                line={"color": color, "width": 2, "shape": "hv"},
                name=f"{name}, best so far",
                legendgroup=name,
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(title_text="tuning trial of the arm, in the order they started")
    fig.update_yaxes(title_text=f"{label(metric)} (final value)")
    return fig


# ---------------------------------------------------------------- parameters against the metric


def params_figure(
    trials: pd.DataFrame,
    arms: Sequence[str],
    dims: Sequence[Dimension],
    metric: str,
    hover: Mapping[str, str],
) -> Figure | None:
    """Each tuned parameter against the trial's final `metric`, every arm on one axis."""
    tune = _tuning(trials)
    dims = [d for d in dims if f"param.{d.key}" in tune.columns]
    if not len(tune) or not dims:
        return None
    fig = grid_figure([label(d.key) for d in dims], shared_y=True, height_per_row=280)
    arm_col = tune["arm"].astype(str).to_numpy()
    for i, arm in enumerate(arms):
        sub = tune.loc[arm_col == arm]
        if not len(sub):
            continue
        y = _values(sub, metric)
        status = sub["status"].astype(str).to_numpy()
        text = _hover_of(sub, hover)
        for j, dim in enumerate(dims):
            column = sub[f"param.{dim.key}"]
            x = drawable(column) if pd.api.types.is_float_dtype(column) else column.astype(object)
            for mask, what, symbol in (
                (status == COMPLETED, "", "circle"),
                (status == STOPPED, ", stopped early", "circle-open"),
            ):
                fig.add_trace(
                    scatter(
                        int(mask.sum()),
                        x=np.asarray(x)[mask],
                        y=y[mask],
                        mode="markers",
                        name=label(arm) + what,
                        legendgroup=label(arm) + what,
                        showlegend=j == 0 and bool(mask.any()),
                        marker={"color": arm_color(i), "symbol": symbol, "size": 6, "opacity": 0.7},
                        text=text[mask],
                        hovertemplate="%{text}<br>%{y:.4g}<extra></extra>",
                    ),
                    **grid_cell(j, len(dims)),
                )
    for j, dim in enumerate(dims):
        if dim.log:
            cell = grid_cell(j, len(dims))
            fig.update_xaxes({"type": "log"}, row=cell["row"], col=cell["col"])
    fig.update_yaxes(title_text=f"{label(metric)} (final value)", col=1)
    return fig


# ---------------------------------------------------------------- curves


@dataclass(frozen=True)
class Curves:
    """One phase's reports of one metric, as arrays in the reports' order (each trial's in step
    order)."""

    arm: np.ndarray  # codes into `arms`
    trial: np.ndarray  # codes into `trial_ids`
    step: np.ndarray
    value: np.ndarray
    seed: np.ndarray
    arms: list[str]
    trial_ids: list[str]

    @staticmethod
    def of(reports: pd.DataFrame, metric: str, phase: str) -> Curves | None:
        r = reports
        if not len(r) or metric not in r["metric"].cat.categories:
            return None
        if phase not in r["phase"].cat.categories:
            return None
        keep = (r["metric"].cat.codes.to_numpy() == r["metric"].cat.categories.get_loc(metric)) & (
            r["phase"].cat.codes.to_numpy() == r["phase"].cat.categories.get_loc(phase)
        )
        if not keep.any():
            return None
        return Curves(
            arm=r["arm"].cat.codes.to_numpy()[keep],
            trial=r["trial_id"].cat.codes.to_numpy()[keep],
            step=r["step"].to_numpy()[keep],
            value=drawable(r["value"].to_numpy()[keep]),
            seed=r["seed"].to_numpy(dtype=float, na_value=np.nan)[keep],
            arms=[str(a) for a in r["arm"].cat.categories],
            trial_ids=[str(t) for t in r["trial_id"].cat.categories],
        )

    def starts(self, rows: np.ndarray) -> np.ndarray:
        """Where a trial's curve starts among `rows` (a new trial, or its steps start over)."""
        t, s = self.trial[rows], self.step[rows]
        return np.r_[True, (t[1:] != t[:-1]) | (s[1:] <= s[:-1])] if rows.size else rows


@dataclass(frozen=True)
class Lines:
    """A set of curves as one trace: x and y with a gap (NaN) between two curves."""

    x: np.ndarray
    y: np.ndarray
    rows: np.ndarray  # the report rows drawn, in order
    starts: np.ndarray  # per drawn row: the first of its curve


def lines(curves: Curves, rows: np.ndarray, every: int) -> Lines:
    """The curves of `rows` as one trace, each curve keeping every `every`-th point and its last."""
    starts = curves.starts(rows)
    if every > 1 and rows.size:
        first = np.flatnonzero(starts)
        position = np.arange(rows.size) - first[np.cumsum(starts) - 1]
        last = np.r_[starts[1:], True]
        kept = (position % every == 0) | last
        rows, starts = rows[kept], starts[kept]
    gaps = np.flatnonzero(starts)[1:]
    x = np.insert(curves.step[rows].astype(float), gaps, np.nan)
    y = np.insert(curves.value[rows], gaps, np.nan)
    return Lines(x, y, rows, starts)


def thinning(n_points: int) -> tuple[int, str | None]:
    """(every k-th report kept, the sentence that says so) for `n_points` in one figure."""
    if n_points <= MAX_CURVE_POINTS:
        return 1, None
    every = math.ceil(n_points / MAX_CURVE_POINTS)
    return every, (
        f"{n_points:,} reports: each curve is drawn through every {every}th report and its last"
    )


@dataclass(frozen=True)
class Marks:
    """Trials whose end is marked on their curve."""

    status: Mapping[str, str]  # trial id -> status
    hover: Mapping[str, str]  # trial id -> hover text (its id and tuned values)
    selected: Mapping[str, str]  # arm -> the trial selected for confirmation


def curves_figure(
    reports: pd.DataFrame,
    arms: Sequence[str],
    metric: str,
    unit: str,
    exposure: int | None,
    marks: Marks,
) -> Figure | None:
    """Every tuning trial's curve of `metric`, a panel per arm (one y axis); where the scheduler
    stopped a trial (x), where a trial failed (triangle), the selected trial bold."""
    curves = Curves.of(reports, metric, "tune")
    if curves is None:
        return None
    shown = [a for a in arms if a in curves.arms]
    fig = grid_figure([label(a) for a in shown], shared_y=True, height_per_row=300)
    every, note = thinning(curves.step.size)
    hover_lines = curves.step.size // every <= HOVER_POINTS
    ids = np.array([label(t) for t in curves.trial_ids], dtype=object) if hover_lines else None
    for j, arm in enumerate(shown):
        rows = np.flatnonzero(curves.arm == curves.arms.index(arm))
        at = grid_cell(j, len(shown))
        drawn = lines(curves, rows, every)
        color = arm_color(list(arms).index(arm))
        fig.add_trace(
            scatter(
                drawn.x.size,
                x=drawn.x,
                y=drawn.y,
                mode="lines",
                name=f"{label(arm)}: tuning trials",
                line={"color": color, "width": 1},
                opacity=0.45 if drawn.starts.sum() > 30 else 0.7,
                showlegend=False,
                text=np.insert(ids[curves.trial[drawn.rows]], np.flatnonzero(drawn.starts)[1:], "")
                if ids is not None
                else None,
                hovertemplate="%{text}<br>%{x}: %{y:.4g}<extra></extra>"
                if ids is not None
                else None,
                hoverinfo=None if ids is not None else "skip",
            ),
            **at,
        )
        _mark_ends(fig, curves, drawn, marks, at, first=j == 0)
        _selected(fig, curves, rows, marks.selected.get(arm), color, at, first=j == 0)
    if exposure is not None and curves.step.size and curves.step.max() > exposure:
        fig.add_vline(x=exposure, line={"color": "#cf222e", "dash": "dot", "width": 1})
    fig.update_xaxes(title_text=label(unit))
    fig.update_yaxes(title_text=label(metric), col=1)
    if note:
        add_note(fig, note)
    return fig


def _mark_ends(
    fig: Figure, curves: Curves, drawn: Lines, marks: Marks, at: dict[str, int], *, first: bool
) -> None:
    """The last report of each trial the scheduler stopped (x) and each that failed (triangle)."""
    last = drawn.rows[np.r_[drawn.starts[1:], True]] if drawn.rows.size else drawn.rows
    tids = [curves.trial_ids[t] for t in curves.trial[last]]
    status = np.array([marks.status.get(t, "") for t in tids], dtype=object)
    for wanted, name, symbol, color in (
        ({STOPPED}, "stopped by the scheduler", "x", "#24292f"),
        ({str(s) for s in UNUSABLE}, "failed", "triangle-up", "#cf222e"),
    ):
        mask = np.isin(status, list(wanted))
        if not mask.any():
            continue
        fig.add_trace(
            scatter(
                int(mask.sum()),
                x=curves.step[last][mask],
                y=curves.value[last][mask],
                mode="markers",
                name=name,
                legendgroup=name,
                showlegend=first,
                marker={"symbol": symbol, "color": color, "size": 7},
                text=[
                    marks.hover.get(t, label(t)) + f"<br>{label(s)}"
                    for t, s, m in zip(tids, status, mask, strict=True)
                    if m
                ],
                hovertemplate="%{text}<br>at %{x}: %{y:.4g}<extra></extra>",
            ),
            **at,
        )


def _selected(
    fig: Figure,
    curves: Curves,
    rows: np.ndarray,
    trial_id: str | None,
    color: str,
    at: dict[str, int],
    *,
    first: bool,
) -> None:
    """The arm's trial selected for confirmation, drawn bold over the others."""
    if trial_id is None or trial_id not in curves.trial_ids:
        return
    own = rows[curves.trial[rows] == curves.trial_ids.index(trial_id)]
    if not own.size:
        return
    fig.add_trace(
        trace(
            "scatter",
            x=curves.step[own],
            y=curves.value[own],
            mode="lines",
            name="selected for confirmation",
            legendgroup="selected",
            showlegend=first,
            line={"color": color, "width": 3},
            text=[label(trial_id)] * own.size,
            hovertemplate="%{text} (selected)<br>%{x}: %{y:.4g}<extra></extra>",
        ),
        **at,
    )


def seed_curves_figure(
    reports: pd.DataFrame, arms: Sequence[str], metric: str, unit: str, phase: str = "confirm"
) -> Figure | None:
    """Every seed's curve of `metric` in `phase` (confirm, reeval), the arms on one axis."""
    curves = Curves.of(reports, metric, phase)
    if curves is None:
        return None
    fig = new_figure(280)
    every, note = thinning(curves.step.size)
    for i, arm in enumerate(arms):
        if arm not in curves.arms:
            continue
        rows = np.flatnonzero(curves.arm == curves.arms.index(arm))
        drawn = lines(curves, rows, every)
        seeds = [
            "" if math.isnan(s) else f"{label(arm)}, seed {int(s)}" for s in curves.seed[drawn.rows]
        ]
        fig.add_trace(
            scatter(
                drawn.x.size,
                x=drawn.x,
                y=drawn.y,
                mode="lines",
                name=label(arm),
                line={"color": arm_color(i), "width": 1.5},
                opacity=0.8,
                text=np.insert(np.array(seeds, dtype=object), np.flatnonzero(drawn.starts)[1:], ""),
                hovertemplate="%{text}<br>%{x}: %{y:.4g}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text=label(unit))
    fig.update_yaxes(title_text=label(metric))
    if note:
        add_note(fig, note)
    return fig


# ---------------------------------------------------------------- importance


def importance_figure(
    importances: Mapping[str, Mapping[str, float]], arms: Sequence[str]
) -> Figure:
    """Per arm, each parameter's share of the importance (bars; the arms side by side)."""
    keys = list(dict.fromkeys(k for values in importances.values() for k in values))
    fig = new_figure(30 + 26 * len(keys) * max(1, len(importances)), barmode="group")
    for arm, values in importances.items():
        i = list(arms).index(arm) if arm in arms else len(arms)
        fig.add_trace(
            trace(
                "bar",
                x=[values.get(k, 0.0) for k in keys],
                y=[label(k) for k in keys],
                orientation="h",
                name=label(arm),
                marker={"color": arm_color(i)},
                text=[label(arm)] * len(keys),
                textposition="none",
                hovertemplate="%{text}, %{y}: %{x:.2f}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="importance (share of the arm's total)", range=[0, 1])
    fig.update_yaxes(type="category", autorange="reversed")
    return fig
