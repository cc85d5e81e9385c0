"""Limits on any value read from a run folder, before its schema (planner._store.schema) is checked.

A run writes shallow JSON: a trial record is at most a few levels deep, its numbers fit in 64 bits.
A damaged or planted file may hold a 200,000-deep array (Python's parser and every recursive reader
after it end in RecursionError) or an integer of hundreds of digits (OverflowError as soon as it is
used as a float). So every value read is checked here first: at most MAX_DEPTH levels of lists and
mappings, integers within 64 bits; anything else is a `RunError` (exit 3) naming the file, the line
and the field, as the schema check does.
"""

from __future__ import annotations

from typing import Any

from planner._core.errors import RunError

MAX_DEPTH = 64  # levels of lists and mappings in one JSON value (a trial record uses about 6)
INT_LIMIT = 2**63  # integers of a run folder are 64-bit: counts, steps, seeds, pids
_DIGITS_AS_NINES = bytes(
    b"9"[0] if 48 <= b <= 57 else 32 for b in range(256)
)  # every digit a 9, all else a space
_NINETEEN = b"9" * 19


def _damaged(where: str, field: str, what: str) -> RunError:
    at = f"field `{field}` " if field else ""
    return RunError(
        f"{where}: {at}{what}; this is not a file a run wrote (the folder is damaged or was edited)"
    )


def too_deep(where: str) -> RunError:
    """The error for a value too deep to even parse (RecursionError in the JSON parser)."""
    return _damaged(where, "", f"is nested deeper than {MAX_DEPTH} levels")


def field_name(path: list[Any]) -> str:
    """A field's path as a sentence names it: `reports[3].step`, `splits.train` (8 levels at
    most)."""
    out = ""
    for part in path[:8]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out + ("..." if len(path) > 8 else "")


# A trial record's `reports` (a hundred small mappings) are typed by its schema
# (planner._store.schema: bounded steps and numbers only, a fixed depth): nothing there is left for
# these limits.
SCHEMA_CHECKED = frozenset({"reports"})


def check_value(value: Any, where: str) -> None:
    """Raise RunError naming `where` and the field when `value` nests past MAX_DEPTH or holds a
    huge integer (a top-level `reports` list is left to the schema check)."""
    if isinstance(value, dict) and SCHEMA_CHECKED.intersection(value):
        value = {k: v for k, v in value.items() if k not in SCHEMA_CHECKED}
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if len(path) >= MAX_DEPTH and isinstance(node, dict | list) and node:
            raise _damaged(where, field_name(path), f"is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend(
                (v, [*path, k]) for k, v in node.items() if isinstance(v, dict | list | int)
            )
        elif isinstance(node, list):
            stack.extend(
                (v, [*path, i]) for i, v in enumerate(node) if isinstance(v, dict | list | int)
            )
        elif (
            isinstance(node, int)
            and not isinstance(node, bool)
            and not -INT_LIMIT <= node < INT_LIMIT
        ):
            raise _damaged(where, field_name(path), "is an integer beyond 64 bits")


def long_digits(data: bytes) -> bool:
    """True when `data` holds a run of 19 digits or more (an integer that may be past 64 bits)."""
    return _NINETEEN in data.translate(_DIGITS_AS_NINES)


def quick_ok(data: bytes, value: Any = None) -> bool:
    """True when the JSON text `data` (parsed: `value`) cannot break a limit, so `check_value` need
    not walk it.

    A trial record (its `reports` typed by its schema): no part outside them nested past MAX_DEPTH
    or holding an integer past 64 bits, in one walk. Any other value: no run of 19 digits (so every
    integer fits in 64 bits) and few brackets, or no part nested past MAX_DEPTH.
    """
    if type(value) is dict and "reports" in value:
        return _fits(value, 0, skip=SCHEMA_CHECKED)
    if long_digits(data):
        return False
    return data.count(b"[") + data.count(b"{") <= MAX_DEPTH or _fits(value, 0)


def _fits(node: Any, depth: int, skip: frozenset[str] = frozenset()) -> bool:
    """True when no non-empty list or mapping inside `node` (a list or mapping `depth` levels
    down; its keys in `skip` left out) lies MAX_DEPTH levels down and no integer in it is past 64
    bits: `check_value`'s rules, in a recursion that stops there (JSON values: exact types)."""
    kind = type(node)
    if kind is dict:
        children = node.values() if not skip else [v for k, v in node.items() if k not in skip]
    elif kind is list:
        children = node
    else:
        return True
    for child in children:
        kind = type(child)
        if kind is int:
            if not -INT_LIMIT <= child < INT_LIMIT:
                return False
        elif (
            (kind is dict or kind is list)
            and child
            and (depth + 1 >= MAX_DEPTH or not _fits(child, depth + 1))
        ):
            return False
    return True


def check_bounds(value: Any, data: bytes, where: str) -> None:
    """Raise RunError naming `where` and the field when `value` (parsed from `data`) breaks a
    limit."""
    if not quick_ok(data, value):
        check_value(value, where)
