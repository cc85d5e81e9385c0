"""Timestamps and durations as planner writes and prints them: one policy each.

Timestamps are UTC ISO-8601 with milliseconds and a `Z` (`2026-11-30T15:05:35.123Z`),
everywhere: trial records, events, the lock, the attempt ledger.

Durations print as seconds below two minutes, minutes below two hours, then hours:
`45 s`, `12.5 min`, `3.20 h`. `clock` is the live table's `h:mm:ss`. Unknown is `?`.
A duration a contract gives (`budget.max_wall_time: 20m`) reads with `parse_duration`, the one
parser of '90', '90s', '20m', '2h', '1d' (the contract model and the run folder's reader both use
it). A number prints with `number`: four significant digits unless told, a placeholder for
none, yes or no for a flag. Counts print in words (`noun`: 1 trial, 2 trials); paths relative to
the current folder when below it (`shown_path`); a file that is not a regular one by what it is
(`file_kind`). A config or contract value prints as YAML writes it (`yaml_value`: true, false,
null, 'text', [1, 2]), the way the user wrote it.
"""

from __future__ import annotations

import math
import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

NOT_FINITE = (
    "is not a finite number"  # the contract's schema errors give this message rule code P420
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | int | float) -> float:
    """'90', '90s', '20m', '2h', '1d' -> seconds (a ValueError with its sentence otherwise)."""
    if isinstance(text, bool):
        raise ValueError("a duration is a number of seconds or a string like '20m', '2h', '1d'")
    if isinstance(text, float) and not math.isfinite(text):
        raise ValueError(
            f"{text} {NOT_FINITE}: a duration is a finite number of seconds or a string like '20m'"
        )
    if isinstance(text, int | float):
        if text <= 0:
            raise ValueError("a duration must be positive")
        return float(text)
    match = _DURATION.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(
            f"{text!r} is not a duration: write a positive number with s, m, h or d, like '20m'"
        )
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def utc_now() -> str:
    """Now, as planner writes every timestamp."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_duration(seconds: Any) -> str:
    """`45 s`, `12.5 min`, `3.20 h`; `?` when unknown or not a finite number."""
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return "?"
    if not math.isfinite(seconds):
        return "?"
    if seconds < 120:
        return (
            f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
        )
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def clock(seconds: float | None) -> str:
    """`h:mm:ss` for the live table; `-` when unknown."""
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


# What a terminal obeys instead of showing: the C0 controls but newline and tab, and the C1
# controls (ESC [ and ] start colour, cursor and title sequences; BEL, BS and CR rewrite a line)
# shown as \x1b; DEL and the invisible characters that reorder or hide text (the bidi overrides
# and isolates, U+202E among them, the marks, the line and paragraph separators, a byte order
# mark) shown as \u202e. DEL is the one of them json.dumps leaves raw: shown as \u007f, it keeps
# a printed JSON document valid.
_CONTROL = {
    c: f"\\x{c:02x}"
    for c in [*range(0x00, 0x09), 0x0B, 0x0C, 0x0D, *range(0x0E, 0x20), *range(0x80, 0xA0)]
}
_INVISIBLE = [0x7F, 0x061C, 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A), 0xFEFF]
_CONTROL.update({c: f"\\u{c:04x}" for c in _INVISIBLE})


def terminal_safe(text: str) -> str:
    """`text` with control characters (escape sequences, carriage returns, ...) shown as `\\x1b`,
    not obeyed.

    Newlines and tabs stay. Everything `plan` prints goes through this (the CLI's standard
    streams do): a name, a config value or a trial's error message cannot move the cursor, clear
    the screen, retitle the terminal or reverse the text around it.
    """
    return text.translate(_CONTROL)


_SGR = re.compile(r"\x1b\[[0-9;]*m")


def without_colours(text: str) -> str:
    """`text` without the colour codes (`ESC[36m`) a library wraps its own messages in (Ray's error
    messages): its words kept, its styling dropped, so they read as text wherever they are shown."""
    return _SGR.sub("", text)


# OWASP's rule against CSV injection: a spreadsheet reads a cell starting with one as a formula
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def spreadsheet_safe(value: object) -> object:
    """A text cell a spreadsheet would run as a formula (`=HYPERLINK(...)`, `+cmd`, `@SUM`) with
    a `'` before it, so it shows as text; anything else (numbers, `-0.5` as text too) as it is."""
    if (
        isinstance(value, str)
        and value.startswith(_FORMULA_START)
        and not _PLAIN_NUMBER.fullmatch(value)
    ):
        return "'" + value
    return value


def number(value: object, digits: int | None = 4, *, none: str = "-", sign: bool = False) -> str:
    """A value as planner prints it in a sentence or a table cell: a float with `digits`
    significant digits (all of them, integers without `.0`, when `digits` is None), `none` for
    None, yes or no for a flag, anything else as `str` writes it; `sign` puts `+` before a
    positive float."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, float):
        return str(value)
    if digits is None:
        return str(int(value)) if value.is_integer() else repr(value)
    return f"{value:{'+' if sign else ''}.{digits}g}"


def noun(word: str, count: int) -> str:
    """'patient', 37 -> '37 patients'; 'trial', 1 -> '1 trial' (thousands separated)."""
    plural = word if count == 1 or word.endswith("s") else word + "s"
    return f"{count:,} {plural}"


_FILE_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, from its `st_mode`: "a FIFO (named pipe)", "a
    folder", ..."""
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "not a regular file"


def shown_path(path: str | os.PathLike) -> str:
    """A path as printed to the user: relative to the current folder when it is below it, else
    absolute.

    One form for one folder, however it was reached (a relative runs/ of a first
    run, the resolved folder of a --resume, a config file Hydra names).
    """
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        pass
    try:
        return str(absolute.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(absolute)


def yaml_value(value: Any, limit: int | None = None) -> str:
    """A config or contract value as the user shows it to the user, in YAML's flow style.

    true / false / null (not Python's True / False / None), strings in single
    quotes ('sgd', 'it''s'), [lists] and {key: value} mappings, .inf and .nan;
    cut to `limit` characters when given. The one formatter of such values in
    planner's messages, summaries and reports.
    """
    text = _yaml_flow(value)
    return text if limit is None or len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def _yaml_flow(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{k if isinstance(k, str) else _yaml_flow(k)}: {_yaml_flow(v)}"
                for k, v in value.items()
            )
            + "}"
        )
    return repr(value)
