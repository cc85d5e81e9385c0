"""What an argparse script accepts, read from its own `--help` (`command.args: argparse`).

`plan validate` and `plan run` run the command once with `--help` (no shell, in the contract's
folder, a few seconds at most) and read the options section argparse prints: each option string,
and whether it takes a value. HfArgumentParser is argparse underneath and prints the same. The
flags a trial gets are written from this (planner._trial.command_args): a boolean as the script's
own `--flag`/`--no-flag` when it has that pair (`BooleanOptionalAction`), else `--flag=true|false`
when the option takes a value (HfArgumentParser's booleans), else `--flag` alone for true
(`store_true`).

A script whose `--help` cannot be read (it needs a GPU to start, it takes long to import, it is not
argparse) has its options read from its source instead (planner._contract.command_source), when
that is unambiguous; else it gets no name check: `read_help` says why, and the flags are written
without it.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._contract.paths import flatten, hydra_calls
from planner._core.errors import CommandFailedError
from planner._core.lazy import lazy_import

# only `read_help` runs a script: `plan validate` of a contract without `command.args: argparse`
# never loads the supervisor (psutil, ctypes) or subprocess, which would slow its start-up
subprocess = lazy_import("subprocess")
supervisor = lazy_import("planner._core.supervisor")
shlex = lazy_import("shlex")  # a `command:` line's words: a `trainable:` contract has none

HELP_TIMEOUT_S = 5.0
HELP_GRACE_S = 2.0  # from SIGTERM to SIGKILL, for what the script left running once it ends
SWITCH, VALUE, OPTIONAL = (
    "switch",
    "value",
    "optional",
)  # takes no value; takes one or more; takes one or none

_OPTION_LINE = re.compile(r"^\s{1,8}(-\S.*)$")

# the one Hydra key an argparse script's config may name: planner fills it
OUTPUT_DIR = "${hydra:runtime.output_dir}"


def command_argv(command: str | Sequence[str]) -> list[str]:
    """`shlex.split(command)`, with a leading `python`/`python3` made the planner's own
    interpreter."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as error:  # an unbalanced quote
            raise CommandFailedError(
                f"the command {command!r} does not parse: {error}; quote as in a shell"
            ) from None
    else:
        argv = [str(part) for part in command]
    if not argv:
        raise CommandFailedError("the command is empty; write one like `python train.py`")
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def flag_leaves(config: dict[str, Any]) -> list[tuple[str, Any]]:
    """The leaves of `config` that become flags, by dotted path: a null, an empty list or an empty
    mapping is left out (the script's own default applies)."""
    return [
        (path, value)
        for path, value in flatten(config).items()
        if value is not None and value != [] and value != {}
    ]


def unfit_for_flags(value: Any) -> str | None:
    """Why `value` cannot be written as a flag's value(s), or None: a mapping inside a list, or a
    `${hydra:...}` other than `${hydra:runtime.output_dir}` (no Hydra runs an argparse script)."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, dict | list):
            return "a list holding mappings or lists, which argparse flags cannot carry"
        if isinstance(item, str) and hydra_calls(item.replace(OUTPUT_DIR, "")):
            return (
                f"{item!r}: of Hydra's keys only {OUTPUT_DIR} means something to an argparse "
                f"script "
                "(the trial's output folder)"
            )
    return None


@dataclass(frozen=True)
class ScriptHelp:
    """The options of an argparse script: option string (`--optimizer.lr`) -> SWITCH | VALUE |
    OPTIONAL; `read_from` says where they were read when not from its `--help`
    (planner._contract.command_source)."""

    options: dict[str, str] = field(default_factory=dict)
    read_from: str = ""

    def kind(self, key: str) -> str | None:
        return self.options.get(f"--{key}")

    def negation(self, key: str) -> str | None:
        """The script's `--no-key` (or HfArgumentParser's `--no_key`) switch, when it has one."""
        for option in (f"--no-{key}", f"--no_{key}"):
            if self.options.get(option) == SWITCH:
                return option
        return None

    def near(self, key: str) -> str | None:
        import difflib

        found = difflib.get_close_matches(f"--{key}", sorted(self.options), n=1, cutoff=0.7)
        return found[0] if found else None

    def to_dict(self) -> dict[str, str]:
        return dict(self.options)


def parse_help(text: str) -> ScriptHelp:
    """The options argparse lists in `text` (the output of `--help`); empty when it lists none."""
    options: dict[str, str] = {}
    for line in text.splitlines():
        match = _OPTION_LINE.match(line)
        if not match:
            continue
        invocation = re.split(r"\s{2,}", match.group(1).rstrip(), maxsplit=1)[0]
        for part in invocation.split(", "):
            name, _, metavar = part.strip().partition(" ")
            if not name.startswith("-") or not re.fullmatch(r"-{1,2}[^\s=,]+", name):
                break  # not an option line after all (a wrapped help text that starts with a dash)
            metavar = metavar.strip()
            options[name] = (
                SWITCH if not metavar else OPTIONAL if metavar.startswith("[") else VALUE
            )
    return ScriptHelp(options)


def read_help(
    argv: Sequence[str], cwd: str | os.PathLike, timeout_s: float = HELP_TIMEOUT_S
) -> tuple[ScriptHelp | None, str]:
    """(the script's options, "") from running `argv --help`, or (None, why it could not be read).

    The script runs under planner's supervisor, as a trial does: whatever it starts (a daemon at
    its top level, a `setsid` child) ends with it, also when it is killed for taking too long."""
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-P",
                supervisor.__file__,
                str(write_end),
                repr(HELP_GRACE_S),
                str(os.getpid()),
                "--",
                *argv,
                "--help",
            ],
            cwd=Path(cwd),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=False,
            pass_fds=(write_end,),
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(argv)} --help` took over {timeout_s:g} s"
    except OSError as error:
        return None, f"`{' '.join(argv)} --help` did not start: {error.strerror or error}"
    finally:
        os.close(write_end)
        said = _drain(read_end)
    if said.get("error"):  # the supervisor could not start the script
        return None, f"`{' '.join(argv)} --help` did not start: {said['error']}"
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        return (
            None,
            f"`{' '.join(argv)} --help` exited with status {done.returncode} ({last[0][:200]})",
        )
    found = parse_help(done.stdout)
    if not found.options:
        return None, f"`{' '.join(argv)} --help` printed no argparse options"
    return found, ""


def _drain(fd: int) -> dict:
    """What the supervisor said on its status pipe (each line a JSON object, merged), the pipe
    closed."""
    data = b""
    try:
        os.set_blocking(fd, False)
        while chunk := os.read(fd, 65536):
            data += chunk
    except (
        BlockingIOError
    ):  # a killed relay's supervisor may still hold the pipe: what is there is enough
        pass
    finally:
        os.close(fd)
    said: dict = {}
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            said.update(value)
    return said


def literal_text(value: Any) -> str:
    """`value` as the text whose `ast.literal_eval` gives it back, or, for a string that
    `literal_eval` does not read, the string itself (what a configurator falls back to); ValueError
    for a NaN or a value that has no Python literal."""
    if isinstance(value, str):
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return value  # not a literal: the script keeps the text as it is
        return repr(value)
    return _literal(value)


def _literal(value: Any) -> str:
    if value is None or isinstance(value, bool | int | str):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("NaN has no Python literal a script's ast.literal_eval reads")
        if math.isinf(value):
            return "1e999" if value > 0 else "-1e999"
        return repr(value)
    if isinstance(value, list | tuple):
        items = ", ".join(_literal(item) for item in value)
        return (
            f"({items}{',' if len(value) == 1 else ''})"
            if isinstance(value, tuple)
            else f"[{items}]"
        )
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"{value!r} has no Python literal a script's ast.literal_eval reads")


def flatten_leaves(config: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of `config` by dotted path, nulls and empty lists included (a literal carries
    them)."""
    out: list[tuple[str, Any]] = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += flatten_leaves(value, f"{path}.")
        else:
            out.append((path, value))
    return out
