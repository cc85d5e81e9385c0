"""A trial's config as flags: argparse's (`command.args: argparse`), for a script that takes `--key
value`, or Python literals (`args: literal`), for a script that reads `--key=value` with
`ast.literal_eval` (nanoGPT's configurator, a plain `sys.argv` loop).

`args: literal` writes each leaf as one `--key=value`, the value as a Python literal the script's
`ast.literal_eval` reads back: `True`, `False`, `None`, numbers as `repr` writes them (infinity as
`1e999`), lists and mappings as Python writes them (their strings quoted); a string bare where
`literal_eval` would not read it (`adamw`, `out-dir`: the script then takes the text as it is),
quoted with `repr` where it would read it as something else (`'3'`, `'True'`, `' x'`). A NaN has no
literal and is refused. Nothing is left out: a null is `None`, an empty list `[]`.

Every leaf of the config the trial receives becomes one flag, in the config's order: the seed and
the budget included (they are in that config when `seed_key` / `budget_key` name them).

- the name is the dotted path: `--optimizer.lr` (argparse keeps the dots in `dest`);
- a scalar is `--key=value` (one argv item: a value that starts with `-` is not read as an option);
  a float in Python's `repr`, an int as digits, a string as it is (no shell: nothing to quote);
- a boolean is the script's own `--key` / `--no-key` when its `--help` shows that pair
  (`BooleanOptionalAction`), `--key=true|false` when the option takes a value (HfArgumentParser),
  `--key` alone for true (a `store_true` switch; false leaves it out), and `--key=true|false` when
  the `--help` could not be read;
- a list is `--key v1 v2 ...` (`nargs="+"` or `"*"`);
- a null, an empty list and an empty mapping are left out: the script's default applies;
- `${hydra:runtime.output_dir}` in a value is the trial's output folder (`<attempt>/hydra`, where
  `metrics.file` is read), as it is for a Hydra app.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner._contract.command_help import (
    OUTPUT_DIR,
    SWITCH,
    ScriptHelp,
    flag_leaves,
    flatten_leaves,
    literal_text,
    unfit_for_flags,
)
from planner._core.errors import CommandFailedError
from planner._trial.command_line import number_text


def argparse_flags(
    config: Mapping[str, Any], help: ScriptHelp | None, output_dir: Path
) -> list[str]:
    """The argv items that pass `config` to an argparse script (the module's rules)."""
    out: list[str] = []
    for key, value in flag_leaves(dict(config)):
        why = unfit_for_flags(value)
        if why is not None:
            raise CommandFailedError(f"config key {key!r} cannot be passed as a flag: {why}")
        if isinstance(value, bool):
            out += _boolean(key, value, help)
        elif isinstance(value, list):
            out += [f"--{key}", *(flag_value(item, output_dir) for item in value)]
        else:
            out.append(f"--{key}={flag_value(value, output_dir)}")
    return out


def _boolean(key: str, value: bool, help: ScriptHelp | None) -> list[str]:
    if help is not None and help.kind(key) == SWITCH:
        negation = help.negation(key)
        if value:
            return [f"--{key}"]
        return [negation] if negation else []
    return [f"--{key}={'true' if value else 'false'}"]


def flag_value(value: Any, output_dir: Path) -> str:
    """One value as the script's argparse `type` reads it back: `0.001`, `3`, `adam`, `true`."""
    number = number_text(value)
    if number is not None:
        return number
    return str(value).replace(OUTPUT_DIR, str(output_dir))


def literal_flags(config: Mapping[str, Any], output_dir: Path) -> list[str]:
    """The argv items that pass `config` to a script reading `--key=value` with `ast.literal_eval`:
    one per leaf (nested keys joined with `.`), values as `literal_text` writes them."""
    out = []
    for key, value in flatten_leaves(dict(config)):
        if isinstance(value, str):
            value = value.replace(OUTPUT_DIR, str(output_dir))
        out.append(f"--{key}={literal_text(value)}")
    return out
