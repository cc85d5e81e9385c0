"""The shape of every file in a run folder, described once and checked as it is read
(docs/run-folder.md).

A run folder may come from anyone: a file with the right name and the wrong
shape (`{"state": 5}`, `"reports": [{"step": "a"}]`, `"exposure": 10**400`)
must not reach the code that reads it. Each file is described here (a trial
record in planner._core.records, `StoredTrial`) as typed dicts with bounded
numbers, and msgspec decodes and validates it against that description: a
line of trials.jsonl is decoded straight into its type, any other file is
parsed and then converted to its type. The first field of the wrong type is
msgspec's `ValidationError`, turned here into one `RunError` (exit 3) naming the
file and the field, so every command gives the same verdict on the same folder.

The types say what a reader relies on, not the meaning: a field that is absent
is fine unless a reader needs it (a trial record's `trial_id` and `status`; an
event's `event`). The limits of planner._store.bounds (depth, 64-bit integers)
cover what a type leaves free (`config`, `params`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Required, TypedDict

import msgspec

from planner._core.errors import RunError
from planner._core.records import (
    Count,
    Finite,
    Measure,
    StoredTrial,
    TrialRecord,
    Violation,
    Whole,
)
from planner._store.bounds import check_bounds, field_name, too_deep


class Malformed(ValueError):
    """The text is not JSON at all (a torn or damaged line): the JSON-lines policy decides what
    that is."""


# ---------------------------------------------------------------- the files besides trials.jsonl


class Event(TypedDict, total=False):
    event: Required[str]
    time: str | None
    trial_id: str | None
    phase: str | None
    arm: str | None


class Reeval(TypedDict, total=False):
    reeval: Count | None
    arm: str | None
    seeds: list[Whole] | None


class Budget(TypedDict, total=False):
    wall_time_s: Measure | None
    trials_ended: Count | None


class State(TypedDict, total=False):
    state: str | None
    reason: str | None
    updated: str | None
    budget: Budget | None


class PlanPhase(TypedDict, total=False):
    trials: list[dict[str, Any]] | None


class Plan(TypedDict, total=False):
    planned_count: Count | None
    planned_trials: Count | None
    phases: list[PlanPhase] | None
    trials: list[dict[str, Any]] | None


class DecisionRow(TypedDict, total=False):
    arm: str | None
    decision: str | None
    effect: Finite | None  # null when undefined, never NaN
    ci_low: Finite | None
    ci_high: Finite | None
    p_value: Finite | None
    alpha_adjusted: Finite | None
    n_baseline: Count | None
    n_arm: Count | None


class Decisions(TypedDict, total=False):
    run_state: str | None
    alpha: Measure | None
    min_effect: Measure | None
    decisions: list[DecisionRow] | None


class Chosen(TypedDict, total=False):
    trial_id: str | None
    params: dict[str, Any] | None


class Selection(TypedDict, total=False):
    arms: dict[str, Chosen] | None


class RunInfo(TypedDict, total=False):
    run_id: str | None
    name: str | None
    contract_sha256: str | None
    created: str | None
    planner_version: str | None
    contract_path: str | None


class Lock(TypedDict, total=False):
    pid: Count | None
    host: str | None
    started: str | None
    command: str | None
    token: str | None
    boot_id: str | None
    pid_started: Measure | None


class Identity(TypedDict, total=False):
    env: dict[str, Any] | str | None
    git: dict[str, Any] | str | None
    code: dict[str, Any] | None  # the report reads their fields
    packages: dict[str, Any] | None
    host: dict[str, Any] | None
    data: dict[str, Any] | None


class Origin(TypedDict, total=False):
    arm: str | None
    run: str | None
    decision: str | None
    promoted: str | None


# `from` is a keyword: the baseline, which names where it came from, is declared in the functional
# form
LineageBaseline = TypedDict(  # noqa: UP013
    "LineageBaseline", {"arm": str | None, "from": Origin | None}, total=False
)


class Repetition(TypedDict, total=False):
    sentence: str | None  # what the report shows of a repeated test (docs/lineage.md)


class Edit(TypedDict, total=False):
    run: Required[Any]
    decisions: Required[Any]
    contract_sha256: str | None


class Lineage(TypedDict, total=False):
    """lineage.json (docs/lineage.md): what the report's lineage lines read."""

    line: str | None
    baseline: LineageBaseline | None
    repetition: Repetition | None
    edited_after_decisions: list[Edit] | None


SCHEMAS: dict[str, Any] = {
    "trials.jsonl": StoredTrial,
    "events.jsonl": Event,
    "reevals.jsonl": Reeval,
    "state.json": State,
    "plan.json": Plan,
    "decisions.json": Decisions,
    "selection.json": Selection,
    "run.json": RunInfo,
    "lock": Lock,
    "identity.json": Identity,
    "lineage.json": Lineage,
}

# ---------------------------------------------------------------- decoding

_TRIAL = msgspec.json.Decoder(StoredTrial)
_TYPED = {name: msgspec.json.Decoder(schema) for name, schema in SCHEMAS.items()}
_ANY = msgspec.json.Decoder()
_DAMAGED = "this is not a file a run wrote (the folder is damaged or was edited)"


def _untyped(data: bytes, where: str) -> Any:
    """The JSON value of `data`; NaN and Infinity (as Python's json writes them) accepted;
    Malformed else."""
    try:
        return _ANY.decode(data)
    except RecursionError:
        raise too_deep(where) from None
    except msgspec.DecodeError:
        pass
    # NaN / Infinity, which msgspec refuses: the standard library reads them (the schema judges)
    try:
        return json.loads(data)
    except RecursionError:
        raise too_deep(where) from None
    except ValueError:
        raise Malformed(where) from None


def decode(name: str, data: bytes, where: str) -> Any:
    """The value of the file (or line) called `name` held in `data`, checked: its schema (when
    `name` has one, and the value is a JSON object) and the limits of planner._store.bounds, else
    RunError naming `where` and the field. Malformed when `data` is not JSON; a value that is no
    object is returned as it is (the caller says what that file should hold)."""
    if name == "trials.jsonl":
        try:
            value = _TRIAL.decode(data)
        except RecursionError:
            raise too_deep(where) from None
        except msgspec.ValidationError as error:
            value = _untyped(data, where)
            if isinstance(value, dict):
                check_bounds(value, data, where)
                raise _refusal(error, value, where, StoredTrial) from None
            return value
        except msgspec.DecodeError:  # not JSON to msgspec: NaN tokens, else torn
            value = _untyped(data, where)
            if not isinstance(value, dict):
                return value
            check_bounds(value, data, where)
            return check_trial(value, where)
        check_bounds(value, data, where)
        _violations(value, where)
        return value
    typed = _TYPED.get(name)
    if typed is not None:  # the common case: the text decoded straight into its type checks it
        try:
            typed.decode(data)
        except (msgspec.DecodeError, RecursionError):
            pass  # not an object of that shape, or NaN tokens: the general path says which
        else:
            value = _ANY.decode(data)  # the value as written (the typed one drops undescribed keys)
            check_bounds(value, data, where)
            return value
    value = _untyped(data, where)
    check_bounds(value, data, where)
    schema = SCHEMAS.get(name)
    if schema is not None and isinstance(value, dict):
        _convert(value, schema, where)
    return value


def _convert(value: Any, schema: Any, where: str, prefix: tuple[Any, ...] = ()) -> Any:
    try:
        return msgspec.convert(value, schema, strict=True)
    except msgspec.ValidationError as error:
        raise _refusal(error, value, where, schema, prefix) from None


def _violations(record: Mapping[str, Any], where: str) -> None:
    """Each logged violation that is a mapping held to `Violation` (its other keys are its kind's
    own)."""
    for i, violation in enumerate(record.get("violations") or ()):
        if isinstance(violation, dict) and ("kind" in violation or "step" in violation):
            _convert(violation, Violation, where, ("violations", i))


def check_trial(record: Mapping[str, Any], where: str) -> TrialRecord:
    """A trial record already in memory (a record a worker kept, parsed NaN tokens) held to
    `StoredTrial`, as a line is when it is read; the record, as the schema gives it back
    (RunError naming the field)."""
    checked: TrialRecord = _convert(record, StoredTrial, where)
    _violations(checked, where)
    return checked


def check_written(name: str, line: str) -> None:
    """Hold a line the writer is about to append to `name` to the file's schema, as the reader
    will read it: a record every reader would refuse, or one with a field the schema does not
    describe (which the typed decoder of trials.jsonl would drop), is a bug of planner's, stopped
    before it reaches the disk."""
    if name not in SCHEMAS:
        return
    data = line.encode()
    where = f"a record about to be written to {name}"
    read = decode(name, data, where)
    if name != "trials.jsonl":
        return
    whole = _ANY.decode(data)
    lost = sorted(key for key in whole if read.get(key) != whole[key])
    if lost:
        raise RunError(
            f"{where} holds what its schema does not describe (in `{'`, `'.join(lost)}`): it would "
            "not read back whole; this is a bug of planner's"
        )


# ---------------------------------------------------------- msgspec's error, as planner's sentence

_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+|\.\.\.)\]")
_MISSING = re.compile(r"Object missing required field `([^`]*)`")
_EXPECTED = re.compile(r"Expected `([^`]*)`(.*)")
_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "object": "a mapping",
    "array": "a list",
    "bool": "true or false",
}
_ANY_KEY = object()  # a mapping's key msgspec's path leaves out (`[...]`)


def _path(text: str) -> list[Any]:
    """msgspec's JSON path (`$.reports[3].step`) as keys and indices; `_ANY_KEY` for a mapping's
    key."""
    out: list[Any] = []
    for name, index in _STEP.findall(text):
        out.append(name if name else (_ANY_KEY if index == "..." else int(index)))
    return out


def _refusal(
    error: msgspec.ValidationError,
    value: Any,
    where: str,
    schema: Any,
    prefix: tuple[Any, ...] = (),
) -> RunError:
    """The RunError for msgspec's `error` on `value` (the parsed file): the field, by its path,
    and what was there against what the schema wants."""
    message, _, at = str(error).partition(" - at `")
    path = _path(at.rstrip("`"))
    if _ANY_KEY in path:
        path = _named(value, path, schema, str(error))
    missing = _MISSING.match(message)
    if missing:
        path.append(missing[1])
        what = "is missing"
    else:
        found = _at(value, path)
        what = f"is {_show(found)}, not {_wanted(message, found)}"
    if not path and not missing:
        return RunError(f"{where} does not hold a JSON object: {_DAMAGED}")
    return RunError(f"{where}: field `{field_name([*prefix, *path])}` {what}; {_DAMAGED}")


def _named(value: Any, path: list[Any], schema: Any, said: str) -> list[Any]:
    """`path` with each mapping key msgspec left out found: the key whose entry alone gives the
    same error."""
    out: list[Any] = []
    for step in path:
        node = _at(value, out)
        if step is not _ANY_KEY:
            out.append(step)
            continue
        if not isinstance(node, dict):
            return out
        for key in node:
            try:
                msgspec.convert(_replaced(value, out, {key: node[key]}), schema, strict=True)
            except msgspec.ValidationError as error:
                if str(error) == said:
                    out.append(key)
                    break
        else:
            return out
    return out


def _replaced(value: Any, path: list[Any], new: Any) -> Any:
    """A copy of `value` with what lies at `path` replaced by `new` (the copies only along the
    path)."""
    if not path:
        return new
    copy = list(value) if isinstance(value, list) else dict(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def _at(value: Any, path: list[Any]) -> Any:
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _wanted(message: str, found: Any) -> str:
    """What the schema wants, in words, from msgspec's message ("Expected `int` >= 0", ...)."""
    if message.startswith("Invalid enum value"):
        return 'a number, or "nan", "inf" or "-inf"'
    if message.startswith("Number out of range"):
        return "a number a double holds"
    expected = _EXPECTED.match(message)
    if expected is None:
        return message
    kinds = [k for k in expected[1].split(" | ") if k != "null"]
    if "int" in kinds and "float" in kinds:
        kinds.remove("int")
    words = " or ".join(_WORDS.get(k, k) for k in kinds)
    bound = expected[2].strip()
    if bound.startswith(","):
        return words
    if isinstance(found, float) and not math.isfinite(found):
        return "a finite number"
    bound = re.sub(
        r"-?9007199254740992(\.0)?", lambda m: "-2**53" if m[0][0] == "-" else "2**53", bound
    )
    return (
        f"{words} {bound}".replace("<=", "up to").replace(">=", "of at least") if bound else words
    )
