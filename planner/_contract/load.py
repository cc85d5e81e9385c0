"""Load a contract file: safe YAML, with the line and column of every node.

PyYAML composes the node graph (never constructing objects, so no Python tag can
ever run), and we build plain data from it ourselves, recording where each node
starts. With libyaml (PyYAML's C extension) the limits below are checked on the
C parser's event stream before the C composer runs; without it, a `SafeLoader`
subclass checks them as it composes. Limits keep hostile files cheap to refuse: a size limit,
a nesting-depth limit, a cap on aliases in the text and on the nodes that
aliases expand to (an "alias bomb" fails in milliseconds), no duplicate keys,
and only the standard tags (str, int, float, bool, null, map, seq).

Paths are tuples of keys and list indices: ("arms", 0, "overrides", 1). The
root is (). Positions are 1-based (line, column).

What happens to a file that cannot be loaded, and its exit code:

- it cannot be read as text at all (missing, a folder, no permission, over the
  size limit, not UTF-8, binary): `ContractFileError` (exit 2, "unreadable");
- it is text but not an acceptable YAML mapping (syntax, tags, aliases, depth,
  duplicate keys, empty, a list at the top): `ContractError` (exit 1, "invalid").
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from planner._core.diagnostics import Diagnostic
from planner._core.errors import ContractError, ContractFileError

MAX_BYTES = 1024 * 1024  # 1 MiB: a contract is a page of YAML
MAX_DEPTH = 64
MAX_ALIASES = 100  # aliases written in the file
MAX_NODES = 5_000  # values in the file (P012), and after expanding aliases (P006)
_TOO_DEEP = f"the YAML nests more than {MAX_DEPTH} levels deep"

Path_ = tuple[Any, ...]
Position = tuple[int, int]

_STANDARD_TAGS = {
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary")
}


@dataclass
class LoadedYaml:
    """Plain data (dicts, lists, scalars) and where each node is in the file."""

    data: Any
    file: str
    positions: dict[Path_, Position] = field(default_factory=dict)  # where each value starts
    key_positions: dict[Path_, Position] = field(
        default_factory=dict
    )  # where each mapping key starts

    def position(self, path: Path_, key: bool = False) -> Position:
        """Position of `path` (its key when `key` or when the value is a block below the key),
        or of its nearest existing ancestor's key (for a missing key)."""
        path = tuple(path)
        while True:
            key_position = self.key_positions.get(path)
            if key and key_position:
                return key_position
            if path in self.positions:
                value_position = self.positions[path]
                if key_position and value_position[0] > key_position[0]:
                    # a block mapping or list: point at its key, not its first item
                    return key_position
                return value_position
            if not path:
                return (1, 1)
            path = path[:-1]
            key = True  # a missing key: point at its parent's key, where it belongs


def format_path(path: Path_) -> str:
    """("tuning", "space", "optimizer.lr") -> 'tuning.space["optimizer.lr"]'; ("arms", 0) ->
    "arms.0"."""
    out = ""
    for part in path:
        text = str(part)
        if isinstance(part, str) and ("." in text or not text):
            out += f'["{text}"]'
        else:
            out += f".{text}" if out else text
    return out


def _diag(
    code: str, message: str, file: str, hint: str = "", line: int = 0, column: int = 0
) -> Diagnostic:
    return Diagnostic(
        code=code, severity="error", message=message, file=file, line=line, column=column, hint=hint
    )


def read_text(path: str | os.PathLike) -> str:
    """The file's text, or `ContractFileError` (exit 2) with one Diagnostic saying why not."""
    file = str(path)
    p = Path(path)
    try:
        if p.is_dir():
            raise ContractFileError(
                [
                    _diag(
                        "P001",
                        f"{file} is a folder, not a contract file",
                        file,
                        "Name the contract's YAML file.",
                    )
                ]
            )
        fd = os.open(
            p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
        )  # a FIFO opens at once: it is named below
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) and not stat.S_ISCHR(
                info.st_mode
            ):  # /dev/zero: P002 below
                raise ContractFileError(
                    [
                        _diag(
                            "P001",
                            f"{file} is not a regular file (a FIFO, a socket...): it is not read",
                            file,
                            "Name the contract's YAML file.",
                        )
                    ]
                )
            size = info.st_size
            if size > MAX_BYTES:
                raise ContractFileError(
                    [
                        _diag(
                            "P002",
                            f"the file is {size:,} bytes, over the {MAX_BYTES:,}-byte limit for a "
                            f"contract",
                            file,
                            "A contract is a short YAML file; put large data elsewhere and name "
                            "it under data.fingerprint.",
                        )
                    ]
                )
            os.set_blocking(fd, True)
            raw = handle.read(MAX_BYTES + 1)
    except ContractFileError:
        raise
    except FileNotFoundError:
        raise ContractFileError(
            [_diag("P001", f"no such file: {file}", file, "Check the path.")]
        ) from None
    except OSError as error:
        raise ContractFileError(
            [
                _diag(
                    "P001",
                    f"cannot read {file}: {error.strerror or error}",
                    file,
                    "Check the path and its permissions.",
                )
            ]
        ) from None
    if len(raw) > MAX_BYTES:  # it grew while we looked
        raise ContractFileError(
            [
                _diag(
                    "P002",
                    f"the file is over the {MAX_BYTES:,}-byte limit for a contract",
                    file,
                    "A contract is a short YAML file.",
                )
            ]
        )
    if b"\x00" in raw:
        raise ContractFileError(
            [
                _diag(
                    "P003",
                    "the file is binary (it contains NUL bytes), not YAML text",
                    file,
                    "Name the contract's YAML file.",
                )
            ]
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ContractFileError(
            [
                _diag(
                    "P003",
                    f"the file is not UTF-8 text (byte 0x{raw[error.start]:02x} at offset "
                    f"{error.start})",
                    file,
                    "Save the contract as UTF-8.",
                    line,
                    1,
                )
            ]
        ) from None


def load_yaml(path: str | os.PathLike) -> LoadedYaml:
    """Read and parse a contract file; raise `ContractFileError` or `ContractError` with
    Diagnostics."""
    return parse_yaml(read_text(path), str(path))


def parse_yaml(text: str, file: str = "<contract>") -> LoadedYaml:
    """Parse YAML text into plain data with positions; raise `ContractError` with one Diagnostic."""
    loaded = LoadedYaml(data=None, file=file)
    loader = None
    try:
        try:
            if (
                yaml.__with_libyaml__
            ):  # libyaml: check the limits on its event stream, then compose in C
                _check_events(yaml.parse(text, Loader=yaml.CSafeLoader))
                loader = yaml.CSafeLoader(text)
            else:  # pure Python: the composer checks the limits as it goes
                loader = _Loader(text)
            node = loader.get_single_node()
        except _LimitError as error:
            raise ContractError(
                [_diag(error.code, error.message, file, error.hint, *error.position)]
            ) from None
        except yaml.reader.ReaderError as error:
            raise ContractFileError(
                [
                    _diag(
                        "P003",
                        f"the file is not YAML text: {error.reason} (character "
                        f"{error.character!r})",
                        file,
                        "Save the contract as UTF-8 text.",
                    )
                ]
            ) from None
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
            problem = error.problem or "invalid YAML"
            if error.context and error.problem:
                problem = f"{error.context}, {error.problem}"
            if "nesting depth" in str(problem):  # libyaml's own limit, deeper than ours
                raise ContractError(
                    [_diag("P007", _TOO_DEEP, file, "Flatten the structure.", line, column)]
                ) from None
            if "expected a single document" in str(problem):
                raise ContractError(
                    [
                        _diag(
                            "P010",
                            "the file holds more than one YAML document",
                            file,
                            "Keep one contract per file: remove the extra `---` document.",
                            line,
                            column,
                        )
                    ]
                ) from None
            raise ContractError(
                [
                    _diag(
                        "P004",
                        f"YAML syntax error: {problem}",
                        file,
                        "Fix the YAML at this position (check indentation, quotes and brackets).",
                        line,
                        column,
                    )
                ]
            ) from None
        except yaml.YAMLError as error:
            raise ContractError(
                [
                    _diag(
                        "P004",
                        f"YAML error: {str(error).splitlines()[0]}",
                        file,
                        "Fix the YAML syntax.",
                    )
                ]
            ) from None
        except RecursionError:
            raise ContractError(
                [_diag("P007", _TOO_DEEP, file, "Flatten the structure.")]
            ) from None
    finally:
        if loader is not None:
            loader.dispose()

    if node is None:
        raise ContractError(
            [
                _diag(
                    "P009",
                    "the file is empty: a contract is a YAML mapping",
                    file,
                    "Start from an example in docs/contract.md.",
                    1,
                    1,
                )
            ]
        )
    if not isinstance(node, yaml.MappingNode):
        line, column = _mark(node)
        kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        raise ContractError(
            [
                _diag(
                    "P009",
                    f"the top of a contract must be a mapping of keys, not {kind}",
                    file,
                    "Write `version: 1`, `name: ...` and the other keys at the top level.",
                    line,
                    column,
                )
            ]
        )
    builder = _Builder(loaded)
    try:
        loaded.data = builder.build(node, (), 0)
    except _LimitError as error:
        raise ContractError(
            [_diag(error.code, error.message, file, error.hint, *error.position)]
        ) from None
    return loaded


class _LimitError(Exception):
    def __init__(self, code: str, message: str, hint: str, position: Position):
        super().__init__(message)
        self.code, self.message, self.hint, self.position = code, message, hint, position


class _Limits:
    """Counts aliases, values and nesting as a parser goes; raises `_LimitError` past a limit."""

    def __init__(self) -> None:
        self.depth = self.values = self.aliases = 0

    def alias(self, mark) -> None:
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise _LimitError(
                "P006",
                f"the file uses more than {MAX_ALIASES} aliases (*name)",
                "Write the values out; a contract needs few or no aliases.",
                _position(mark),
            )

    def value(self, mark, collection: bool) -> None:
        self.values += 1
        if self.values > MAX_NODES:
            raise _LimitError(
                "P012",
                f"the file holds more than {MAX_NODES:,} values; a contract is a page of YAML",
                "Keep data out of the contract (name data files under data.fingerprint).",
                _position(mark),
            )
        if collection:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _LimitError(
                    "P007",
                    _TOO_DEEP,
                    "Flatten the structure; a contract is a few levels deep.",
                    _position(mark),
                )

    def leave(self) -> None:
        self.depth -= 1


def _check_events(events) -> None:
    """Enforce the limits on a parser's event stream (iterative: any depth is safe)."""
    limits = _Limits()
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            limits.alias(event.start_mark)
        elif isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
            limits.value(event.start_mark, isinstance(event, yaml.CollectionStartEvent))
        elif isinstance(event, yaml.CollectionEndEvent):
            limits.leave()


def _position(mark) -> Position:
    return mark.line + 1, mark.column + 1


def _mark(node) -> Position:
    return _position(node.start_mark)


def _make_loader_class():
    class Loader(yaml.SafeLoader):
        """Composes nodes only, refusing deep nesting and too many aliases as it goes."""

        def __init__(self, stream):
            super().__init__(stream)
            self._limits = _Limits()

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                self._limits.alias(event.start_mark)
                return super().compose_node(parent, index)
            collection = isinstance(event, yaml.CollectionStartEvent)
            self._limits.value(event.start_mark, collection)
            try:
                return super().compose_node(parent, index)
            finally:
                if collection:
                    self._limits.leave()

    return Loader


_LOADER_CLASS = None


def _Loader(text: str):
    global _LOADER_CLASS
    if _LOADER_CLASS is None:
        _LOADER_CLASS = _make_loader_class()
    return _LOADER_CLASS(text)


class _Builder:
    """Node graph -> plain data, recording positions; counts expanded nodes to stop alias bombs."""

    def __init__(self, loaded: LoadedYaml):
        self.yaml = yaml
        self.loaded = loaded
        self.nodes = 0
        self.active: set[int] = set()  # ids of the nodes being built: a repeat is a recursive alias
        self.constructor = yaml.SafeLoader.__new__(
            yaml.SafeLoader
        )  # only for its scalar constructors
        yaml.constructor.SafeConstructor.__init__(self.constructor)

    def build(self, node, path: Path_, depth: int) -> Any:
        yaml = self.yaml
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _LimitError(
                "P006",
                f"the file expands to more than {MAX_NODES:,} values (aliases repeat what they "
                f"name)",
                "Write the values out instead of nesting aliases.",
                _mark(node),
            )
        if depth > MAX_DEPTH:
            raise _LimitError(
                "P007", _TOO_DEEP + " (through aliases)", "Flatten the structure.", _mark(node)
            )
        if node.tag not in _STANDARD_TAGS:
            raise _LimitError(
                "P005",
                f"the tag {node.tag!r} is not allowed; a contract uses plain YAML values only",
                "Remove the tag (`!name` or `!!type`).",
                _mark(node),
            )
        self.loaded.positions.setdefault(path, _mark(node))
        if isinstance(node, yaml.ScalarNode):
            try:
                return self.constructor.construct_object(node, deep=True)
            except Exception as error:  # e.g. an int too large, a malformed timestamp
                raise _LimitError(
                    "P004",
                    f"cannot read the value {node.value!r}: {error}",
                    "Quote it to make it a string, or fix it.",
                    _mark(node),
                ) from None
        if id(node) in self.active:
            raise _LimitError(
                "P006",
                "an alias refers to the node that contains it (a recursive structure)",
                "Remove the recursive alias.",
                _mark(node),
            )
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [
                    self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)
                ]
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise _LimitError(
                        "P011",
                        "merge keys (`<<: *name`) are not supported in a contract",
                        "Write the keys out.",
                        _mark(key_node),
                    )
                if not isinstance(key_node, yaml.ScalarNode):
                    raise _LimitError(
                        "P011",
                        "a mapping key must be a plain value, not a list or mapping",
                        "Use a plain name as the key.",
                        _mark(key_node),
                    )
                key = self.build(key_node, (*path, "<key>"), depth + 1)
                if key in out:
                    first = self.loaded.key_positions.get((*path, key))
                    where = f" (first at line {first[0]})" if first else ""
                    raise _LimitError(
                        "P008",
                        f"duplicate key {key!r}{where}",
                        "Keep one of them: YAML would silently use the last.",
                        _mark(key_node),
                    )
                self.loaded.key_positions[(*path, key)] = _mark(key_node)
                out[key] = self.build(value_node, (*path, key), depth + 1)
            self.loaded.positions.pop((*path, "<key>"), None)
            return out
        finally:
            self.active.discard(id(node))
