"""Every environment error a sentence with an exit code from the table, never exit 70: absurd
numbers given to `plan power`, data files the contract names that are not there, a full or
read-only disk under the runs folder, a run folder that was moved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planner._cli.main import main
from tests._contract_helpers import FIXTURES, edited, write_contract


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def contract(tmp_path) -> Path:
    return write_contract(tmp_path, (FIXTURES / "inline.yaml").read_text())


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["--sd", "5e-324"], "too small beside min_effect"),
        (["--sd", "1e-300"], "too small beside min_effect"),
        (["--sd", "1", "--effect", "1e300"], "too small beside the effect to plan for"),
    ],
)
def test_power_refuses_numbers_off_any_scale(contract, capsys, given, says):
    code, out, err = cli(["power", str(contract), *given], capsys)
    assert code == 2 and says in err and "internal error" not in err, err
    assert "nan" not in out + err


@pytest.mark.parametrize(
    "given", [["--sd", "0.02"], ["--sd", "1e300"], ["--sd", "1", "--effect", "1e-300"]]
)
def test_power_still_answers_a_spread_large_beside_the_effect(contract, capsys, given):
    """A spread huge beside the effect has an answer: no number of seeds suffices."""
    code, out, err = cli(["power", str(contract), *given], capsys)
    assert code == 0 and "nan" not in out, err


def test_a_fingerprint_file_that_is_not_there_is_refused(tmp_path, capsys):
    text = edited(
        "inline.yaml",
        [
            (
                "budget: {exposure: 5}",
                "budget: {exposure: 5}\ndata: {fingerprint: [data/train.csv, pipe, here.csv]}",
            )
        ],
    )
    path = write_contract(tmp_path, text)
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "here.csv").write_text("x\n1\n")
    code, out, err = cli(["validate", str(path)], capsys)
    assert code == 1, out + err
    assert "P606" in out and "'data/train.csv', which is not there" in out, out
    assert "'pipe', which is a FIFO" in out and "here.csv'," not in out, out


def test_a_moved_run_folder_is_told_where_it_belongs(tmp_path):
    """Saved as Downloads/<run id>: "holds a run of 'base', not of 'base'" named the wrong cause."""
    import yaml

    from bench.synthetic_run import make_run
    from planner import RunError
    from planner._contract.model import Contract
    from planner._store.resume import resumable_run_dir

    run = make_run(tmp_path / "runs" / "optimizer-compare" / "20261130-120000-abcd", tune_trials=2)
    contract = Contract.model_validate(yaml.safe_load((run / "contract.yaml").read_text()))
    assert resumable_run_dir(run, contract) == run.resolve()
    moved = tmp_path / "Downloads" / run.name
    moved.parent.mkdir()
    run.rename(moved)
    with pytest.raises(RunError) as refused:
        resumable_run_dir(moved, contract)
    said = str(refused.value)
    assert f"lives at RUNS/{contract.name}/{run.name}" in said, said
    assert "in a folder named 'Downloads'" in said and "not of" not in said, said
