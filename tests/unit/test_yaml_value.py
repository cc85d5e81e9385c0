"""Config and contract values print as YAML writes them (true, null), not as Python does (True,
None)."""

import math

from planner._cli.validate_text import format_result
from planner._contract.paths import diff_rows, shown_side
from planner._core.diagnostics import short_repr
from planner._core.text import yaml_value


def test_scalars_and_collections_print_yaml_style():
    assert [yaml_value(v) for v in (True, False, None, 3, 0.05, "sgd", "it's")] == [
        "true",
        "false",
        "null",
        "3",
        "0.05",
        "'sgd'",
        "'it''s'",
    ]
    assert yaml_value([1, True, None]) == "[1, true, null]"
    assert yaml_value({"a": False, "b": [0.5]}) == "{a: false, b: [0.5]}"
    assert (
        yaml_value(math.inf) == ".inf"
        and yaml_value(-math.inf) == "-.inf"
        and yaml_value(math.nan) == ".nan"
    )
    assert yaml_value("x" * 100, 20) == "'" + "x" * 16 + "..."
    assert short_repr(True) == "true"  # messages quote contract values the same way


def test_a_config_diff_shows_yaml_values_and_absent_sides():
    rows = {
        r["path"]: r
        for r in diff_rows(
            {"p": {"standardize": False, "gone": 1, "n": None}},
            {"p": {"standardize": True, "new": "x", "n": 2}},
        )
    }
    shown = {path: (shown_side(r, "baseline"), shown_side(r, "arm")) for path, r in rows.items()}
    assert shown == {
        "p.standardize": ("false", "true"),
        "p.gone": ("1", "<absent>"),
        "p.new": ("<absent>", "'x'"),
        "p.n": ("null", "2"),
    }


def test_validate_summary_prints_a_boolean_change_as_yaml(tmp_path, monkeypatch):
    from planner._contract.validate import validate
    from tests._contract_helpers import EXAMPLES

    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("preprocess:\n  standardize: false\n")
    (tmp_path / "toy.py").write_text((EXAMPLES / "toy.py").read_text())
    text = (EXAMPLES / "valid" / "warmup.yaml").read_text()
    text = (
        text.replace("dir: ../conf", "dir: conf")
        .replace("keys: [schedule.warmup_steps]", "keys: [preprocess]")
        .replace("overrides: [schedule.warmup_steps=0]", "overrides: []")
        .replace(
            "overrides: [schedule.warmup_steps=200]", "overrides: [preprocess.standardize=true]"
        )
    )
    (tmp_path / "c.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = validate(tmp_path / "c.yaml")
    assert result.valid, [d.format() for d in result.diagnostics]
    out = format_result(result)
    assert "preprocess.standardize: false -> true" in out and "False" not in out
