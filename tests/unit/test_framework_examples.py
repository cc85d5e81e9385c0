"""The framework examples' contracts (Lightning, PyTorch, Hugging Face Trainer) are valid and plan
what CI can train."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner._contract.validate import validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["lightning", "pytorch", "hf_trainer"])
def test_the_example_contract_is_valid_with_one_factor_and_a_held_out_metric(name, monkeypatch):
    monkeypatch.chdir(EXAMPLES.parent)  # the PyTorch trainable imports as examples.pytorch.train
    result = validate(EXAMPLES / name / "contract.yaml")
    assert result.valid and result.exit_code == 0, [d.format() for d in result.diagnostics]
    assert [d.code for d in result.diagnostics] == [
        "P901"
    ]  # only: few confirmation seeds, kept small for CI
    arms = result.summary["arms"]
    assert len(arms) == 2 and arms[0]["baseline"] is True
