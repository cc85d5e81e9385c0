"""The HTML report: one page a reviewer reads offline, from jinja2 templates with plotly's plots.

The page is `templates/report.html.j2` and the templates it includes, rendered with autoescape on:
every value from the run folder reaches the page escaped. The plots are plotly figures
(`planner._results.plots`, `planner._results.search_plots`), each a `<div>` with the call that draws
it; plotly.js is in the page once, so the file needs no network. What the page shows comes from
`load_run`'s `RunResults` and the report's summary (`planner._results.report.summarize`): it opens
no file of the run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from planner._contract.paths import shown_side
from planner._lineage.record import lineage_lines
from planner._plan.space import frozen_space
from planner._results import plots
from planner._results import report as rp
from planner._results import search_plots as sp
from planner._results.headline import verdicts
from planner._results.importance import Importance, arm_importance
from planner._results.report import SOURCES, _fmt
from planner._store import facts

if TYPE_CHECKING:  # pragma: no cover
    from planner._results.tables import RunResults

VIOLATION_LABELS = {
    "heldout_in_tuning": "held-out metric in tuning (test exposure)",
    "report_past_budget": "report past the budget",
}


@dataclass(frozen=True)
class Figures:
    """The page's plots, each as its `<div>` (None: nothing to draw, the page says why)."""

    forest: Markup | None = None
    seed_differences: Markup | None = None
    history: Markup | None = None
    params: Markup | None = None
    curves: Markup | None = None
    importance: Markup | None = None
    confirm_curves: Markup | None = None
    reeval_curves: Markup | None = None
    cost: Markup | None = None


@functools.cache
def environment() -> jinja2.Environment:
    """The templates next to this module, autoescaped; an undefined name is an error."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("planner._results", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _fmt
    env.filters["signed"] = _signed
    return env


def _signed(value: Any) -> str:
    text = _fmt(value)
    return "+" + text if isinstance(value, int | float) and value > 0 else text


def render_html(results: RunResults) -> str:
    s = rp.summarize(results)
    importance = _importance(results)
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            s=s,
            verdicts=verdicts(s, results),
            figures=_figures(s, results, importance),
            importance=importance,
            plotly_js=plots.plotly_js(),
            diffs={
                a["arm"]: [
                    {
                        "path": d["path"],
                        "baseline": shown_side(d, "baseline"),
                        "arm": shown_side(d, "arm"),
                    }
                    for d in a["config_diff"]
                ]
                for a in s["arms"]
            },
            budget_lines=rp.budget_lines(s["budget"]),
            data_lines=[line.lstrip("- ").strip() for line in rp.data_lines(s)],
            lineage_lines=lineage_lines(s["lineage"]) if s.get("lineage") else [],
            cost_table=rp.cost_table(s["cost"]) if any(c["trials"] for c in s["cost"]) else None,
            cost_note=rp.COST_NOTE,
            unretried_failures=sum(1 for f in s["failures"] if not f["retried"]),
            unit=str(s["budget"].get("unit") or "step"),
            max_rows=rp.MAX_ROWS,
            sources=SOURCES,
            violation_labels=VIOLATION_LABELS,
        )
    )


def _importance(results: RunResults) -> list[Importance]:
    """Per arm that tuned, its parameters' importance (or why there is none)."""
    t = results.trials
    metric = results.metric
    if not len(t) or metric is None:
        return []
    tune = t.loc[(t["phase"] == "tune").to_numpy(dtype=bool, na_value=False)]
    mode = str(facts.contract_get(results.contract, "metric.mode", "max"))
    tuned = set(tune["arm"].astype(str))
    return [
        arm_importance(tune, arm, frozen_space(results.contract, arm), metric, mode)
        for arm in results.arms
        if arm in tuned
    ]


def _figures(s: dict[str, Any], results: RunResults, importance: list[Importance]) -> Figures:
    """Every plot of the page, drawn from the summary and the frames."""
    arms, metric = results.arms, str(results.metric)
    mode = str(s["metrics"]["mode"] or "max")
    unit = str(s["budget"].get("unit") or "step")
    dims = _dimensions(results)
    selection = (results.selection or {}).get("arms") or {}
    hover = _tuning_hover(results, [d.key for d in dims])
    marks = sp.Marks(
        status=_statuses(results),
        hover=hover,
        selected={
            str(arm): str(sel["trial_id"])
            for arm, sel in selection.items()
            if isinstance(sel, dict) and sel.get("trial_id")
        },
    )
    ranked = {i.arm: i.values for i in importance if i.values}
    drawn = {
        "forest": plots.forest_figure(
            s["decisions"], s["acceptance"]["min_effect"], str(s["metrics"]["decision"])
        )
        if s["decisions"]
        else None,
        "seed_differences": plots.seed_differences_figure(
            s["per_seed"],
            s["baseline"],
            str(s["metrics"]["decision_mode"]),
            s["acceptance"]["min_effect"],
        )
        if s["decisions"]
        else None,
        "history": sp.history_figure(results.trials, arms, metric, mode, hover)
        if len(results.trials)
        else None,
        "params": sp.params_figure(results.trials, arms, dims, metric, hover)
        if len(results.trials)
        else None,
        "curves": sp.curves_figure(
            results.reports,
            arms,
            metric,
            unit,
            facts.contract_get(results.contract, "budget.exposure"),
            marks,
        ),
        "importance": sp.importance_figure(ranked, arms) if ranked else None,
        "confirm_curves": sp.seed_curves_figure(results.reports, arms, metric, unit),
        "reeval_curves": sp.seed_curves_figure(results.reports, arms, metric, unit, "reeval"),
        "cost": plots.cost_figure(s["cost"]) if any(c["trials"] for c in s["cost"]) else None,
    }
    return Figures(
        **{
            name: plots.figure_html(fig, f"plot-{name.replace('_', '-')}")
            for name, fig in drawn.items()
            if fig is not None
        }
    )


def _dimensions(results: RunResults) -> list[sp.Dimension]:
    """The tuned parameters, in the contract's order, each on a log axis when any arm searched it
    so."""
    kinds: dict[str, bool] = {}
    for arm in results.arms:
        for key, dim in frozen_space(results.contract, arm).items():
            kinds[key] = kinds.get(key, False) or dim.kind == "log_uniform"
    return [sp.Dimension(key, log) for key, log in kinds.items()]


def _tuning_hover(results: RunResults, keys: list[str]) -> dict[str, str]:
    """Each tuning trial's hover text (its id and tuned values) by its id, for every plot."""
    t = results.trials
    if not len(t):
        return {}
    tune = t.loc[(t["phase"] == "tune").to_numpy(dtype=bool, na_value=False)]
    return dict(zip(tune["trial_id"].astype(str), sp.trial_hover(tune, keys), strict=True))


def _statuses(results: RunResults) -> dict[str, str]:
    """Each trial's status by its id (a trial logged twice: its last record's)."""
    t = results.trials
    return dict(zip(t["trial_id"].astype(str), t["status"].astype(str), strict=True))
