"""Splits a trainable logs: counts and fingerprints of the data each trial saw, never the ids.

`trial.log_split(name, ids, groups=None)` (function trainables) and
`planner.log_split(...)` (`command:` scripts) both end here, in the process
that holds the ids:

    summarize(name, ids, groups)    -> the split's numbers: presentations (rows, a
                                       repeated id counted each time), distinct units,
                                       distinct values per group, a fingerprint of
                                       each distinct set
    SplitLog.add(...)               -> the same, plus how many units and group values
                                       the split shares with every split logged before
                                       it in the same trial

A fingerprint is blake2b (16-byte digest) over the SORTED DISTINCT values: the
order of the rows and repetitions do not change it, a different set does. Ints
are hashed as little-endian int64, strings as their UTF-8 bytes with every
length hashed first (no separator ambiguity); ints and strings never share a
fingerprint (a type tag is hashed first), so `5` and `"5"` are different ids.

Pure and numpy-only: no planner state, no I/O. The checks against the contract's
`data` section are in `planner._data.checks`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

UNIT = "unit"  # the name `independent.by` uses for the ids themselves
DIGEST_BYTES = 16


class SplitError(ValueError):
    """A split that cannot be logged (bad ids, groups of the wrong length...): a sentence, raised
    in the trainable."""


def as_ids(values: Any, what: str) -> np.ndarray:
    """A 1-D array of int64 or str from a list, tuple, numpy array or pandas column; SplitError
    otherwise."""
    if hasattr(values, "to_numpy") and not isinstance(
        values, np.ndarray
    ):  # pandas Series, Index, Categorical
        values = values.to_numpy()
    elif hasattr(values, "__array__") and not isinstance(
        values, np.ndarray
    ):  # torch tensors and the like
        values = np.asarray(values)
    if (
        isinstance(values, str | bytes)
        or isinstance(values, Mapping)
        or not hasattr(values, "__len__")
    ):
        raise SplitError(
            f"{what} must be a list, array or column of ids, got {type(values).__name__}"
        )
    if not isinstance(
        values, np.ndarray
    ):  # a list or tuple: numpy would turn [1, "a"] into strings silently
        values = values if isinstance(values, list) else list(values)
        types = set(map(type, values))
        if not (
            all(issubclass(t, str) for t in types)
            or all(
                issubclass(t, int | np.integer) and not issubclass(t, bool | np.bool_)
                for t in types
            )
        ):
            if any(issubclass(t, float | np.floating) for t in types) and not types & {str}:
                raise SplitError(f"{what} must be ints or strings, got floats")
            if not any(issubclass(t, list | tuple | np.ndarray) for t in types):
                shown = ", ".join(sorted(t.__name__ for t in types))
                raise SplitError(f"{what} must hold only ints or only strings, got {shown}")
    array = values if isinstance(values, np.ndarray) else np.asarray(values)
    if array.ndim != 1:
        raise SplitError(f"{what} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    kind = array.dtype.kind
    if kind in "iu":
        if kind == "u" and array.dtype.itemsize == 8 and int(array.max()) >= 2**63:
            raise SplitError(
                f"{what} has unsigned ids of 2**63 or more; use strings for ids that large"
            )
        return array.astype(np.int64, copy=False)
    if kind == "U":
        return array
    if kind == "O":
        types = {type(v) for v in array.tolist()}
        if all(issubclass(t, str) for t in types):
            return array.astype(str)
        if all(
            issubclass(t, int | np.integer) and not issubclass(t, bool | np.bool_) for t in types
        ):
            return array.astype(np.int64)
        shown = ", ".join(sorted(t.__name__ for t in types))
        raise SplitError(f"{what} must hold only ints or only strings, got {shown}")
    if kind == "f":
        raise SplitError(
            f"{what} must be ints or strings, got floats ({array.dtype}); a pandas column of ints "
            "with missing values reads as floats: drop or fill them and cast with .astype(int)"
        )
    raise SplitError(f"{what} must be ints or strings, got {array.dtype}")


def fingerprint(distinct: np.ndarray) -> str:
    """blake2b of a sorted distinct set (as `np.unique` returns it): order- and repetition-free by
    construction."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    if distinct.dtype.kind == "U":
        h.update(b"str\0")
        items = distinct.tolist()
        h.update(np.fromiter((len(s) for s in items), dtype="<i8", count=len(items)).tobytes())
        h.update("".join(items).encode("utf-8", errors="surrogatepass"))
    else:
        h.update(b"int64\0")
        h.update(np.ascontiguousarray(distinct, dtype="<i8").tobytes())
    return h.hexdigest()


def distinct(ids: np.ndarray) -> np.ndarray:
    """The sorted distinct values. Sort and mask rather than `np.unique`, whose hashing path in
    numpy 2 is ten times slower on a million ints."""
    ordered = np.sort(ids)
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def summarize(
    name: str, ids: Any, groups: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(the split's summary, its distinct sets by key) for `ids` and `groups` aligned with them.

    The summary is what the run folder stores:
    {"presentations": n rows, "distinct": n units, "fingerprint": ...,
     "groups": {group: {"distinct": n values, "fingerprint": ...}}}.
    The distinct sets (`unit` and each group) stay in memory for the overlap checks.
    """
    check_name(name)
    unit_ids = as_ids(ids, f"log_split({name!r}): ids")
    sets = {UNIT: distinct(unit_ids)}
    out: dict[str, Any] = {
        "presentations": int(unit_ids.size),
        "distinct": int(sets[UNIT].size),
        "fingerprint": fingerprint(sets[UNIT]),
        "groups": {},
    }
    if groups is not None:
        if not isinstance(groups, Mapping):
            raise SplitError(
                f"log_split({name!r}): groups must be a mapping of group name to values, "
                f"like {{'patient': patient_ids}}, got {type(groups).__name__}"
            )
        for group, values in groups.items():
            if not isinstance(group, str) or not group or group == UNIT:
                raise SplitError(
                    f"log_split({name!r}): a group name must be a non-empty string other than "
                    f"{UNIT!r}, got {group!r}"
                )
            column = as_ids(values, f"log_split({name!r}): group {group!r}")
            if column.size != unit_ids.size:
                raise SplitError(
                    f"log_split({name!r}): group {group!r} has {column.size} values for "
                    f"{unit_ids.size} ids; give one value per id, aligned"
                )
            sets[group] = distinct(column)
            out["groups"][group] = {
                "distinct": int(sets[group].size),
                "fingerprint": fingerprint(sets[group]),
            }
    return out, sets


def check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip():
        raise SplitError(
            f"a split's name must be a non-empty string like 'train' or 'test', got {name!r}"
        )


def shared(a: np.ndarray, b: np.ndarray) -> int:
    """How many values two distinct sets share (0 when their types differ: an int id is never a
    string id)."""
    if a.size == 0 or b.size == 0 or (a.dtype.kind == "U") != (b.dtype.kind == "U"):
        return 0
    small, large = (
        (a, b) if a.size <= b.size else (b, a)
    )  # both sorted and distinct: binary search, no re-sort
    at = np.minimum(np.searchsorted(large, small), large.size - 1)
    return int(np.count_nonzero(large[at] == small))


class SplitLog:
    """The splits of one trial (one attempt), as they are logged.

    `add` returns the split's summary with `overlap`: for every split logged
    before it, the number of units and of each group's values both hold
    ({"train": {"unit": 0, "patient": 37}}), so that an overlap is known in the
    process that holds the ids and stored as a count. Logging a name again with
    the same distinct sets updates its counts; with different sets it is an error.
    """

    def __init__(self) -> None:
        self.sets: dict[str, dict[str, np.ndarray]] = {}
        self.summaries: dict[str, dict[str, Any]] = {}

    def add(self, name: str, ids: Any, groups: Mapping[str, Any] | None = None) -> dict[str, Any]:
        summary, sets = summarize(name, ids, groups)
        if name in self.summaries:
            before = self.summaries[name]
            if fingerprints(before) != fingerprints(summary):
                raise SplitError(
                    f"split {name!r} was logged again with different units or groups; a split is "
                    "one set per trial: log a changing subset under its own name"
                )
            summary["overlap"] = before.get("overlap", {})
        else:
            summary["overlap"] = {
                other: {
                    key: shared(sets[key], other_sets[key]) for key in sets if key in other_sets
                }
                for other, other_sets in self.sets.items()
            }
        self.sets[name] = sets
        self.summaries[name] = summary
        return summary


def fingerprints(summary: Mapping[str, Any]) -> dict[str, Any]:
    """key (`unit` or a group) -> fingerprint, of one stored split summary."""
    return {
        UNIT: summary.get("fingerprint"),
        **{g: v.get("fingerprint") for g, v in (summary.get("groups") or {}).items()},
    }
