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

import msgspec.inspect as mi

from planner._core.errors import RunError
from planner._core.records import StoredTrial

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


def _admits_any(kind: mi.Type) -> bool:
    """True when `kind` (msgspec's view of a type) leaves some part of a value free: `Any` in it at
    any depth, where neither a shape nor a bound holds."""
    if isinstance(kind, mi.AnyType):
        return True
    if isinstance(kind, mi.UnionType):
        return any(_admits_any(k) for k in kind.types)
    if isinstance(kind, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
        return _admits_any(kind.item_type)
    if isinstance(kind, mi.TupleType):
        return any(_admits_any(k) for k in kind.item_types)
    if isinstance(kind, mi.DictType):
        return _admits_any(kind.key_type) or _admits_any(kind.value_type)
    if isinstance(kind, mi.TypedDictType | mi.StructType | mi.DataclassType):
        return any(_admits_any(f.type) for f in kind.fields)
    return False


def open_fields(schema: Any) -> frozenset[str]:
    """The fields of the TypedDict `schema` whose type leaves a part free (`config`, `params`):
    once a value is decoded into `schema`, the only fields these limits still have to walk (the
    others have a fixed depth and bounded integers)."""
    info = mi.type_info(schema)
    assert isinstance(info, mi.TypedDictType)
    return frozenset(f.encode_name for f in info.fields if _admits_any(f.type))


TRIAL_OPEN = open_fields(StoredTrial)


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

    A trial record decoded into its schema (`StoredTrial`): no part of a field the schema leaves
    free (`TRIAL_OPEN`) nested past MAX_DEPTH or holding an integer past 64 bits, in one walk.
    Any other value: no run of 19 digits (so every integer fits in 64 bits) and few brackets, or
    no part nested past MAX_DEPTH.
    """
    if type(value) is dict and "reports" in value:
        return _fits({k: v for k, v in value.items() if k in TRIAL_OPEN}, 0)
    if long_digits(data):
        return False
    return data.count(b"[") + data.count(b"{") <= MAX_DEPTH or _fits(value, 0)


def _fits(node: Any, depth: int) -> bool:
    """True when no non-empty list or mapping inside `node` (a list or mapping `depth` levels
    down) lies MAX_DEPTH levels down and no integer in it is past 64 bits: `check_value`'s rules,
    in a recursion that stops there (JSON values: exact types)."""
    kind = type(node)
    if kind is dict:
        children = node.values()
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
