"""The contract's data section: its rules (P600-P605, P920, P921), each failing at its line and
passing."""

from __future__ import annotations

import pytest

from planner._contract.validate import validate
from tests._contract_helpers import edited, line_of, write_contract

GOOD = """data:
  unit: image
  independent:
    pairs: [[train, test], [train, val]]
    by: [unit, patient]
  fixed: [test]
  require: [train, val, test]
"""


def _validate(tmp_path, data_text):
    text = edited("inline.yaml", [("budget: {exposure: 5}", "budget: {exposure: 5}\n" + data_text)])
    return text, validate(write_contract(tmp_path, text))


def test_a_full_data_section_is_valid_without_warnings(tmp_path):
    _, result = _validate(tmp_path, GOOD)
    assert result.valid and not [
        d for d in result.diagnostics if d.code.startswith(("P6", "P92"))
    ], result.diagnostics
    assert result.loaded.contract.data.independent.by == ["unit", "patient"]


@pytest.mark.parametrize(
    "edit, code, line_text",
    [
        (("[[train, test], [train, val]]", "[[train, train]]"), "P600", "pairs:"),
        (("[[train, test], [train, val]]", "[[train, test], [test, train]]"), "P601", "pairs:"),
        (("by: [unit, patient]", "by: [patient, patient]"), "P602", "by:"),
        (("fixed: [test]", "fixed: [test, test]"), "P603", "fixed:"),
        (("require: [train, val, test]", "require: [train, val, test, val]"), "P604", "require:"),
        (("unit: image", "unit: patient"), "P605", "unit: patient"),
    ],
)
def test_each_data_rule_fails_at_its_line(tmp_path, edit, code, line_text):
    text, result = _validate(tmp_path, GOOD.replace(*edit))
    found = [d for d in result.diagnostics if d.code == code]
    assert found and found[0].severity == "error", result.diagnostics
    assert found[0].line == line_of(text, line_text)


@pytest.mark.parametrize(
    "edit, code",
    [
        (("  require: [train, val, test]\n", ""), "P920"),
        (("fixed: [test]", "fixed: [test]\n  matched: false"), "P921"),
    ],
)
def test_each_data_warning(tmp_path, edit, code):
    _, result = _validate(tmp_path, GOOD.replace(*edit))
    assert result.valid and [
        d for d in result.diagnostics if d.code == code and d.severity == "warning"
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "independent: {pairs: []}",
        "fixed: ['no spaces allowed']",
        "matched: maybe",
        "independent: {pairs: [[train]]}",
    ],
)
def test_malformed_data_fields_are_schema_errors(tmp_path, bad):
    _, result = _validate(tmp_path, f"data:\n  {bad}\n")
    assert not result.valid and any(d.code.startswith("P1") for d in result.diagnostics), (
        result.diagnostics
    )
