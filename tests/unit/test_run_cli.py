"""`plan run` refuses what it cannot run before starting anything (no Ray needed)."""

from planner._cli.main import main
from tests._runs import contract_writer, synthetic_contract

BASE = synthetic_contract(name="cli", seeds=[0, 1])


write = contract_writer(BASE, file="c.yaml")


def run_cli(args, capsys):
    code = main(["run", *map(str, args), "--quiet"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_unknown_trainable_module_is_refused_with_exit_1(in_repo, tmp_path, capsys):
    code, _, err = run_cli(
        [
            write(tmp_path, trainable="no_such_module_anywhere:train"),
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capsys,
    )
    assert code == 1 and "no_such_module_anywhere" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_a_plan_over_max_trials_is_refused_naming_both_numbers(in_repo, tmp_path, capsys):
    code, _, err = run_cli(
        [
            write(tmp_path, budget={"exposure": 3, "max_trials": 3}),
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capsys,
    )
    assert code == 1 and "4 trials" in err and "max_trials is 3" in err


def test_a_schema_error_is_exit_1_and_a_missing_file_exit_2(in_repo, tmp_path, capsys):
    code, _, err = run_cli(
        [write(tmp_path, seeds=[0]), "--runs-dir", str(tmp_path / "runs")], capsys
    )
    assert code == 1 and "seeds" in err
    code, _, err = run_cli([str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "nope.yaml" in err


def test_an_override_that_does_not_compose_is_exit_1(in_repo, tmp_path, capsys):
    code, _, err = run_cli(
        [
            write(tmp_path, arms=[{"name": "treat", "overrides": ["recipe.nope=1"]}]),
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capsys,
    )
    assert code == 1 and "recipe.nope" in err
