"""Text tables as `plan` prints them: one helper, rich laying out the columns.

A table's cells are plain text: rich reads no markup in them (a name from a user with `[bold]` in
it prints as written), escape sequences in them show as `\\x1b` (`terminal_safe`), and the table
comes out without colour or style codes whatever the stream, so a piped `plan status` and a test
read the same text a terminal shows. rich measures each cell as the terminal draws it, so a
column of names in wide characters stays aligned where `str.ljust` would not.

rich is imported on the first table drawn: `plan validate` never draws one.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Sequence

from planner._core.lazy import lazy_import
from planner._core.text import terminal_safe

rich_console = lazy_import("rich.console")
rich_table = lazy_import("rich.table")
rich_text = lazy_import("rich.text")

# wide enough that no row of a table is ever wrapped: a table is read by column, not by screen
_NO_WRAP = 100_000


def text_table(
    rows: Sequence[Sequence[object]],
    *,
    header: Sequence[str] | None = None,
    right: Collection[int] = (),
    indent: int = 2,
    gap: int = 2,
) -> list[str]:
    """`rows` as lines of aligned text, under `header` when given: columns `gap` spaces apart,
    left-aligned but those whose index is in `right`, each line indented by `indent` spaces and
    without trailing blanks."""
    table = rich_table.Table(
        box=None,
        show_header=header is not None,
        header_style="",
        pad_edge=False,
        padding=(0, gap, 0, 0),
        expand=False,
    )
    width = max((len(row) for row in rows), default=len(header or ()))
    names = list(header) if header is not None else [""] * width
    for i, name in enumerate(names):
        table.add_column(
            rich_text.Text(terminal_safe(name)),
            justify="right" if i in right else "left",
            no_wrap=True,
        )
    for row in rows:
        table.add_row(*(rich_text.Text(terminal_safe(str(cell))) for cell in row))
    out = io.StringIO()
    console = rich_console.Console(
        file=out,
        width=_NO_WRAP,
        color_system=None,
        force_terminal=False,
        no_color=True,
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )
    console.print(table)
    return [(" " * indent + line).rstrip() for line in out.getvalue().splitlines()]
