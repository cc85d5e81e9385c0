"""Which script a `command:` trainable's code identity digests (pure: files only, no git)."""

from planner._store.identity import command_script


def test_the_script_is_the_first_word_that_is_a_file_in_the_contract_folder(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "run.sh").write_text("")
    assert (
        command_script("python train.py --epochs 3", tmp_path) == (tmp_path / "train.py").resolve()
    )
    assert command_script("./run.sh train.py", tmp_path) == (tmp_path / "run.sh").resolve()
    assert command_script("bash -c 'python x.py'", tmp_path) is None
    assert command_script("python missing.py", tmp_path) is None
    assert command_script("python 'unbalanced", tmp_path) is None


def _plan(trainable, code):
    from pathlib import Path
    from types import SimpleNamespace

    from planner._reeval.prepare import ReevalPlan

    return ReevalPlan(
        run_dir=Path("runs/x/1"),
        run_id="1",
        contract=SimpleNamespace(trainable=trainable),
        contract_sha256="",
        contract_dir=Path("."),
        search_path=[],
        arm="a",
        seeds=[0],
        new_seeds=[],
        tolerance=0.0,
        metric="acc",
        config={},
        params={},
        config_source="the logged confirmation trials",
        logged={},
        arm_logged={},
        baseline_logged={},
        logged_effect=None,
        reeval_number=1,
        identity={"code": code},
        differences=[],
        ledger={},
    )


def test_a_reeval_of_a_command_without_a_script_does_not_claim_the_code_matches():
    from planner._cli.reeval_text import format_plan

    bare = format_plan(
        _plan(None, {"trainable": "command: ./run_it", "trainable_source_sha256": None})
    )
    assert "code: not recorded for a command" in bare and "code, python" not in bare
    scripted = format_plan(
        _plan(None, {"trainable": "command: python train.py", "trainable_source_sha256": "ab" * 32})
    )
    assert "identity: code, python, packages and data match the log" in scripted


def test_a_reeval_of_a_command_whose_trials_logged_the_files_they_read_says_those_matched():
    """`python -m projects.adder.adder` names no script in the contract's folder, but its trials
    logged every file they read, each compared with today's: the code was checked after all."""
    import dataclasses

    from planner._cli.reeval_text import format_plan

    plan = _plan(None, {"trainable": "command: python -m pkg.mod", "trainable_source_sha256": None})
    said = format_plan(dataclasses.replace(plan, files_checked=5))
    assert "identity: code (the 5 files its trials read), python, packages and data" in said
    assert "not recorded" not in said
