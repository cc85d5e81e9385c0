"""The example contracts (examples/contracts) give their stated verdicts, for the stated reason, at
the right line."""

from __future__ import annotations

import pytest

from planner._contract.validate import load_contract, planned_trials, validate
from tests._contract_helpers import EXAMPLES

# invalid file -> (rule code, text on the line the error must point at)
EXPECTED = {
    "typo.yaml": ("P100", "seed: [0, 1, 2]"),
    "warmup-and-decay.yaml": ("P300", "schedule=warmup_cosine"),
    "tuning-on-confirmation-seeds.yaml": ("P402", "  seeds: [0]"),
}


def _files(kind: str) -> list[str]:
    return sorted(p.name for p in (EXAMPLES / kind).glob("*.yaml")) if EXAMPLES.is_dir() else []


@pytest.fixture(autouse=True)
def _run_where_toy_imports(monkeypatch):
    # The examples name `toy:train`; toy.py sits in examples/contracts, which is where one runs
    # them from.
    monkeypatch.chdir(EXAMPLES)


@pytest.mark.parametrize("name", _files("valid"))
def test_valid_examples_pass(name):
    result = validate(EXAMPLES / "valid" / name)
    assert result.valid, [d.format() for d in result.diagnostics]
    assert result.exit_code == 0
    assert result.summary["arms"][0]["baseline"] is True


@pytest.mark.parametrize("name", _files("invalid"))
def test_invalid_examples_fail_for_their_reason_at_the_right_line(name):
    path = EXAMPLES / "invalid" / name
    lines = path.read_text().splitlines()
    assert lines[0].startswith("#"), "an invalid example states its reason in its first comment"
    result = validate(path)
    assert result.exit_code == 1
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert errors
    if name not in EXPECTED:  # a new example: it must at least point somewhere past its comment
        assert all(d.line > 1 for d in errors)
        return
    code, needle = EXPECTED[name]
    line = next(i for i, text in enumerate(lines, start=1) if needle in text)
    assert [(d.code, d.line) for d in errors] == [(code, line)]


def test_the_typo_suggests_the_right_key():
    (error,) = validate(EXAMPLES / "invalid" / "typo.yaml").diagnostics
    assert "seed" in error.message and error.hint == "Did you mean `seeds`?"


def test_the_group_error_names_the_arm_each_other_path_and_both_values():
    (error,) = [
        d
        for d in validate(EXAMPLES / "invalid" / "warmup-and-decay.yaml").diagnostics
        if d.severity == "error"
    ]
    assert "'warmup'" in error.message
    assert "schedule.decay: 'none' -> 'cosine'" in error.message
    assert "schedule.name: 'constant' -> 'warmup_cosine'" in error.message
    assert (
        "schedule.warmup_steps:" not in error.message
    )  # the factor's own change is not a complaint


def test_summary_of_the_tuned_example():
    result = validate(EXAMPLES / "valid" / "optimizer-tuned.yaml")
    summary = result.summary
    assert summary["planned_trials"] == {"tune": 2 * 1 * 12, "confirm": 2 * 10, "total": 44}
    assert [arm["name"] for arm in summary["arms"]] == ["sgd", "adam"]
    diff = {d["path"]: (d["baseline"], d["arm"], d["change"]) for d in summary["arms"][1]["diff"]}
    assert diff == {
        "optimizer.lr": (0.05, 0.001, "changed"),
        "optimizer.momentum": (0.9, None, "removed"),
        "optimizer.name": ("sgd", "adam", "changed"),
    }
    assert summary["budget"]["max_trials"] == 100


def test_load_contract_returns_the_model_and_composed_configs():
    import planner

    path = EXAMPLES / "valid" / "warmup.yaml"
    loaded = planner.load_contract(path)
    assert loaded.contract.name == "warmup-helps"
    assert loaded.configs["warmup-200"]["schedule"]["warmup_steps"] == 200
    seeds_line = next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("seeds:")
    )
    assert loaded.positions.position(("seeds",)) == (seeds_line, len("seeds: ") + 1)
    assert planned_trials(loaded.contract) == {"tune": 0, "confirm": 10, "total": 10}


def test_load_contract_raises_with_every_error():
    from planner import ContractError

    with pytest.raises(ContractError) as caught:
        load_contract(EXAMPLES / "invalid" / "typo.yaml")
    assert [d.code for d in caught.value.diagnostics] == ["P100"]
    assert caught.value.exit_code == 1


def test_the_readme_says_to_run_from_the_folder_these_tests_run_from():
    """The README's instructions are the ones that work: from examples/contracts, `toy` imports."""
    readme = (EXAMPLES / "README.md").read_text()
    assert "cd examples/contracts" in readme and "plan validate valid/warmup.yaml" in readme
    assert "parent" not in readme
    assert validate(EXAMPLES / "valid" / "warmup.yaml").valid  # from EXAMPLES (the autouse fixture)


def test_no_example_suggests_an_mlflow_file_store():
    """MLflow 3 refuses `file:` tracking stores (docs/mlflow.md): no example, even commented out,
    names one."""
    root = EXAMPLES.parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.yaml")
        if "tracking_uri" in p.read_text() and "file:" in p.read_text()
    ]
    assert offenders == []
