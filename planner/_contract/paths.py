"""Dotted paths in a config: the one flatten, the one diff, get and set.

A config is what Hydra composes for an arm, as plain data (mappings, lists,
scalars). A leaf is named by its dotted path, `model.dropout`, `layers.0`.
Every part of planner that flattens or compares configs goes through here:
the matching rules and `plan validate`'s config diff, the report's config
diff, the resume check, the command trainable's config check, the params
columns of `load_run` and the MLflow params.

The policy, the same for every caller:

- `flatten`: mappings are walked, every other value is a leaf; a list is one
  leaf, kept whole. An empty mapping below the root is a leaf of its own
  (value `{}`), so `a: {}` is not the same config as no `a`. The root is not a
  path: `flatten({})` is `{}`, and a root that is not a mapping has no leaves.
- `config_diff`: the leaves where two configs differ, finer than comparing
  the flattened leaves: it walks mappings and also lists of equal length (so
  `layers.0` can be a factor key); lists of different lengths are one leaf. A
  key on one side only gives that side's leaves under it, the other side
  `MISSING`, so deleting `model.dropout` changes `model.dropout` and not also
  `model`. Two values differ when they are unequal or of different types
  (`1`, `1.0` and `True` are three configs).
"""

from __future__ import annotations

import copy
from typing import Any

from planner._core.lazy import lazy_import
from planner._core.text import yaml_value

omegaconf = lazy_import(
    "omegaconf"
)  # only apply_params needs it: `plan status` reads contracts without it


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


MISSING = _Missing()


def flatten(config: Any, prefix: str = "", *, into_lists: bool = False) -> dict[str, Any]:
    """{"a": {"b": 1}, "c": [1, 2], "d": {}} -> {"a.b": 1, "c": [1, 2], "d": {}}: leaves by dotted
    path.

    `into_lists`: walk non-empty lists too (`c.0`, `c.1`), to find every scalar of a config.
    """
    if (
        not prefix
        and type(config) is dict
        and not into_lists
        and all(type(k) is str and k and not (isinstance(v, dict) and v) for k, v in config.items())
    ):
        return dict(
            config
        )  # flat already (a trial's params, 10,000 of them in a report): each leaf its own key
    if isinstance(config, dict) and config:
        items = [(str(k), v) for k, v in config.items()]
    elif into_lists and isinstance(config, list) and config:
        items = [(str(i), v) for i, v in enumerate(config)]
    else:
        return {prefix: config} if prefix else {}
    out: dict[str, Any] = {}
    for k, v in items:
        out.update(flatten(v, f"{prefix}.{k}" if prefix else k, into_lists=into_lists))
    return out


def is_interpolation(value: Any) -> bool:
    """Whether `value` is a string that holds an OmegaConf interpolation (`${...}`, as OmegaConf
    tells one)."""
    return isinstance(value, str) and "${" in value


def interpolated_paths(config: Any) -> set[str]:
    """The dotted paths of `config`'s leaves that are interpolations, list items included (`lrs.0`,
    as `config_diff` names them): derived from other keys, not chosen."""
    return {
        path for path, value in flatten(config, into_lists=True).items() if is_interpolation(value)
    }


def config_diff(base: Any, other: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Where `other` differs from `base`: (dotted path, base value, other value), a missing side
    `MISSING`."""
    if isinstance(base, dict) and isinstance(other, dict):
        changes = []
        for key in sorted(set(base) | set(other), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in other:
                changes += [(p, v, MISSING) for p, v in flatten(base[key], path).items()]
            elif key not in base:
                changes += [(p, MISSING, v) for p, v in flatten(other[key], path).items()]
            else:
                changes += config_diff(base[key], other[key], path)
        return changes
    if isinstance(base, list) and isinstance(other, list) and len(base) == len(other):
        changes = []
        for i, (a, b) in enumerate(zip(base, other, strict=True)):
            changes += config_diff(a, b, f"{prefix}.{i}" if prefix else str(i))
        return changes
    if base != other or type(base) is not type(other):
        return [(prefix, base, other)]
    return []


def diff_rows(base: dict[str, Any], other: dict[str, Any]) -> list[dict[str, Any]]:
    """`config_diff` as JSON rows: {path, baseline, arm, change: added|removed|changed}, an absent
    side None."""
    return [
        {
            "path": path,
            "baseline": None if a is MISSING else a,
            "arm": None if b is MISSING else b,
            "change": "added" if a is MISSING else "removed" if b is MISSING else "changed",
        }
        for path, a, b in config_diff(base, other)
    ]


def shown_side(row: dict[str, Any], side: str) -> str:
    """One side ('baseline' or 'arm') of a `diff_rows` row as shown to the user: YAML-style, or
    <absent>."""
    absent = {"baseline": "added", "arm": "removed"}[side]
    return "<absent>" if row["change"] == absent else yaml_value(row[side])


def apply_params(
    config: dict[str, Any], params: dict[str, Any], raw: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A copy of `config` with dotted-path values set (the sampled tuning values), resolved.

    raw: the same config before its interpolations were resolved (`ComposedArms.raw`). The values
    are set there first and the interpolations resolved after, as Hydra does with command-line
    overrides: with `sched: {peak_lr: ${optim.lr}}`, a sampled `optim.lr` reaches `sched.peak_lr`
    too. Setting a key that is itself an interpolation replaces the interpolation. Without `raw` (a
    config that has no interpolations), the values are set on `config` as it is.
    """
    plain = _set_plainly(raw, params) if raw is not None and params else None
    if plain is not None:
        return plain
    if raw is not None and params:
        cfg = omegaconf.OmegaConf.create(_hydra_calls_escaped(copy.deepcopy(raw)))
        for path, value in params.items():
            omegaconf.OmegaConf.update(cfg, path, _literal(value), merge=False, force_add=True)
        return omegaconf.OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    out = copy.deepcopy(config)
    for path, value in params.items():
        node = out
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _set_plainly(raw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any] | None:
    """`raw` with `params` set as plain items, when that gives what OmegaConf's update and resolve
    give (no OmegaConf config built for every trial): no interpolation and no `???` anywhere,
    string keys only, and every path through mappings or keys not there yet; else None."""
    stack: list[Any] = [raw]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if not all(isinstance(key, str) for key in node):
                return None
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and ("${" in node or node == omegaconf.MISSING):
            return None
    out = copy.deepcopy(raw)
    for path, value in params.items():
        if "[" in path:
            return None
        node = out
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return None
        node[leaf] = value
    return out


def resolve(container: Any, *, throw_on_missing: bool = True) -> Any:
    """A plain config with its interpolations resolved by OmegaConf, `${hydra:...}` left as written.

    Hydra's own resolver reads the running app's Hydra config (`hydra.runtime.output_dir`), which
    exists only in the script, at run time: planner keeps the interpolation's text, as the app's
    saved `.hydra/config.yaml` does.
    """
    cfg = omegaconf.OmegaConf.create(_hydra_calls_escaped(copy.deepcopy(container)))
    return omegaconf.OmegaConf.to_container(cfg, resolve=True, throw_on_missing=throw_on_missing)


HYDRA_RESOLVER = "hydra"


def hydra_calls(text: str) -> list[tuple[int, int]] | None:
    """Where `text` calls Hydra's own resolver: the (start, end) offsets of its `${hydra:...}`
    interpolations, `text[start:end]` each ([] for none).

    Read on OmegaConf's parse tree of the value (omegaconf.grammar_parser). None when `text` calls
    any other resolver (by any spelling), when a `hydra` call stands inside another interpolation
    or takes one in its argument (`${${hydra:x}}`, `${hydra:${x}}`), or when `text` does not parse:
    what only OmegaConf could decide is never let through.
    """
    if "${" not in text:
        return []
    from omegaconf import grammar_parser
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser as Grammar

    try:
        tree = grammar_parser.parse(text)
    except Exception:  # GrammarParseError: no such text is a config value OmegaConf would resolve
        return None
    found: list[tuple[int, int]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Grammar.InterpolationResolverContext):
            if node.resolverName().getText() != HYDRA_RESOLVER or _inside_interpolation(
                node, Grammar
            ):
                return None
            arguments = node.sequence()
            if arguments is not None and "${" in arguments.getText():
                return None
            found.append((node.start.start, node.stop.stop + 1))
            continue
        stack.extend(getattr(node, "children", None) or [])
    return sorted(found)


def _inside_interpolation(node: Any, grammar: Any) -> bool:
    parent = node.parentCtx
    while parent is not None:
        if isinstance(
            parent, grammar.InterpolationResolverContext | grammar.InterpolationNodeContext
        ):
            return True
        parent = parent.parentCtx
    return False


def _hydra_calls_escaped(node: Any) -> Any:
    """`node` with each `${hydra:...}` escaped (`\\${hydra:...}`), so OmegaConf resolves it to its
    own text."""
    if isinstance(node, dict):
        return {key: _hydra_calls_escaped(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_hydra_calls_escaped(value) for value in node]
    if is_interpolation(node):
        for offset, _ in reversed(hydra_calls(node) or []):
            node = node[:offset] + "\\" + node[offset:]
    return node


def _literal(value: Any) -> Any:
    """A sampled string is a value, never an interpolation: '${x}' is escaped to stay as written."""
    if is_interpolation(value):
        return value.replace("${", "\\${")
    return value


def get_path(config: Any, path: str, default: Any = MISSING) -> Any:
    """The value at a dotted path (through mappings and list indices), else `default`."""
    node: Any = config
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node
