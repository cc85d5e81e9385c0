"""Turn pydantic's validation errors into Diagnostics with stable codes and YAML positions.

Each pydantic error has a `loc` (keys and indices, plus union-member tags such
as "str" that are not keys) and a `type`. We walk the loc along the loaded data
to find the YAML node it is about, keep the nearest existing ancestor for a
missing key, and pick a code:

    P100 unknown key (with "did you mean")     P101 missing required key
    P102 wrong type                            P103 value out of range / not allowed
    P104 fields that do not fit together
    P401 fewer than 2 seeds                    P500 trainable not `module:function`
    P420 NaN or an infinity where a finite number is meant
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from planner._contract.load import LoadedYaml, format_path
from planner._contract.model import SEED_RANGE, Contract
from planner._core.diagnostics import Diagnostic, short_repr
from planner._core.lazy import lazy_import

difflib = lazy_import(
    "difflib"
)  # the did-you-mean hints: only a contract with a mistake needs them

_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "none_required": "null",
}

# The words of Optuna, Ray Tune and W&B sweeps a contract may bring, and planner's for the same
# thing:
# an unknown key that is one of them gets this hint, never a did-you-mean on spelling alone.
_METRIC_MODE = "planner's word is `metric.mode`: `max` or `min` " + (
    "(`direction: minimize` is `metric: {mode: min}`)."
)
_TRIALS = "planner's word is `tuning.trials_per_arm`: the trials each arm's tuning runs."
_EXPOSURE = (
    "planner's word is `budget.exposure`: the steps (epochs, iterations) every trial runs, "
    "in `budget.unit`."
)
_FOREIGN_KEYS = {
    "direction": "Optuna's `direction`: " + _METRIC_MODE,
    "directions": "Optuna's `directions`: " + _METRIC_MODE,
    "goal": "W&B's `goal`: " + _METRIC_MODE,
    "n_trials": "Optuna's `n_trials`: " + _TRIALS,
    "num_samples": "Ray Tune's `num_samples`: " + _TRIALS,
    "count": "W&B's `count`: " + _TRIALS,
    "max_iter": "`max_iter`: " + _EXPOSURE,
    "max_epochs": "`max_epochs`: " + _EXPOSURE,
    "epochs": "`epochs`: " + _EXPOSURE,
    "max_t": "Ray Tune's `max_t`: " + _EXPOSURE,
    "training_iteration": "Ray Tune's `training_iteration`: " + _EXPOSURE,
    "method": "W&B's `method: random`: planner's word is `tuning.sampler: {name: random}` "
    "(tpe, random or grid).",
    "search_alg": "Ray Tune's `search_alg`: planner's word is `tuning.sampler: {name: tpe}` "
    "(tpe, random or grid).",
    "parameters": "W&B's `parameters`: planner's word is `tuning.space`, one dotted config key a "
    "dimension.",
    "param_space": "Ray Tune's `param_space`: planner's word is `tuning.space`, one dotted config "
    "key a dimension.",
    "pruner": "Optuna's `pruner`: planner's word is `tuning.early_stop: {rule: asha}` "
    "(none, asha or median).",
    "scheduler": "Ray Tune's `scheduler`: planner's word is `tuning.early_stop: {rule: asha}` "
    "(none, asha or median).",
    "early_terminate": "W&B's `early_terminate`: planner's word is `tuning.early_stop: "
    "{rule: asha}` (none, asha or median).",
    "timeout": "Optuna's `timeout`: planner's word is `budget.max_wall_time` (like `2h`).",
}
# a word where planner wants a mapping: the mapping it means
_SHORTHAND = {"sampler": "name", "early_stop": "rule"}
_FOREIGN_VALUES = {"minimize": "min", "maximize": "max"}

_PATTERN_HINTS = {
    "name": "Use lowercase letters, digits, '-' and '_', starting with a letter or digit, at most "
    "64 characters.",
    "trainable": "Write `module.path:function`, like `toy:train`.",
}


def schema_diagnostics(errors: list[ErrorDetails], loaded: LoadedYaml) -> list[Diagnostic]:
    """Diagnostics for `ValidationError.errors()` of the contract in `loaded`."""
    grouped: dict[tuple[tuple[Any, ...], bool], list[ErrorDetails]] = {}
    for error in errors:
        path, on_key = _data_path(error, loaded.data)
        grouped.setdefault((path, on_key), []).append(error)
    found = [
        (path, _diagnostic(path, on_key, errs, loaded)) for (path, on_key), errs in grouped.items()
    ]
    # a missing key that an unknown key at the same level is a typo of: report the typo only
    suggested = {(path[:-1], d.hint) for path, d in found if d.code == "P100"}
    return [
        d
        for path, d in found
        if not (d.code == "P101" and (path[:-1], f"Did you mean `{path[-1]}`?") in suggested)
    ]


def _data_path(error: ErrorDetails, data: Any) -> tuple[tuple[Any, ...], bool]:
    """The loc reduced to keys and indices that exist in the data (plus a missing last key)."""
    loc = error["loc"]
    path: list[Any] = []
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if part == "[key]":
            return tuple(path), True
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif last and error["type"] == "missing":
            path.append(part)
        # anything else is a union-member tag ("str", "float", "function-after[...]"): not a node
    return tuple(path), error["type"] == "extra_forbidden"


def _diagnostic(
    path: tuple[Any, ...], on_key: bool, errs: list[ErrorDetails], loaded: LoadedYaml
) -> Diagnostic:
    error = errs[0]
    kind = error["type"]
    where = format_path(path) or "the contract"
    line, column = loaded.position(path, key=on_key)
    leaf = path[-1] if path else None
    code, hint = "P103", ""
    if kind == "extra_forbidden":
        code = "P100"
        allowed = allowed_keys(path[:-1])
        close = difflib.get_close_matches(str(leaf), allowed, n=1, cutoff=0.6) if allowed else []
        message = f"unknown key {leaf!r}" + (f" in {format_path(path[:-1])}" if path[:-1] else "")
        if str(leaf) in _FOREIGN_KEYS:
            hint = _FOREIGN_KEYS[str(leaf)]
        elif close:
            hint = f"Did you mean `{close[0]}`?"
        elif allowed:
            hint = f"Remove it; the keys allowed here are: {', '.join(allowed)}."
        else:
            hint = "Remove it."
    elif kind == "missing":
        code = "P101"
        parent = format_path(path[:-1])
        message = f"missing required key {leaf!r}" + (f" in {parent}" if parent else "")
        hint = f"Add `{leaf}:`" + (f" under `{parent}`." if parent else " at the top level.")
    elif (
        kind == "finite_number"
        or (kind == "value_error" and "is not a finite number" in error["msg"])
        or (
            kind == "int_type"
            and isinstance(error.get("input"), float)
            and not math.isfinite(error["input"])
        )
    ):
        code = "P420"
        message = f"{where} is {short_repr(error.get('input'))}, not a finite number"
        hint = "Write a finite number here (.inf and .nan are YAML's infinity and not-a-number)."
    elif kind == "value_error" and isinstance(
        error.get("input"), dict
    ):  # a model's own check across its fields
        code = "P104"
        message = f"{where}: {_strip_value_error(error['msg'])}"
        hint = "Change the fields as the message says."
    elif kind == "value_error":  # a field's own check: a value out of range
        message = f"{where}: {_strip_value_error(error['msg'])}"
        hint = "Change the value as the message says."
    elif all(e["type"] in _TYPE_WORDS for e in errs):
        code = "P102"
        expected = " or ".join(dict.fromkeys(_TYPE_WORDS[e["type"]] for e in errs))
        message = f"{where} should be {expected}, not {short_repr(error.get('input'))}"
        hint = f"Write {expected} here."
        given = error.get("input")
        if leaf in _SHORTHAND and isinstance(given, str) and given.isidentifier():
            hint = f"Write `{leaf}: {{{_SHORTHAND[leaf]}: {given}}}`."
    else:
        message = f"{where}: {error['msg']} (got {short_repr(error.get('input'))})"
        hint = _range_hint(error, leaf)
        if leaf == "mode" and str(error.get("input")) in _FOREIGN_VALUES:
            hint = f"Write `mode: {_FOREIGN_VALUES[str(error.get('input'))]}` (planner's word)."
        if path == ("seeds",) and kind == "too_short":
            code, hint = (
                "P401",
                "Give at least 2 distinct confirmation seeds (5 or more is better).",
            )
        elif path == ("trainable",) and kind == "string_pattern_mismatch":
            code = "P500"
    return Diagnostic(
        code=code,
        severity="error",
        message=message,
        path=format_path(path),
        file=loaded.file,
        line=line,
        column=column,
        hint=hint,
    )


def _strip_value_error(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def _range_hint(error: ErrorDetails, leaf: Any) -> str:
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind == "literal_error":
        return f"Use one of {ctx.get('expected')}."
    if kind == "string_pattern_mismatch":
        return _PATTERN_HINTS.get(
            str(leaf), "Write a dotted config path like `optimizer.lr` or a plain name."
        )
    bounds = {
        "greater_than": ">",
        "greater_than_equal": ">=",
        "less_than": "<",
        "less_than_equal": "<=",
    }
    if kind in bounds and (
        leaf == "seed" or (isinstance(leaf, int) and error["loc"][-2:-1] == ("seeds",))
    ):
        return f"A seed is a whole number from {SEED_RANGE}."
    if kind in bounds:
        limit = next(iter(ctx.values()), "")
        return f"Use a value {bounds[kind]} {limit}."
    if kind == "too_short":
        return f"Give at least {ctx.get('min_length')} item(s)."
    if kind == "too_long":
        return f"Give at most {ctx.get('max_length')} item(s)."
    if kind == "string_too_short":
        return "Write a non-empty value."
    return "Change the value to what the message asks for."


def allowed_keys(path: tuple[Any, ...]) -> list[str]:
    """The keys the contract model accepts at `path` ([] when it is not a model there)."""
    t: Any = Contract
    for part in path:
        t = _child_type(t, part)
        if t is None:
            return []
    t = _unwrap(t)
    if isinstance(t, type) and issubclass(t, BaseModel):
        return [field.alias or name for name, field in t.model_fields.items()]
    return []


def _unwrap(t: Any) -> Any:
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(t) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            t = models[0] if models else args[0]
        else:
            return t


def _child_type(t: Any, part: Any) -> Any:
    t = _unwrap(t)
    if isinstance(t, type) and issubclass(t, BaseModel):
        for name, field in t.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return None
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (list, tuple) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None
