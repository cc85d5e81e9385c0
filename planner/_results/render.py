"""A report in the format asked for: md and json from planner._results.report, html from .html."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from planner._core.lazy import lazy_import
from planner._results.report import render_json, render_markdown
from planner._results.tables import RunResults, load_run
from planner._store import facts
from planner._store import read as rf
from planner._store.files import write_atomic

html = lazy_import("planner._results.html")  # only an html report draws plots

FORMATS = ("md", "json", "html")
HTML_MARK = (
    '<meta name="generator" content="planner report">'  # what marks an html file as a report
)


def load_for_report(run_dir: Any, fmt: str) -> RunResults:
    """The run, read with what `fmt` shows: curves of the tuning metric for html, no reports
    otherwise."""
    if fmt != "html":
        return load_run(run_dir, reports=False)
    metric = facts.contract_get(rf.open_run(run_dir).contract(), "metric.name")
    return load_run(run_dir, metrics=[metric] if metric else None)


def render(results: RunResults, fmt: str) -> str:
    """The report in `fmt` (md, json or html) as a string."""
    if fmt == "json":
        return render_json(results)
    if fmt == "md":
        return render_markdown(results)
    if fmt == "html":
        return html.render_html(results)
    raise rf.UsageError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")


def is_report(path: Path) -> bool:
    """True when `path` is a report `plan report` wrote (md, json or html), read without following
    a link."""

    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > 64 << 20:
            return False
        data = handle.read()
    head = data[:4096].decode("utf-8", errors="replace")
    if head.startswith("# Run report: ") or (
        head.startswith("<!DOCTYPE html>") and HTML_MARK in head
    ):
        return True
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # a 200k-deep array is no report either
        return False
    return isinstance(doc, dict) and {"run_id", "decisions", "budget", "run_state"} <= set(doc)


def write_report(path: str, text: str, *, force: bool = False) -> None:
    """Write a report to `path` atomically; an existing file that is not a report is replaced only
    with `force`.

    Nothing is left behind on failure (no temporary file); an unwritable path is a UsageError (exit
    2).
    """
    target = Path(path)
    if target.is_dir():
        raise rf.UsageError(
            f"cannot write the report to {target}: it is a folder; give a file name"
        )
    if (target.exists() or target.is_symlink()) and not force and not is_report(target):
        raise rf.UsageError(
            f"{target} exists and is not a report of plan report: it was left as it is; give "
            "another file name, or pass --force to replace it"
        )
    try:
        write_atomic(target, text)
    except OSError as error:
        raise rf.UsageError(f"cannot write {target}: {error.strerror or error}") from None
