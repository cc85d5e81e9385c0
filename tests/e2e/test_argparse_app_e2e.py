"""An argparse script, unchanged, under `plan run`: the config goes as `--key value`
flags (the seed, the budget and the tuned values included), the flags are the names its `--help`
lists, and a script that refuses its flags shows argparse's own usage error."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from planner import load_run, run
from planner._contract.command_help import SWITCH, VALUE, read_help
from planner._contract.paths import flatten
from planner._contract.validate import validate
from tests._runs import example_app

pytestmark = pytest.mark.ray


def _app(tmp_path: Path, **values) -> Path:
    def edit(contract: dict) -> None:
        contract["seeds"] = [3, 4]
        contract["budget"]["exposure"] = 3
        contract["tuning"]["trials_per_arm"] = 2
        contract["tuning"].pop("early_stop")
        contract["config"]["values"].update(values)

    return example_app("argparse_app", tmp_path, edit)


def test_an_argparse_script_gets_its_config_as_flags_and_the_record_is_what_it_parsed(
    ray_local, tmp_path
):
    result = run(_app(tmp_path), runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = load_run(result.run_dir).records
    assert len(trials) == 8 and all(
        r["status"] == "completed" and r["exposure"] == 3 for r in trials
    ), [(r["trial_id"], r["status"], r["errors"][:1]) for r in trials]
    for r in trials:
        output = result.run_dir / "trials" / r["trial_id"] / "attempt-1" / "hydra"
        parsed = json.loads((output / "args.json").read_text())  # what argparse handed the script
        expected = flatten(r["config"])
        assert expected.pop("output_dir") == "${hydra:runtime.output_dir}" and parsed.pop(
            "output_dir"
        ) == str(output)
        assert parsed == expected, r["trial_id"]
        assert parsed["seed"] == r["seed"] and parsed["epochs"] == 3
        assert parsed["preprocess.standardize"] is (
            r["arm"] == "standardized"
        )  # --preprocess.standardize / --no-
        assert parsed["data.scales"] == [-1.0, 1.5] and parsed["verbose"] is True
        for key, value in r["params"].items():
            assert parsed[key] == value
    (decision,) = result.decisions
    assert decision["arm"] == "standardized"


def test_plan_run_reads_the_scripts_help_once(ray_local, tmp_path):
    """The flag check of validation reads the script's `--help`; the driver writes every trial's
    flags from that same reading instead of running `--help` again (seconds each, for a script that
    imports torch before it parses its arguments; twice the help timeout for one that answers too
    slowly)."""
    contract = _app(tmp_path)
    script = contract.parent / "train.py"
    calls = tmp_path / "help-calls.log"
    script.write_text(
        script.read_text()
        .replace(
            'if __name__ == "__main__":\n',
            f'if __name__ == "__main__":\n    if "--help" in sys.argv:\n'
            f'        open({str(calls)!r}, "a").write("help\\n")\n',
            1,
        )
        .replace("import json\n", "import json\nimport sys\n", 1)
    )
    result = run(contract, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    assert calls.read_text().splitlines() == ["help"]  # validation's; the driver ran none
    trials = load_run(result.run_dir).records
    assert len(trials) == 8 and all(r["status"] == "completed" for r in trials)


def test_a_named_column_the_log_never_holds_is_noted_on_every_record_tuning_ones_too(
    ray_local, tmp_path
):
    """`metrics.names` maps `train_loss` to a column the script never writes: each trial's record
    says so in its notes. A completed tuning trial's record is built by the driver from the reports
    it streamed; the notes, which the reports do not carry, were lost there (seen only on the
    confirmation records)."""

    def edit(contract: dict) -> None:
        contract["seeds"] = [3, 4]
        contract["budget"]["exposure"] = 2
        contract["tuning"]["trials_per_arm"] = 2
        contract["tuning"].pop("early_stop")
        contract["command"]["metrics"]["names"]["train_loss"] = "train_loss"

    result = run(
        example_app("argparse_app", tmp_path, edit), runs_dir=tmp_path / "runs", quiet=True
    )
    trials = load_run(result.run_dir).records
    assert sorted(r["phase"] for r in trials) == ["confirm"] * 4 + ["tune"] * 4
    for r in trials:
        assert r["status"] == "completed", (r["trial_id"], r["errors"][:1])
        assert any("'train_loss' was not reported" in note for note in r.get("notes") or []), r[
            "trial_id"
        ]


def test_a_flag_the_script_refuses_shows_its_usage_error_and_is_not_retried(ray_local, tmp_path):
    shown = io.StringIO()
    contract = _app(tmp_path, batch_size="big")  # a name --help lists, a value its type= refuses

    result = run(
        contract, runs_dir=tmp_path / "runs", stream=shown, keep_going=True
    )  # every trial, not fail fast

    trials = load_run(result.run_dir).records
    assert trials and all(r["status"] == "protocol_error" and r["attempts"] == 1 for r in trials)
    message = trials[0]["errors"][0]["message"]
    assert message.startswith("the script refused its flags (exit status 2): usage: train.py")
    assert "argument --batch_size: invalid int value: 'big'" in message.splitlines()[0]
    assert "invalid int value: 'big'" in shown.getvalue()


def test_plan_validate_checks_the_flag_names_against_the_scripts_help(tmp_path):
    result = validate(_app(tmp_path, optimiser={"lr": 0.1}, verbose=False))
    errors = [(d.code, d.message) for d in result.diagnostics if d.severity == "error"]
    assert errors == [
        (
            "P530",
            "config key 'optimiser.lr' would be passed as --optimiser.lr, which the script's "
            "--help does not list; did you mean --optimizer.lr?",
        )
    ]
    (found,) = [
        d for d in result.diagnostics if d.code == "P530"
    ]  # at the key, not at `args: argparse`
    lines = (tmp_path / "app" / "contract.yaml").read_text().splitlines()
    assert found.path == "config.values.optimiser.lr" and lines[found.line - 1].strip().startswith(
        "lr:"
    ), found
    (tmp_path / "app" / "train.py").write_text(
        "import sys\nsys.exit(1)\n"
    )  # no --help to read: a note
    result = validate(tmp_path / "app" / "contract.yaml")
    assert [
        d.code for d in result.diagnostics if d.severity == "error"
    ] == []  # nothing to check the names on
    assert any(d.code == "P941" and "exited with status 1" in d.message for d in result.diagnostics)
    from planner._cli.validate_text import format_result

    assert (
        "the config as argparse flags (--key=value), not checked against its --help (P941)"
        in format_result(result)
    )  # the summary no longer says the names were checked


def test_a_script_whose_help_is_slow_has_its_flags_checked_on_its_add_argument_calls(
    tmp_path, monkeypatch
):
    from planner import command_trainable
    from planner._cli.validate_text import format_result
    from planner._contract import command_help

    monkeypatch.setattr(
        command_help, "HELP_TIMEOUT_S", 1.0
    )  # the usual script imports torch for 2-10 s
    contract = _app(tmp_path, optimiser={"lr": 0.1})
    train = contract.parent / "train.py"
    train.write_text(
        train.read_text().replace("import os\n", "import os\nimport time\n\ntime.sleep(30)\n", 1)
    )
    result = validate(contract)
    assert [(d.code, d.message) for d in result.diagnostics if d.severity == "error"] == [
        (
            "P530",
            "config key 'optimiser.lr' would be passed as --optimiser.lr, which the add_argument "
            "calls in "
            "train.py do not add; did you mean --optimizer.lr?",
        )
    ]
    assert not any(d.code == "P941" for d in result.diagnostics)
    _app(
        tmp_path / "fixed"
    )  # the same script, the names right: valid, and the summary says how they were checked
    fixed = tmp_path / "fixed" / "app"
    (fixed / "train.py").write_text(train.read_text())
    result = validate(fixed / "contract.yaml")
    assert result.valid, result.diagnostics
    line = next(line for line in format_result(result).splitlines() if "argparse flags" in line)
    assert line.strip().startswith(
        "the config as argparse flags (--key=value), checked against the add_argument "
        "calls in train.py (`"
    ) and line.endswith("train.py --help` took over 1 s)")
    trainable = command_trainable(
        result.loaded.contract, fixed
    )  # plan run writes the booleans from the same reading
    assert trainable.script_help["--no-preprocess.standardize"] == SWITCH


def test_the_help_is_read_from_the_script_and_a_script_without_one_says_why(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float)\n"
        "p.parse_args()\n"
    )
    found, why = read_help([sys.executable, str(script)], tmp_path)
    assert why == "" and found.kind("lr") == VALUE and found.kind("help") == SWITCH
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(30)\n")
    found, why = read_help([sys.executable, "slow.py"], tmp_path, timeout_s=0.5)
    assert found is None and "took over 0.5 s" in why
    (tmp_path / "plain.py").write_text("print('no options here')\n")
    found, why = read_help([sys.executable, "plain.py"], tmp_path)
    assert found is None and "printed no argparse options" in why
