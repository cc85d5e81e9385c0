"""docs/contract.md documents exactly the rule codes the code can emit."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_rule_code_is_documented_and_every_documented_code_exists():
    in_code = set()
    for module in (REPO / "planner").rglob("*.py"):
        in_code |= set(re.findall(r'"(P\d{3})"', module.read_text()))
    in_docs = set(
        re.findall(r"^\| (P\d{3}) \|", (REPO / "docs" / "contract.md").read_text(), re.MULTILINE)
    )
    assert in_code and in_code == in_docs, (sorted(in_code - in_docs), sorted(in_docs - in_code))


def test_the_docs_index_lists_every_page_once():
    """docs/index.md's table: one row per page of docs/, no page missing, none twice."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    rows = re.findall(
        r"^\| \[([\w.-]+\.md)\]\(\1\) \|", (docs / "index.md").read_text(), re.MULTILINE
    )
    pages = sorted(p.name for p in docs.glob("*.md") if p.name != "index.md")
    assert sorted(rows) == pages, (rows, pages)
    assert len(rows) == len(set(rows))
