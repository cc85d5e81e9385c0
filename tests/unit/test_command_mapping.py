"""`command:` as a mapping (seed_key, budget_key, metrics): the model, the rules P520-P527 and P940,
and the trainable it builds. The fixture is examples/unchanged_app, copied and edited."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from planner import command_trainable
from planner._contract.validate import load_contract, validate

APP = Path(__file__).resolve().parents[2] / "examples" / "unchanged_app"


def app_contract(tmp_path: Path, edit=None) -> Path:
    folder = tmp_path / "app"
    shutil.copytree(APP, folder, ignore=shutil.ignore_patterns("outputs", "runs", "__pycache__"))
    data = yaml.safe_load((folder / "contract.yaml").read_text())
    if edit is not None:
        edit(data)
    (folder / "contract.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / "contract.yaml"


def codes(path: Path) -> list[str]:
    return [d.code for d in validate(path).diagnostics]


def test_the_example_app_has_not_one_planner_line():
    for path in [APP / "train.py", *sorted((APP / "conf").rglob("*.yaml"))]:
        text = path.read_text()
        assert not re.search(r"planner|PLANNER", text, re.IGNORECASE), (
            f"{path} mentions the planner"
        )


def test_the_example_contract_is_valid_without_warnings(tmp_path):
    assert codes(app_contract(tmp_path)) == []


def test_the_string_form_still_works_and_reads_as_a_mapping(tmp_path):
    def edit(data):
        data["command"] = "python train.py"

    loaded = load_contract(app_contract(tmp_path, edit)).contract
    assert loaded.command == "python train.py" and loaded.command_line == "python train.py"
    assert loaded.command_spec.run == "python train.py" and loaded.command_spec.metrics is None


def set_command(**fields):
    def edit(data):
        data["command"].update(fields)

    return edit


@pytest.mark.parametrize(
    "fields, code",
    [
        ({"seed_key": "trainer.seed"}, "P520"),
        ({"budget_key": "trainer.epochs"}, "P521"),
        ({"seed_key": "preprocess.standardize"}, "P522"),
        ({"budget_key": "preprocess"}, "P522"),  # covers the factor's key
        ({"seed_key": "optimizer.lr"}, "P523"),
        ({"budget_key": "seed"}, "P524"),
        (
            {
                "metrics": {
                    "file": "m.csv",
                    "format": "csv",
                    "step": "epoch",
                    "step_base": 0,
                    "names": {"loss": "l"},
                }
            },
            "P525",
        ),
        (
            {"metrics": {"file": "../m.csv", "format": "csv", "step": "epoch", "step_base": 0}},
            "P526",
        ),
        (
            {"metrics": {"file": "/tmp/m.csv", "format": "csv", "step": "epoch", "step_base": 0}},
            "P526",
        ),
        ({"budget_key": "trainer"}, "P527"),
        ({"checkpoint": {"file": "../ckpt/*.ckpt", "keep": "last"}}, "P528"),
        ({"checkpoint": {"file": "/ckpt/last.ckpt"}}, "P528"),
        (
            {"checkpoint": {"file": "ckpt/*.ckpt", "resume_key": "ckpt_path"}},
            "P529",
        ),  # not in the app's config
        (
            {"checkpoint": {"file": "ckpt/*.ckpt", "resume_key": "trainer.max_epochs"}},
            "P524",
        ),  # the budget's key
        (
            {"checkpoint": {"file": "ckpt/*.ckpt", "resume_key": "data.n_train"}},
            "P529",
        ),  # holds an integer
        ({"checkpoint": {"file": "ckpt/*.ckpt", "resume_key": "preprocess.standardize"}}, "P522"),
        ({"metrics": {"format": "stdout", "pattern": "epoch (?P<step>\\d+"}}, "P533"),
        ({"metrics": {"format": "stdout", "pattern": "epoch \\d+ acc (?P<val_acc>\\S+)"}}, "P534"),
        (
            {"metrics": {"format": "stdout", "pattern": "epoch (?P<step>\\d+) acc (?P<acc>\\S+)"}},
            "P535",
        ),
        (
            {
                "metrics": {
                    "format": "stdout",
                    "pattern": "epoch (?P<step>\\d+) acc (?P<acc>\\S+)",
                    "names": {"val_acc": "acc", "val_loss": "loss"},
                }
            },
            "P535",
        ),  # a name no group holds
    ],
)
def test_each_rule_of_the_mapping_form(tmp_path, fields, code):
    found = codes(app_contract(tmp_path, set_command(**fields)))
    assert code in found, found


def test_a_tuned_key_in_arm_space_is_refused_too(tmp_path):
    def edit(data):
        data["factor"]["keys"] = ["preprocess"]
        data["tuning"]["arm_space"] = {"raw": {"preprocess.standardize": {"choice": [False]}}}
        data["command"]["seed_key"] = "preprocess.standardize"

    result = validate(app_contract(tmp_path, edit))
    assert {"P522", "P523"} <= {d.code for d in result.diagnostics}


def test_lightning_epochs_without_step_base_warn(tmp_path):
    def edit(data):
        del data["command"]["metrics"]["step_base"]

    result = validate(app_contract(tmp_path, edit))
    assert result.valid and [d.code for d in result.diagnostics] == ["P940"]
    assert not validate(app_contract(tmp_path / "strict", edit), strict=True).valid


def test_schema_refuses_an_unknown_format_and_key(tmp_path):
    def edit(data):
        data["command"]["metrics"]["format"] = "tsv"
        data["command"]["seeds_key"] = "seed"

    found = codes(app_contract(tmp_path, edit))
    assert "P100" in found and "P103" in found, found


def test_the_trainable_passes_seed_and_budget_as_overrides_and_reads_the_metrics_file(tmp_path):
    loaded = load_contract(app_contract(tmp_path))
    train = command_trainable(loaded.contract, loaded.dir, loaded.configs)
    trial = SimpleNamespace(arm="raw", seed=7, budget=8, phase="confirm", params={})
    overrides = train.trial_overrides(loaded.configs["raw"], trial)
    assert overrides[-2:] == ["seed=7", "trainer.max_epochs=8"]
    expected = train.expected_config(loaded.configs["raw"], trial)
    assert expected["seed"] == 7 and expected["trainer"]["max_epochs"] == 8
    assert train.metrics == {
        "file": "metrics.csv",
        "format": "csv",
        "step": "epoch",
        "step_base": 0,
        "names": {"val_acc": "val_acc", "val_loss": "val_loss"},
        "require": "val_acc",
    }
    assert type(train).from_dict(train.to_dict()) == train


def test_validate_shows_how_seed_budget_and_metrics_reach_the_app(tmp_path):
    from planner._cli.validate_text import format_result

    result = validate(app_contract(tmp_path))
    text = format_result(result)
    assert "  command  python train.py (seed -> seed, exposure -> trainer.max_epochs)" in text
    assert (
        "metrics from metrics.csv (csv; step epoch, from 0; val_acc <- val_acc, val_loss <- "
        "val_loss)" in text
    )
    assert result.summary["command"]["metrics"]["step_base"] == 0

    def edit(data):
        data["command"] = "python train.py"

    text = format_result(validate(app_contract(tmp_path / "string", edit)))
    assert (
        "(seed in $PLANNER_SEED only, exposure in $PLANNER_BUDGET only)" in text
        and "from planner.report" in text
    )


def test_a_bad_mapping_gets_the_mapping_forms_errors_only(tmp_path):
    def edit(data):
        data["command"] = {"seed_key": "seed"}

    result = validate(app_contract(tmp_path, edit))
    assert [(d.code, d.message) for d in result.diagnostics] == [
        ("P101", "missing required key 'run' in command")
    ]


def test_checkpoint_alone_is_valid_and_reaches_the_trainable(tmp_path):
    """`checkpoint: {file, keep}` without resume_key is valid; keep defaults to all."""
    path = app_contract(
        tmp_path, set_command(checkpoint={"file": "hf/checkpoint-*", "keep": "last"})
    )
    assert codes(path) == []
    loaded = load_contract(path)
    train = command_trainable(loaded.contract, loaded.dir, loaded.configs)
    assert train.checkpoint == {"file": "hf/checkpoint-*", "resume_key": None, "keep": "last"}
    assert type(train).from_dict(train.to_dict()) == train
    bare = load_contract(
        app_contract(tmp_path / "bare", set_command(checkpoint={"file": "c.ckpt"}))
    ).contract
    assert bare.command_spec.checkpoint.keep == "all"
    found = codes(
        app_contract(tmp_path / "bad", set_command(checkpoint={"file": "c.ckpt", "keep": "first"}))
    )
    assert found and found[0].startswith("P1"), found


def test_validate_shows_where_checkpoints_are_and_what_is_kept(tmp_path):
    from planner._cli.validate_text import format_result

    text = format_result(
        validate(
            app_contract(
                tmp_path,
                set_command(
                    checkpoint={"file": "ckpt/*.ckpt", "resume_key": "data.name", "keep": "last"}
                ),
            ),
            strict=False,
        )
    )
    assert "P529" in text  # data.name is not in the app's config
    text = format_result(
        validate(
            app_contract(
                tmp_path / "ok", set_command(checkpoint={"file": "hf/checkpoint-*", "keep": "none"})
            )
        )
    )
    assert "checkpoints hf/checkpoint-* (not passed to the script; keep none)" in text


def test_a_metric_name_metrics_names_lacks_gets_the_near_name_it_has(tmp_path):
    """metric.name val_accuracy, metrics.names {val_acc: ...}: the typo is metric.name's; P525 said
    only to add `val_accuracy: ...` to metrics.names."""

    def edit(data):
        data["metric"]["name"] = "val_accuracy"

    (found,) = [d for d in validate(app_contract(tmp_path, edit)).diagnostics if d.code == "P525"]
    assert "it names 'val_acc'" in found.message and found.hint.startswith(
        "Did you mean metric.name: val_acc?"
    )


def test_the_config_check_leaves_out_interpolations_in_lists_as_in_mappings(tmp_path):
    """`lrs: ["${lr}", 0.01]` is derived like `warmup_lr: ${lr}`: config_diff names list items
    (`lrs.0`), so the derived paths must too, or the check compared what the app resolved with the
    contract's value."""
    from planner._core.errors import CommandConfigMismatchError
    from planner._trial.config_check import ConfigCheck

    composed = tmp_path / ".hydra" / "config.yaml"
    composed.parent.mkdir()
    composed.write_text('lr: 0.1\nwarmup_lr: ${lr}\nlrs: ["${lr}", 0.01]\nepochs: 3\n')
    ConfigCheck(composed, {"lr": 0.1, "warmup_lr": 0.5, "lrs": [0.5, 0.01], "epochs": 3}).run()
    with pytest.raises(CommandConfigMismatchError, match=r"lrs\.1: contract 0\.02, script 0\.01"):
        ConfigCheck(composed, {"lr": 0.1, "warmup_lr": 0.1, "lrs": [0.1, 0.02], "epochs": 3}).run()


def test_a_stdout_pattern_is_valid_and_shown(tmp_path):
    from planner._cli.validate_text import format_result

    pattern = r"^epoch (?P<step>\d+) val_acc (?P<val_acc>\S+) val_loss (?P<val_loss>\S+)$"
    edit = set_command(metrics={"format": "stdout", "pattern": pattern, "step_base": 0})
    result = validate(app_contract(tmp_path, edit))
    assert [d.code for d in result.diagnostics] == []
    assert f"metrics from the stdout lines matching '{pattern}' (stdout; step step, from 0;" in (
        format_result(result)
    )


@pytest.mark.parametrize(
    "metrics, words",
    [
        ({"format": "stdout"}, "give `pattern`"),
        ({"format": "stdout", "pattern": "(?P<step>\\d+)", "file": "m.csv"}, "remove `file`"),
        ({"format": "csv", "step": "epoch"}, "needs `file`"),
        ({"format": "csv", "file": "m.csv", "pattern": "x"}, "are for format: stdout"),
    ],
)
def test_the_schema_says_which_of_file_and_pattern_a_format_takes(tmp_path, metrics, words):
    result = validate(app_contract(tmp_path, set_command(metrics=metrics)))
    assert any(words in d.message for d in result.diagnostics), result.diagnostics
