"""Diagnostics: what `plan validate` says about a contract, one finding each."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from planner._core.text import yaml_value

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Diagnostic:
    """One finding: a stable rule `code`, where it is, what is wrong and how to fix it.

    `path` is the dotted path of the offending YAML node ("arms.0.overrides.1");
    `line` and `column` are 1-based positions in `file` (0 when unknown).
    """

    code: str
    severity: Severity
    message: str
    path: str = ""
    file: str = ""
    line: int = 0
    column: int = 0
    hint: str = ""

    def format(self) -> str:
        where = (
            f"{self.file}:{self.line}:{self.column}" if self.line else (self.file or "<contract>")
        )
        text = f"{where}: {self.severity} {self.code}: {self.message}"
        if self.hint:
            text += ("" if text.endswith((".", "?", "!")) else ".") + f" {self.hint}"
        return text

    def as_dict(self) -> dict:
        return asdict(self)


def short_repr(value: object, limit: int = 60) -> str:
    """A contract or config value quoted in a message, YAML-style (true, null, 'text'), cut to
    `limit` characters."""
    return yaml_value(value, limit)


def errors(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity == "error"]


def warnings(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity == "warning"]
