"""The command line of one run of a `command:` trainable: the command split into argv, then the
trial's values in Hydra's override grammar.

- `command_argv` (from planner._contract.command_help, which `plan validate` shares):
  `shlex.split(command)` (no shell); a leading `python`/`python3` is the interpreter running the
  planner.
- `overrides_for`: the arm's overrides as written in the contract, then sampled
  values as `key=value`; `config_changes_as_overrides`: the overrides that turn
  an arm's composed config into a trial's (`+key=value` for a new leaf, `~key`
  for one that is gone).
- `format_override_value`: a value written so that the Hydra app receives it
  back unchanged (Hydra's override parser, then OmegaConf).
- `hydra_run_dir_override`: the override that puts Hydra's outputs in the attempt's folder.
- `checkpoint_override`: `KEY=<path>`, the checkpoint a cut-short trial continues from.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from planner._contract.command_help import command_argv  # noqa: F401 - where the adapter takes it from
from planner._contract.paths import MISSING, config_diff, hydra_calls

_PLAIN_STRING = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_\-./]*\Z"
)  # \Z: `$` also matches before a final newline
_GRAMMAR_WORDS = {"true", "false", "null", "nan", "inf", "+inf", "-inf"}


def format_override_value(value: Any) -> str:
    """A value written in Hydra's override grammar, so that the script receives `value` back.

    Strings are quoted unless plainly safe (`adam`, `relu`); quotes, backslashes
    before quotes, and `${` (which OmegaConf would read as an interpolation)
    are escaped. Lists and dicts are written element by element.
    """
    if hasattr(value, "item") and not isinstance(value, str | bytes | list | tuple | dict):
        value = value.item()  # numpy scalars
    if value is None:
        return "null"
    number = number_text(value)
    if number is not None:
        return number
    if isinstance(value, str):
        if _PLAIN_STRING.match(value) and value.lower() not in _GRAMMAR_WORDS:
            return value
        return _quote(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(format_override_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not (isinstance(key, str) and _PLAIN_STRING.match(key)):
                raise ValueError(
                    f"cannot write the mapping key {key!r} as a Hydra override; keys must be "
                    f"identifiers"
                )
            items.append(f"{key}:{format_override_value(item)}")
        return "{" + ",".join(items) + "}"
    raise ValueError(f"cannot write a {type(value).__name__} ({value!r}) as a Hydra override value")


def number_text(value: Any) -> str | None:
    """A bool, int or float as both Hydra's grammar and argparse's `type=` read it back (`true`,
    `3`, `0.001`, `nan`, `-inf`); None for anything else."""
    if hasattr(value, "item") and not isinstance(value, str | bytes | list | tuple | dict):
        value = value.item()  # numpy scalars
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return "nan"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return repr(number)
    return None


def _quote(text: str, keep: Sequence[tuple[int, int]] = ()) -> str:
    # OmegaConf: a literal `${` is written `\${`, and backslashes right before it doubled; the
    # spans in `keep` (Hydra's own `${hydra:...}` calls) stay interpolations, for the app's Hydra
    # to resolve.
    pieces, at = [], 0
    for start, end in keep:
        pieces += [_escape_interpolations(text[at:start]), text[start:end]]
        at = end
    text = "".join(pieces) + _escape_interpolations(text[at:])
    # Hydra's quoted strings: backslashes right before a quote (or the closing one) doubled.
    text = re.sub(r"(\\+)(?='|\Z)", lambda m: m.group(1) * 2, text)
    return "'" + text.replace("'", "\\'") + "'"


def _escape_interpolations(text: str) -> str:
    return re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", text)


def overrides_for(
    arm_overrides: Sequence[str], params: Mapping[str, Any] | None = None
) -> list[str]:
    """The argv overrides for one trial: the arm's overrides (config.overrides, then the
    arm's own) as written in the contract, then each sampled value as `key=value`.

    Hydra applies the last value given for a key, so a sampled value wins over an
    arm's fixed one.
    """
    out = [str(item) for item in arm_overrides]
    for key, value in (params or {}).items():
        out.append(f"{key}={format_override_value(value)}")
    return out


def config_changes_as_overrides(
    arm_config: Mapping[str, Any], trial_config: Mapping[str, Any]
) -> list[str]:
    """Overrides that turn the arm's composed config into the trial's config.

    The trainable receives the effective config with the sampled tuning values
    applied; the difference from the arm's config is exactly those values. A
    leaf that is new is written `+key=value`, one that is gone `~key`.
    """
    out = []
    for path, before, after in config_diff(dict(arm_config), dict(trial_config)):
        if after is MISSING:
            out.append(f"~{path}")
        else:
            out.append(f"{'+' if before is MISSING else ''}{path}={_changed_value(after)}")
    return out


def _changed_value(value: Any) -> str:
    """A changed leaf as an override; a text holding `${hydra:...}`
    (`${hydra:runtime.output_dir}/s3`, a key that interpolates Hydra's resolver and the seed) keeps
    those calls, as the composed config does."""
    calls = hydra_calls(value) if isinstance(value, str) else None
    return _quote(value, calls) if calls else format_override_value(value)


def hydra_run_dir_override(folder: Path) -> str:
    """The override that makes Hydra write its outputs (`.hydra/`, its job log) in `folder`."""
    return f"hydra.run.dir={format_override_value(str(folder))}"


def checkpoint_override(key: str, value: Any) -> list[str]:
    """The command-line items that hand the script what it continues from: `KEY=<path>` (or a resume
    flag's value) in Hydra's grammar (the one place a command line of another grammar changes)."""
    return [f"{key}={format_override_value(str(value) if isinstance(value, Path) else value)}"]
