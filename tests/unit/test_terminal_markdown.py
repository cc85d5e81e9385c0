"""The markdown report printed on a terminal is plain text: what is escaped for a file reads as
written."""

from __future__ import annotations

import pytest

from planner._results.report import _md, terminal_markdown


@pytest.mark.parametrize(
    "text", ["<absent>", "[0.9, 0.999]", "a|b", "&lt;x", "\\[", "a*b*`c`", "x & y > z"]
)
def test_what_the_file_escapes_the_terminal_reads_as_written(text):
    escaped = _md(text)
    assert terminal_markdown(escaped) == text
    assert "&lt;" not in terminal_markdown(_md("<absent>"))


def test_the_report_on_a_terminal_shows_no_escapes(results):
    from planner._results.report import render_markdown

    markdown = render_markdown(results)
    plain = terminal_markdown(markdown)
    assert "&lt;" not in plain and "\\[" not in plain and "&gt;" not in plain
    assert plain.splitlines()[0] == markdown.splitlines()[0]
