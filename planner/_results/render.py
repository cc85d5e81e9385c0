"""A report in the format asked for: md and json from planner._results.report, html from .html."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner._results.report import render_json, render_markdown
from planner._store import read as rf

if TYPE_CHECKING:  # pragma: no cover
    from planner._results.tables import RunResults

FORMATS = ("md", "json", "html")


def load_for_report(run_dir: Any, fmt: str) -> RunResults:
    """The run, read with what `fmt` shows: curves of the tuning metric for html, no reports otherwise."""
    from planner._results.tables import load_run

    if fmt != "html":
        return load_run(run_dir, reports=False)
    metric = rf.contract_get(rf.open_run(run_dir).contract(), "metric.name")
    return load_run(run_dir, metrics=[metric] if metric else None)


def render(results: RunResults, fmt: str) -> str:
    """The report in `fmt` (md, json or html) as a string."""
    if fmt == "json":
        return render_json(results)
    if fmt == "md":
        return render_markdown(results)
    if fmt == "html":
        from planner._results.html import render_html

        return render_html(results)
    raise rf.UsageError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
