"""The rules for `command:` in its mapping form: seed and budget keys, the metrics file, the
checkpoints, an argparse script's flags, the program it runs (P520-P532, P940, P941).

`seed_key`, `budget_key` and `checkpoint.resume_key` are config paths the
planner sets through Hydra overrides for a trial, so each must be a plain
value in every arm's composed config, and none may be something the
experiment compares or tunes: the factor sets it per arm, the tuning space per
trial, and the planner's seed, budget or checkpoint would silently overwrite
them (or they the seed).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from planner._contract.command_help import (
    OUTPUT_DIR,
    SWITCH,
    ScriptHelp,
    command_argv,
    flag_leaves,
    flatten_leaves,
    literal_text,
    unfit_for_flags,
)
from planner._contract.command_source import (
    options_in_tree,
    script_file,
    script_options,
    script_tree,
    top_level_imports,
)
from planner._contract.compose import ComposedArms
from planner._contract.load import LoadedYaml
from planner._contract.paths import MISSING, apply_params, get_path
from planner._contract.rules import _inside, _Report
from planner._core.diagnostics import Diagnostic, short_repr
from planner._core.errors import CommandFailedError
from planner._core.lazy import lazy_import

difflib = lazy_import(
    "difflib"
)  # the did-you-mean hints: only a contract with a mistake needs them


def check_program(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """P532: the command's program is not on the PATH (a name without a slash) or not a file (a
    path), or the script it runs (`python train.py`) is not there: every trial would fail at its
    start. P944: that script reads argparse flags and the contract does not say `args: argparse`."""
    if contract.command is None:
        return []
    report = _Report(loaded)
    where = ("command", "run") if ("command", "run") in loaded.positions else ("command",)
    command_dir = contract.command_dir(Path(loaded.file).resolve().parent)
    try:
        argv = command_argv(contract.command_line)
    except (CommandFailedError, ValueError):
        return []  # a command line that does not split is the schema's to say
    if not argv:
        return []
    program = argv[0]
    # a name without a slash is looked for on the PATH only (as the trial's process is started:
    # posix_spawnp)
    found = (
        (command_dir / program).is_file()
        if ("/" in program or os.sep in program)
        else shutil.which(program) is not None
    )
    if not found:
        here = "/" not in program and (command_dir / program).is_file()
        report.add(
            "P532",
            where,
            f"the command's program {program!r} is not "
            + (
                f"on the PATH (it is a file in {command_dir}, but a name without a slash is "
                "looked for on the PATH only)"
                if here
                else f"on the PATH nor a file in {command_dir}"
            )
            + ": every trial would fail to start",
            f"Write ./{program}."
            if here
            else "Install it, or name it as plan run finds it (an absolute path, or python with "
            "the script).",
        )
        return report.items
    script = script_file(argv)
    if script is not None and not (command_dir / script).is_file():
        report.add(
            "P532",
            where,
            f"the command runs {script!r}, which is not a file in {command_dir} (the folder "
            "the command runs in): every trial would fail at its start",
            "Name the script by its path from the contract's folder, or set command.cwd to its "
            "folder.",
        )
    elif script is not None and _argparse_not_said(contract, command_dir / script, script):
        report.add(
            "P944",
            where,
            f"{script} reads its command line with argparse (an ArgumentParser and its "
            "add_argument calls, no Hydra), but the command passes each trial's config as "
            "Hydra overrides (key=value), which argparse refuses: every trial would fail",
            "Write the command as a mapping with `args: argparse` (each config key then goes as "
            "--key value), or make the script a Hydra app.",
            severity="warning",
        )
    return report.items


def _argparse_not_said(contract, path: Path, shown: str) -> bool:
    """Whether the command's script is an argparse one (its source's add_argument calls read, no
    Hydra import) while the contract does not say `args: argparse`."""
    spec = contract.command
    if not isinstance(spec, str) and spec.args != "hydra":
        return False
    tree, _ = script_tree(path, shown)  # read and parsed once, for its options and its imports
    return (
        tree is not None
        and options_in_tree(tree, shown)[0] is not None
        and "hydra" not in top_level_imports(tree)
    )


def check_command(contract, loaded: LoadedYaml, composed: ComposedArms | None) -> list[Diagnostic]:
    """Diagnostics for `command: {run, seed_key, budget_key, metrics}`; [] for the string form."""
    spec = contract.command
    if spec is None or isinstance(spec, str):
        return []
    report = _Report(loaded)
    resume_key = spec.checkpoint.resume_key if spec.checkpoint is not None else None
    folder_key = spec.checkpoint.folder_key if spec.checkpoint is not None else None
    keys = [
        (role, key)
        for role, key in (
            ("seed_key", spec.seed_key),
            ("budget_key", spec.budget_key),
            ("resume_key", resume_key),
            ("folder_key", folder_key),
        )
        if key
    ]
    if spec.seed_key and spec.seed_key == spec.budget_key:
        report.add(
            "P524",
            ("command", "budget_key"),
            f"seed_key and budget_key are the same key {spec.seed_key!r}",
            "Name the config key the app reads its seed from, and the one it reads its epochs or "
            "steps from.",
        )
    if resume_key and resume_key in (spec.seed_key, spec.budget_key):
        report.add(
            "P524",
            ("command", "checkpoint", "resume_key"),
            f"checkpoint.resume_key {resume_key!r} is also the seed_key or budget_key",
            "Name the config key the app reads the checkpoint to resume from, like ckpt_path.",
        )
    configs = composed.configs if composed is not None and not composed.problems else {}
    for role, key in keys:
        _check_key(report, contract, configs, role, key)
    if spec.metrics is not None:
        _check_metrics(report, contract, spec.metrics)
    if spec.checkpoint is not None:
        _check_inside(
            report,
            ("command", "checkpoint", "file"),
            "P528",
            "checkpoint.file",
            spec.checkpoint.file,
            "like checkpoints/*.ckpt or hf/checkpoint-*",
        )
    return report.items


def check_flags(
    contract, loaded: LoadedYaml, composed: ComposedArms | None
) -> tuple[list[Diagnostic], str | None, tuple[ScriptHelp | None, str] | None]:
    """`args: argparse`: the diagnostics of the flags a trial passes (P530, P531, P941), how their
    names were checked, as the summary says it, and what `script_options` answered (None and None
    for a contract without `args: argparse`, or with no configs): `plan run` hands that answer to
    the trainable, so the script's `--help` (seconds, for a script that imports torch first) runs
    once, not again in the driver."""
    spec = contract.command
    configs = composed.configs if composed is not None and not composed.problems else {}
    if spec is None or isinstance(spec, str) or spec.args == "hydra" or not configs:
        return [], None, None
    report = _Report(loaded)
    if spec.args == "literal":
        command_dir = contract.command_dir(Path(loaded.file).resolve().parent)
        _check_literal_names(report, contract, configs, command_dir)
        return report.items, _literal_line(report, contract, configs), None
    how, found = _check_flags(
        report, contract, configs, contract.command_dir(Path(loaded.file).resolve().parent)
    )
    return report.items, how, found


def _literal_line(report: _Report, contract, configs: dict[str, dict]) -> str:
    """`args: literal`: every value has a Python literal (P531), and the first trial's command line
    as it will run (its flags written as the trial writes them), for the summary."""
    for arm, config in configs.items():
        values = [(f"config key {key!r}", value) for key, value in flatten_leaves(config)]
        space = contract.tuning.space_for(arm) if contract.tuning is not None else {}
        values += [  # every option of a tuned choice may be drawn, and is then a flag too
            (f"tuning key {key!r}", option)
            for key, dim in space.items()
            if dim.kind == "choice"
            for option in dim.bounds
        ]
        for what, value in values:
            why = unfit_for_flags(value)
            if why is None:
                try:
                    literal_text(value)
                except ValueError as error:
                    why = str(error)
            if why is not None:
                report.add(
                    "P531",
                    ("command", "args"),
                    f"{what} of arm {arm!r} cannot be passed as a flag: {why}",
                    "Give the key a value Python's ast.literal_eval reads (a number, a string, "
                    "true/false, null, a list), or remove it from the contract's config (or its "
                    "options from tuning.space).",
                )
                return "written as Python literals (--key=value)"
    arm = contract.baseline.name if contract.baseline.name in configs else next(iter(configs))
    seeds = contract.tuning.seeds if contract.tuning is not None else contract.seeds
    fixed = {}
    if contract.command_spec.seed_key and seeds:
        fixed[contract.command_spec.seed_key] = int(seeds[0])
    if contract.command_spec.budget_key:
        fixed[contract.command_spec.budget_key] = int(contract.budget.exposure)
    tuned = {}
    if contract.tuning is not None:
        tuned = {key: _low_end(dim) for key, dim in contract.tuning.space_for(arm).items()}
    config = apply_params(dict(configs[arm]), {**fixed, **tuned})
    flags = [f"--{key}={literal_text(_shown(value))}" for key, value in flatten_leaves(config)]
    said = " (a tuned key at the low end of its space: each trial draws its own)" if tuned else ""
    return (
        f"written as Python literals (--key=value); the first trial runs{said}:\n"
        f"             {shlex.join([*command_argv(contract.command_line), *flags])}"
    )


def _low_end(dimension) -> Any:
    """A value of a tuned key's space, as a trial would receive one (a float for a float range):
    the low end of a range, the first option of a choice. The draws themselves are the sampler's,
    made as the run goes."""
    if dimension.kind == "choice":
        return dimension.bounds[0]
    low = dimension.bounds[0]
    return int(low) if dimension.kind == "int" else float(low)


def _shown(value: Any) -> Any:
    """A value as the first trial's command line shows it: the output folder as its place in a
    run."""
    return (
        value.replace(OUTPUT_DIR, "RUN/trials/ID/attempt-N/hydra")
        if isinstance(value, str)
        else value
    )


def _check_flags(
    report: _Report, contract, configs: dict[str, dict], command_dir: Path
) -> tuple[str, tuple[ScriptHelp | None, str]]:
    """Every config key a trial passes is a value a flag can carry (P531), and one of the script's
    options (P530), read from its `--help`, else from its source (planner._contract.command_source);
    else a note (P941). Returns how the names were checked, and the options read (or None) with
    why."""
    where = ("command", "args")
    keys: dict[str, Any] = {}
    for arm, config in configs.items():
        for key, value in flag_leaves(config):
            why = unfit_for_flags(value)
            if why is not None and key not in keys:
                report.add(
                    "P531",
                    where,
                    f"config key {key!r} of arm {arm!r} cannot be passed as a flag: {why}",
                    "Give the key a scalar or a list of scalars, or remove it from the contract's "
                    "config.",
                )
            keys.setdefault(key, value)
    if contract.tuning is not None:
        for space in (contract.tuning.space, *contract.tuning.arm_space.values()):
            for key in space:
                keys.setdefault(key, None)
    try:
        help, why = script_options(command_argv(contract.command_line), command_dir)
    except CommandFailedError as error:
        help, why = None, str(error)
    if help is None:
        report.add(
            "P941",
            where,
            f"the flag names are not checked against the script: {why}",
            "Make `<command> --help` print argparse's usage within a few seconds (import heavy "
            "libraries "
            "after parsing the arguments), or add the options with literal add_argument calls in "
            "the "
            "script's own file, or check the names yourself: each trial passes --<key>=<value>.",
            severity="warning",
        )
        return "not checked against its --help (P941)", (None, why)
    lists = (
        f"{help.read_from} do not add" if help.read_from else "the script's --help does not list"
    )
    for key, value in keys.items():
        kind = help.kind(key)
        place, on_key = _flag_place(report, contract, key, where)
        if kind is None and not (isinstance(value, bool) and help.negation(key)):
            near = help.near(key)
            report.add(
                "P530",
                place,
                f"config key {key!r} would be passed as --{key}, which {lists}"
                f"{f'; did you mean {near}?' if near else ''}",
                "Name the config key as the script's option (without the leading --), or add the "
                "option "
                "to the script's parser.",
                key=on_key,
            )
        elif kind == SWITCH and value is not None and not isinstance(value, bool):
            report.add(
                "P530",
                place,
                f"config key {key!r} holds {_short(value)}, but the script's --{key} is a "
                "switch that takes no value",
                "Give the key true or false, or make the option take a value.",
                key=on_key,
            )
    how = (
        f"checked against {help.read_from} ({why})"
        if help.read_from
        else "checked against its --help"
    )
    return how, (help, why)


def _flag_place(report: _Report, contract, key: str, where: tuple) -> tuple[tuple, bool]:
    """Where the contract names the config key `key` (its tuning dimension, or its line in
    `config.values`), and whether that place is a key; else `where` (a key from a config folder's
    files)."""
    tuning, written = contract.tuning, report.loaded.positions
    if tuning is not None and key in tuning.space:
        return ("tuning", "space", key), True
    for arm, space in tuning.arm_space.items() if tuning is not None else ():
        if key in space:
            return ("tuning", "arm_space", arm, key), True
    for depth in range(key.count(".") + 1, 0, -1):  # `optimiser: {lr: 0.1}` or `optimiser.lr: 0.1`
        parts = key.split(".")
        path = ("config", "values", *parts[: depth - 1], ".".join(parts[depth - 1 :]))
        if path in written:
            return path, True
    return where, False


_WHAT = {
    "seed_key": "seed",
    "budget_key": "budget",
    "resume_key": "checkpoint to resume from",
    "folder_key": "checkpoint folder",
}
_MISSING = {
    "seed_key": ("P520", "seed"),
    "budget_key": ("P521", "trainer.max_epochs"),
    "resume_key": ("P529", "ckpt_path"),
    "folder_key": ("P529", "out_dir"),
}


def _check_key(report: _Report, contract, configs: dict[str, dict], role: str, key: str) -> None:
    what = _WHAT[role]
    checkpoint_role = role in ("resume_key", "folder_key")
    where = ("command", "checkpoint", role) if checkpoint_role else ("command", role)
    label = f"checkpoint.{role}" if checkpoint_role else role
    factor = list(contract.factor.keys)
    if _inside(key, factor) or any(_inside(k, [key]) for k in factor):
        report.add(
            "P522",
            where,
            f"command.{label} {key!r} is inside factor.keys {factor}: the planner sets it "
            f"to the trial's {what}, which would overwrite what the arms compare",
            f"Point {role} at the key the app reads its {what} from, outside the factor.",
        )
    tuning = contract.tuning
    if tuning is not None:
        spaces = [("tuning.space", tuning.space)] + [
            (f"tuning.arm_space.{arm}", space) for arm, space in tuning.arm_space.items()
        ]
        for space_label, space in spaces:
            tuned = [k for k in space if _inside(k, [key]) or _inside(key, [k])]
            if tuned:
                report.add(
                    "P523",
                    where,
                    f"command.{label} {key!r} is tuned in {space_label} ({', '.join(tuned)}): "
                    f"the planner sets it to the trial's {what}, so the tuned value is lost",
                    f"Remove {', '.join(tuned)} from {space_label}, or point {role} at another "
                    f"key.",
                )
    for arm, config in configs.items():
        value = get_path(config, key)
        if value is MISSING:
            code, like = _MISSING[role]
            report.add(
                code,
                where,
                f"command.{label} {key!r} is not in arm {arm!r}'s composed config",
                f"Use the dotted path of the key the app reads its {what} from (as in the app's "
                f"config), "
                f"like {like}"
                + (" (null in the config: a fresh start)." if role == "resume_key" else "."),
            )
            return
        if checkpoint_role:
            if value is not None and not isinstance(value, str):
                report.add(
                    "P529",
                    where,
                    f"command.checkpoint.{role} {key!r} holds {_short(value)} in arm "
                    f"{arm!r}'s composed config; the planner sets it to a path",
                    f"Point {role} at a key holding null (a fresh start) or a path.",
                )
                return
            continue
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            report.add(
                "P527",
                where,
                f"command.{role} {key!r} holds {_short(value)} in arm {arm!r}'s composed "
                f"config; the planner sets it to an integer {what}",
                f"Point {role} at a key holding an integer (or null).",
            )
            return


def _check_inside(
    report: _Report, where: tuple[str, ...], code: str, label: str, file: str, like: str
) -> None:
    if (
        PurePosixPath(file).is_absolute()
        or PureWindowsPath(file).is_absolute()
        or ".." in PurePosixPath(file).parts
    ):
        report.add(
            code,
            where,
            f"{label} {file!r} is not inside the trial's Hydra output folder",
            f"Give a path or glob relative to the Hydra output folder, {like}.",
        )


def _check_pattern(report: _Report, contract, metrics) -> None:
    """`format: stdout`: the pattern compiles (P533) and has the step's group (P534) and a group for
    each metric read from it (P535): a line is a row of its named groups, so no other column can be
    read."""
    where = ("command", "metrics", "pattern")
    try:
        groups = set(re.compile(metrics.pattern).groupindex)
    except re.error as error:
        report.add(
            "P533",
            where,
            f"metrics.pattern {metrics.pattern!r} is not a regular expression: {error}",
            "Write it as Python's re module reads it (in YAML, in single quotes: "
            "'\\d+' is '\\d+').",
        )
        return
    if metrics.step not in groups:
        report.add(
            "P534",
            where,
            f"metrics.pattern {metrics.pattern!r} has no named group {metrics.step!r} for the step"
            + (
                f" (its groups: {', '.join(sorted(groups))})"
                if groups
                else " (it has no named group)"
            ),
            f"Capture the step as (?P<{metrics.step}>\\d+), like 'step (?P<step>\\d+):'.",
        )
    for name, column in metrics.columns(contract.metric.name, contract.metric.heldout).items():
        if column not in groups:
            report.add(
                "P535",
                where,
                f"metrics.pattern {metrics.pattern!r} has no named group {column!r} for the metric "
                f"{name!r}" + (f" (its groups: {', '.join(sorted(groups))})" if groups else ""),
                f"Capture the value as (?P<{column}>[-+.\\deE]+|nan|inf), or map the metric to "
                "one of its groups in metrics.names.",
            )


def _check_metrics(report: _Report, contract, metrics) -> None:
    if metrics.format == "stdout":
        _check_pattern(report, contract, metrics)
        return
    _check_inside(
        report,
        ("command", "metrics", "file"),
        "P526",
        "metrics.file",
        metrics.file,
        "like metrics.csv or lightning_logs/version_*/metrics.csv",
    )
    if metrics.heldout_file is not None:
        _check_inside(
            report,
            ("command", "metrics", "heldout_file"),
            "P526",
            "metrics.heldout_file",
            metrics.heldout_file,
            "like test_results.json or hf/test_results.json",
        )
        if not contract.metric.heldout:
            report.add(
                "P526",
                ("command", "metrics", "heldout_file"),
                "metrics.heldout_file is read only for the held-out metric, and the contract has "
                "no "
                "metric.heldout",
                "Set metric.heldout, or remove metrics.heldout_file.",
            )
    if metrics.names:
        wanted = [name for name in (contract.metric.name, contract.metric.heldout) if name]
        for name in wanted:
            if name not in metrics.names:
                named = [n for n in metrics.names if n not in wanted]
                close = difflib.get_close_matches(name, named, n=1, cutoff=0.6)
                field = "metric.name" if name == contract.metric.name else "metric.heldout"
                report.add(
                    "P525",
                    ("command", "metrics", "names"),
                    f"metrics.names does not say which column holds {name!r}, the contract's "
                    f"{'metric' if name == contract.metric.name else 'held-out metric'}"
                    + (f"; it names {close[0]!r}" if close else ""),
                    (f"Did you mean {field}: {close[0]}? Else add" if close else "Add")
                    + f" `{name}: <column or key>` to metrics.names.",
                )
    if metrics.format == "csv" and metrics.step == "epoch" and metrics.step_base is None:
        report.add(
            "P940",
            ("command", "metrics", "step"),
            "metrics.step is the CSV's `epoch` column and step_base is not given: it defaults to "
            "1, but "
            "Lightning's CSVLogger counts epochs from 0 (its last epoch would fall one short of "
            "the budget)",
            "Write step_base: 0 when the app's epochs count from 0, or step_base: 1 when they "
            "count from 1.",
            severity="warning",
        )


def _short(value: Any) -> str:
    return short_repr(value, 60)


# a setting that names where a script writes its outputs: nanoGPT's out_dir, a Trainer's output_dir
_OUTPUT_NAME = re.compile(
    r"(?:^|_)(?:out|output|save|checkpoint|ckpt|log|logging|results?)"
    r"_?(?:dir|directory|folder|path)$"
)


def check_outputs(contract, loaded: LoadedYaml, composed: ComposedArms | None) -> list[Diagnostic]:
    """P945: the script's output folder defaults to a path relative to the folder it runs in
    (nanoGPT's `out_dir = 'out'`, a Hugging Face example's `--output_dir` default) and the
    contract's config does not set it: every trial would write its checkpoints and logs to one
    shared folder."""
    spec = contract.command
    configs = composed.configs if composed is not None and not composed.problems else {}
    if spec is None or isinstance(spec, str) or spec.args == "hydra" or not configs:
        return []
    command_dir = contract.command_dir(Path(loaded.file).resolve().parent)
    try:
        script = script_file(command_argv(contract.command_line))
    except (CommandFailedError, ValueError):
        return []
    if script is None or not (command_dir / script).is_file():
        return []
    tree, _ = script_tree(command_dir / script, script)
    if tree is None:
        return []
    report = _Report(loaded)
    for key, default in _relative_outputs(tree, spec.args):
        if all(get_path(config, key) is MISSING for config in configs.values()):
            report.add(
                "P945",
                ("command", "args"),
                f"{script} writes its outputs to {key} = {default!r} by default, a folder relative "
                "to where it runs, which every trial shares: the trials would overwrite each "
                "other's checkpoints and logs",
                f"Set it in the contract's config, each trial's own folder: "
                f"`{key}: ${{hydra:runtime.output_dir}}`.",
                severity="warning",
            )
    return report.items


def _relative_outputs(tree: ast.Module, args: str) -> list[tuple[str, str]]:
    """(setting, default) for each output folder the script sets to a relative path: a top-level
    `out_dir = "out"` (a configurator's global), or `add_argument("--output_dir", default="out")`.
    """
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree) if args == "argparse" else tree.body:
        if isinstance(node, ast.Assign) and args == "literal":
            value = node.value
            for target in node.targets:
                if isinstance(target, ast.Name) and _OUTPUT_NAME.search(target.id):
                    found += _relative(target.id, value)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant)]
            option = next((n for n in names if isinstance(n, str) and n.startswith("--")), None)
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if option and default is not None and _OUTPUT_NAME.search(option[2:].replace("-", "_")):
                found += _relative(option[2:], default)
    return found


def _relative(key: str, value: ast.expr) -> list[tuple[str, str]]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
        if not PurePosixPath(value.value).is_absolute():
            return [(key, value.value)]
    return []


def _configurator_names(command_dir: Path, argv: list[str]) -> tuple[str, set[str]] | None:
    """(the configurator's file, the settings it accepts) when the command's script execs a file
    that overrides the script's globals (nanoGPT's `exec(open('configurator.py').read())`, which
    refuses a key that is not one of them): the names the script and the config files named on its
    command line assign at their top level. None for any other script: its own parser decides."""
    script = script_file(argv)
    if script is None:
        return None
    tree, _ = script_tree(command_dir / script, script)
    if tree is None:
        return None
    execd = [
        call.args[0].func.value.args[0].value
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and getattr(call.func, "id", None) == "exec"
        and call.args
        and isinstance(call.args[0], ast.Call)
        and isinstance(call.args[0].func, ast.Attribute)
        and isinstance(call.args[0].func.value, ast.Call)
        and call.args[0].func.value.args
        and isinstance(call.args[0].func.value.args[0], ast.Constant)
        and isinstance(call.args[0].func.value.args[0].value, str)
    ]
    configurator = next(
        (f for f in execd if (command_dir / f).is_file() and "globals()" in _text(command_dir / f)),
        None,
    )
    if configurator is None:
        return None
    names = _assigned(tree)
    after = argv[argv.index(script) + 1 :] if script in argv else []
    for word in after:
        if not word.startswith("-") and "=" not in word and (command_dir / word).is_file():
            config_tree, _ = script_tree(command_dir / word, word)
            names |= _assigned(config_tree) if config_tree is not None else set()
    return configurator, names


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _assigned(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, ast.Name):
                out.add(target.id)
    return out


def _check_literal_names(
    report: _Report, contract, configs: dict[str, dict], command_dir: Path
) -> None:
    """P536: `args: literal` passes a key the script's configurator refuses (nanoGPT raises `Unknown
    config key`); for the seed key, the sentence gives the two ways out."""
    argv = command_argv(contract.command_line)
    found = _configurator_names(command_dir, argv)
    if found is None:
        return
    configurator, names = found
    keys = dict.fromkeys(key for config in configs.values() for key, _ in flatten_leaves(config))
    if contract.tuning is not None:
        for space in (contract.tuning.space, *contract.tuning.arm_space.values()):
            keys.update(dict.fromkeys(space))
    seed_key = contract.command_spec.seed_key
    for key in keys:
        if key in names:
            continue
        place, on_key = _flag_place(report, contract, key, ("command", "args"))
        said = f"config key {key!r} would be passed as --{key}=..., which {configurator} refuses: "
        said += f"the script has no setting {key!r}"
        near = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.75)
        if key == seed_key:
            report.add(
                "P536",
                ("command", "seed_key"),
                said + " (every trial would fail at its start)",
                f"Give the script a {key!r} setting it seeds its random generators with, or remove "
                "seed_key (and the key from the config) and have the script read its seed from the "
                "environment, int(os.environ['PLANNER_SEED']).",
            )
            continue
        report.add(
            "P536",
            place,
            said + (f"; did you mean {near[0]!r}?" if near else ""),
            "Name the key as the script's setting (a name its file or its config file assigns), or "
            "remove it from the contract's config.",
            key=on_key,
        )
