"""docs/contract.md documents exactly the rule codes the code can emit."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_rule_code_is_documented_and_every_documented_code_exists():
    in_code = set()
    for module in (REPO / "planner").rglob("*.py"):
        in_code |= set(re.findall(r'"(P\d{3})"', module.read_text()))
    in_docs = set(re.findall(r"^\| (P\d{3}) \|", (REPO / "docs" / "contract.md").read_text(), re.MULTILINE))
    assert in_code and in_code == in_docs, (sorted(in_code - in_docs), sorted(in_docs - in_code))
