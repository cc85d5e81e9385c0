"""The one text-table helper: aligned columns, cells drawn as plain text (no markup, escapes
shown), and no style codes on a stream that is not a terminal."""

from planner._core.text_tables import text_table


def test_columns_align_and_right_columns_align_right():
    lines = text_table([["a", "1"], ["long", "100"]], header=["name", "n"], right=[1])
    assert lines == ["  name    n", "  a       1", "  long  100"]


def test_a_cell_is_text_never_markup_or_a_control_sequence():
    (line,) = text_table([["[bold]x[/bold]", "\x1b[2Jy"]], indent=0)
    assert line == "[bold]x[/bold]  \\x1b[2Jy"


def test_wide_characters_keep_the_next_column_aligned():
    """Two wide characters take four columns of a terminal: "ab" is padded to four, not two."""
    lines = text_table([["名前", "x"], ["ab", "y"]], indent=0)
    assert lines == ["名前  x", "ab    y"]


def test_no_row_is_wrapped_however_long():
    (line,) = text_table([["w" * 500, "end"]], indent=0)
    assert line.endswith("  end")
