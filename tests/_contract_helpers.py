"""Helpers for the validate tests: write a fixture contract, edited, into a temporary folder."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "contracts"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "contracts"


def edited(name: str, edits: list[tuple[str, str]]) -> str:
    """The fixture `name`'s text with each (old, new) replaced once; an edit that does not apply
    fails."""
    text = (FIXTURES / name).read_text()
    for old, new in edits:
        assert old in text, f"edit {old!r} does not apply to {name}"
        text = text.replace(old, new, 1)
    return text


def write_contract(tmp_path: Path, text: str, filename: str = "contract.yaml") -> Path:
    """Write `text` next to copies of the fixture trainables, with config.dir pointing at the
    fixture tree."""
    for module in FIXTURES.glob("fixture_*.py"):
        shutil.copy(module, tmp_path / module.name)
    text = text.replace("dir: conf", f"dir: {FIXTURES / 'conf'}")
    path = tmp_path / filename
    path.write_text(text)
    return path


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in the contract")
