"""An argparse script's options: from its `--help`, else from the `add_argument` calls of its own
file.

The usual training script imports torch, Lightning or transformers before it parses its arguments,
and that alone takes longer than the few seconds its `--help` is given
(planner._contract.command_help). Its options are then read from the script's source (Python's
`ast`: nothing is run), when that reading is unambiguous:

- the command is `python [interpreter options] <script> ...` or `<script>.py ...`, the script a
  regular file;
- the file builds one `ArgumentParser(...)` (no `parents=`, no `prefix_chars=`, no `**kwargs`) and
  no other kind of parser (`HfArgumentParser`, whose options come from dataclasses);
- every `add_argument` call names its options as literal strings, with no `*args`/`**kwargs`, an
  `action` of argparse's own (by name, or `argparse.BooleanOptionalAction`) and a literal `nargs`;
- the parser and its groups are used only to add arguments, parse and print help, or are handed to a
  function defined in the same file (whose parameter is then held to the same uses): a parser
  handed to a library (`Trainer.add_argparse_args(parser)`), `add_subparsers`, an alias, could gain
  options unseen.

Otherwise the names are not checked (P941), and the reason says which line stopped the reading. An
option added under a condition (`if cuda: parser.add_argument(...)`) is counted as there: the check
may miss a name the script lacks at run time, never refuse one it has.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from pathlib import Path

from planner._contract import command_help
from planner._contract.command_help import OPTIONAL, SWITCH, VALUE, ScriptHelp, read_help

MAX_SCRIPT_BYTES = 1 << 20  # a training script is a few hundred lines

_PARSER_USES = frozenset(
    {
        "add_argument",
        "add_argument_group",
        "add_mutually_exclusive_group",
        "parse_args",
        "parse_known_args",
        "parse_intermixed_args",
        "parse_known_intermixed_args",
        "set_defaults",
        "get_default",
        "print_help",
        "print_usage",
        "format_help",
        "format_usage",
        "error",
        "exit",
    }
)
_GROUPS = ("add_argument_group", "add_mutually_exclusive_group")
_SWITCH_ACTIONS = frozenset(
    {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
)
_VALUE_ACTIONS = frozenset({"store", "append", "extend"})
_NARGS = {
    "OPTIONAL": "?",
    "ZERO_OR_MORE": "*",
    "ONE_OR_MORE": "+",
    "REMAINDER": "...",
}  # argparse's constants
_PYTHON = re.compile(r"python[\d.]*")
_INTERPRETER_VALUE_OPTIONS = ("-W", "-X")  # python's options that take the next word as their value


def script_options(argv: Sequence[str], cwd: str | os.PathLike) -> tuple[ScriptHelp | None, str]:
    """(the script's options, "") from its `--help`; else (its options read from its source, why
    the `--help` could not be read); else (None, why neither could be)."""
    found, why = read_help(argv, cwd, timeout_s=command_help.HELP_TIMEOUT_S)
    if found is not None:
        return found, ""
    script = script_file(argv)
    if script is None:
        return (
            None,
            f"{why}, and the command runs no script file whose source could be read instead",
        )
    found, not_read = options_in_source(Path(cwd) / script, script)
    if found is None:
        return None, f"{why}, and its options cannot be read from {script}: {not_read}"
    return found, why


def script_file(argv: Sequence[str]) -> str | None:
    """The script `argv` runs: the word after `python` and its options, or `argv[0]` when it is a
    `.py` file; None for `python -m ...`, `python -c ...` and any other program."""
    if argv and argv[0].endswith(".py"):
        return argv[0]
    if not argv or not _PYTHON.fullmatch(Path(argv[0]).name):
        return None
    words = iter(argv[1:])
    for word in words:
        if word in ("-m", "-c", "-") or word.startswith(("-m", "-c", "--")):
            return None
        if word in _INTERPRETER_VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def options_in_source(path: Path, shown: str) -> tuple[ScriptHelp | None, str]:
    """(the options the `add_argument` calls in the file at `path` add, "") or (None, why not); see
    the module."""
    tree, why = script_tree(path, shown)
    return (None, why) if tree is None else options_in_tree(tree, shown)


def script_tree(path: Path, shown: str) -> tuple[ast.Module | None, str]:
    """(the syntax tree of the script at `path`, "") or (None, why it cannot be read)."""
    from planner._contract.compose import read_config_file

    try:
        text = read_config_file(path, max_bytes=MAX_SCRIPT_BYTES)
    except (OSError, UnicodeDecodeError) as error:
        return None, f"it cannot be read ({getattr(error, 'strerror', None) or error})"
    if text is None:
        return None, f"it is not a regular file of at most {MAX_SCRIPT_BYTES >> 20} MiB"
    try:
        return ast.parse(text, filename=shown), ""
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, "it does not parse as Python"


def options_in_tree(tree: ast.Module, shown: str) -> tuple[ScriptHelp | None, str]:
    """`options_in_source` of a script already parsed (`script_tree`)."""
    options, why = _options(tree)
    if options is None:
        return None, why
    return ScriptHelp(options, read_from=f"the add_argument calls in {shown}"), ""


def top_level_imports(tree: ast.Module) -> set[str]:
    """The top-level names a parsed script imports anywhere in it (`import os, hydra` -> os, hydra;
    `from hydra import main` -> hydra; relative imports left out)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def _called(call: ast.Call) -> str:
    func = call.func
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )


def _options(tree: ast.Module) -> tuple[dict[str, str] | None, str]:
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    builds = [call for call in calls if _called(call).endswith("ArgumentParser")]
    if len(builds) != 1 or _called(builds[0]) != "ArgumentParser":
        return None, (
            "it builds no ArgumentParser"
            if not builds
            else f"it builds {len(builds)} argument parsers"
            if len(builds) != 1
            else f"its parser is a {_called(builds[0])}, not argparse's own (line "
            f"{builds[0].lineno})"
        )
    build = builds[0]
    if len(build.args) > 4 or any(
        kw.arg in (None, "parents", "prefix_chars") for kw in build.keywords
    ):
        return None, f"its ArgumentParser(...) takes options from elsewhere (line {build.lineno})"
    why = _parser_used_only_so(tree, build)
    if why:
        return None, why
    options: dict[str, str] = {}
    if not any(kw.arg == "add_help" and _literal(kw.value) is False for kw in build.keywords):
        options.update({"-h": SWITCH, "--help": SWITCH})
    added = False
    for call in calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
            found, why = _added(call)
            if found is None:
                return None, why
            options.update(found)
            added = True
    if not added:
        return None, "it has no add_argument call"
    return options, ""


def _parser_used_only_so(tree: ast.Module, build: ast.Call) -> str:
    """Why the parser (or a group of it) may gain options the file does not show, or ""."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    functions = {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    names: set[str] = set()
    name = _assigned_name(build, parents)
    if name is None:
        return f"its ArgumentParser(...) is not assigned to a plain name (line {build.lineno})"
    names.add(name)
    while True:
        before = len(names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
                why = _use(node, _Uses(parents, functions), names)
                if why:
                    return why
        if len(names) == before:
            return ""


class _Uses:
    """The file's tree read for `_use`: each node's parent, and the functions it defines by name."""

    def __init__(self, parents: dict, functions: dict) -> None:
        self.parents, self.functions = parents, functions

    def enclosing(self, node: ast.AST) -> str | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node.name
        return None

    def results_of(self, function: str) -> list[ast.Call]:
        return [
            node
            for node in self.parents
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == function
        ]


def _assigned_name(call: ast.AST, parents: dict) -> str | None:
    """The plain name `call`'s value is assigned to (`x = call`), or None."""
    assigned = parents.get(call)
    if (
        isinstance(assigned, ast.Assign)
        and len(assigned.targets) == 1
        and isinstance(assigned.targets[0], ast.Name)
    ):
        return assigned.targets[0].id
    return None


def _use(node: ast.Name, uses: _Uses, names: set[str]) -> str:
    """ "" when this use of the parser `node` adds no option unseen: a group of it, a parameter it
    is handed to and a name a function returning it is assigned to join `names`, to be held to the
    same uses."""
    parents, functions = uses.parents, uses.functions
    parent = parents.get(node)
    if (
        isinstance(parent, ast.Attribute)
        and parent.attr in _PARSER_USES
        and isinstance(parents.get(parent), ast.Call)
    ):
        call = parents[parent]
        if parent.attr in _GROUPS and not isinstance(parents.get(call), ast.Expr):
            group = _assigned_name(call, parents)
            if group is None:
                return f"a group of its parser is not assigned to a plain name (line {node.lineno})"
            names.add(group)
        return ""
    if isinstance(parent, ast.Expr):
        return ""
    if isinstance(parent, ast.Return):
        function = uses.enclosing(parent)
        for call in uses.results_of(function) if function else []:
            used = parents.get(call)
            if isinstance(used, ast.Expr) or (
                isinstance(used, ast.Attribute)
                and used.attr in _PARSER_USES
                and used.attr not in _GROUPS
            ):  # build().parse_args()
                continue
            name = _assigned_name(call, parents)
            if name is None:
                return (
                    f"the parser {function}() returns is not assigned to a plain name (line "
                    f"{call.lineno})"
                )
            names.add(name)
        return "" if function else f"its parser is returned outside a function (line {node.lineno})"
    if isinstance(parent, ast.keyword):
        keyword = parent.arg
        parent = parents.get(parent)
    else:
        keyword = None
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in functions
    ):
        params = functions[parent.func.id].args
        positional = [*params.posonlyargs, *params.args]
        if keyword is not None:
            param = next((p for p in [*positional, *params.kwonlyargs] if p.arg == keyword), None)
        else:
            index = parent.args.index(node) if node in parent.args else -1
            param = positional[index] if 0 <= index < len(positional) else None
        if param is not None:
            names.add(param.arg)
            return ""
    if isinstance(parent, ast.Attribute):
        return f"its parser's .{parent.attr} could add options unseen (line {node.lineno})"
    if isinstance(parent, ast.Call):
        return (
            f"its parser is handed to {ast.unparse(parent.func)}(), which could add options "
            f"unseen (line {node.lineno})"
        )
    return f"its parser is used in a way that could add options unseen (line {node.lineno})"


def _literal(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else None


def _added(call: ast.Call) -> tuple[dict[str, str] | None, str]:
    """The options one `add_argument` call adds, with their kinds, or (None, why it cannot be
    read)."""
    line = call.lineno
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        kw.arg is None for kw in call.keywords
    ):
        return None, f"an add_argument call takes *args or **kwargs (line {line})"
    strings = [_literal(arg) for arg in call.args]
    if not all(isinstance(s, str) for s in strings):
        return (
            None,
            f"an add_argument call names an option that is not a literal string (line {line})",
        )
    keywords = {kw.arg: kw.value for kw in call.keywords}
    kind, negate = VALUE, False
    if "action" in keywords:
        action = keywords["action"]
        name = _literal(action)
        if name in _SWITCH_ACTIONS:
            kind = SWITCH
        elif (
            isinstance(action, ast.Name | ast.Attribute)
            and _name(action) == "BooleanOptionalAction"
        ):
            kind, negate = SWITCH, True
        elif name not in _VALUE_ACTIONS:
            return None, f"an add_argument call has an action of its own (line {line})"
    if kind == VALUE and "nargs" in keywords:
        nargs = keywords["nargs"]
        value = (
            _NARGS.get(_name(nargs))
            if isinstance(nargs, ast.Attribute | ast.Name)
            else _literal(nargs)
        )
        if value is None or isinstance(value, bool) or not isinstance(value, int | str):
            return None, f"an add_argument call has an nargs that is not a literal (line {line})"
        kind = OPTIONAL if value in ("?", "*") else SWITCH if value == 0 else VALUE
    options = {}
    for option in strings:
        if option.startswith("-"):  # a positional argument takes no flag
            options[option] = kind
            if negate and option.startswith("--"):
                options[f"--no-{option[2:]}"] = SWITCH
    return options, ""


def _name(node: ast.AST) -> str:
    return (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ""
    )
