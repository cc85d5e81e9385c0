"""One table of exit codes (planner/_core/errors.py), the one docs/commands.md shows, and the error
tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import planner
from planner import PlannerError
from planner._core import errors
from planner._core.errors import EXIT_CODES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
ROOT = Path(planner.__file__).parent


def test_commands_md_lists_the_table_row_for_row():
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("| exit | meaning |")
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", text[start:].split("\n\n", 1)[0], flags=re.M)
    assert {int(code): meaning for code, meaning in rows} == EXIT_CODES


def test_every_error_class_carries_a_code_of_the_table():
    classes = [
        c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, PlannerError)
    ]
    assert len(classes) >= 10
    for cls in classes:
        assert cls.exit_code in EXIT_CODES, cls


def test_every_planner_error_subclass_lives_in_the_one_module():
    """No PlannerError subclass is defined outside planner/_core/errors.py."""
    names = {
        c.__name__
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, BaseException)
    }
    for path in ROOT.rglob("*.py"):
        if path.name == "errors.py" and path.parent.name == "_core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                assert not bases & names, (
                    f"{path}: class {node.name} subclasses {bases & names}; define it in "
                    f"_core/errors.py"
                )
