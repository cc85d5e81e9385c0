"""Tuning that leaves the arms unlike or alike where the factor is: found at validate, before any
compute.

- P412 with arm_space: the arms' ranges of the factor are the same (or the arm's holds only the
  baseline's value), so once tuned the arm is the baseline's experiment;
- P418: a tuned key reaches a factor key through an interpolation in one arm's config and not in
  another's (sgd's `lr: ${train.lr}`, adam's fixed `lr: 0.001`): only sgd's learning rate would be
  tuned.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner._contract.validate import validate

TRAINABLE = "def train(config, trial):\n    trial.report(1, val_acc=0.5)\n"


def _contract(tmp_path: Path, **fields) -> Path:
    data = {
        "version": 1,
        "name": "fair",
        "hypothesis": "h",
        "trainable": "t:train",
        "config": {
            "values": {"model": {"width": 64, "depth": 2}, "optimizer": {"name": "sgd", "lr": 0.1}}
        },
        "factor": {"name": "width", "keys": ["model.width"]},
        "baseline": {"name": "narrow", "overrides": ["model.width=64"]},
        "arms": [{"name": "wide", "overrides": ["model.width=128"]}],
        "metric": {"name": "val_acc", "mode": "max"},
        "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1, 2],
        "budget": {"unit": "epoch", "exposure": 2},
        "tuning": {
            "trials_per_arm": 4,
            "seeds": [1000],
            "space": {"optimizer.lr": {"uniform": [0.01, 1.0]}},
        },
    }
    for key, value in fields.items():
        if key == "arm_space":
            data["tuning"]["arm_space"] = value
        else:
            data[key] = value
    (tmp_path / "t.py").write_text(TRAINABLE)
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _errors(path: Path) -> list[str]:
    return [d.code for d in validate(path).diagnostics if d.severity == "error"]


@pytest.mark.parametrize(
    ("arm_space", "codes"),
    [
        (
            {
                "narrow": {"model.width": {"choice": [64, 128]}},
                "wide": {"model.width": {"choice": [64, 128]}},
            },
            ["P412"],
        ),
        (
            {"wide": {"model.width": {"choice": [64]}}},
            ["P412"],
        ),  # the arm tuned back onto the baseline's value
        (
            {"wide": {"model.width": {"choice": [128, 256]}}},
            [],
        ),  # its own range against the baseline's value
        (
            {
                "narrow": {"model.width": {"choice": [32, 64]}},
                "wide": {"model.width": {"choice": [128, 256]}},
            },
            [],
        ),
    ],
)
def test_arm_spaces_that_make_the_arm_the_baselines_experiment_are_refused(
    tmp_path, arm_space, codes
):
    assert _errors(_contract(tmp_path, arm_space=arm_space)) == codes


def _optimizer_folder(tmp_path: Path, adam_lr: str) -> dict:
    conf = tmp_path / "conf"
    (conf / "optimizer").mkdir(parents=True)
    (conf / "train.yaml").write_text(
        "defaults:\n  - optimizer: sgd\n  - _self_\ntrain: {lr: 0.1}\nmodel: {width: 64}\n"
    )
    (conf / "optimizer" / "sgd.yaml").write_text("name: sgd\nlr: ${train.lr}\n")
    (conf / "optimizer" / "adam.yaml").write_text(f"name: adam\nlr: {adam_lr}\n")
    return {
        "config": {"dir": "conf", "name": "train"},
        "factor": {"name": "optimizer", "keys": ["optimizer"]},
        "baseline": {"name": "sgd", "overrides": ["optimizer=sgd"]},
        "arms": [{"name": "adam", "overrides": ["optimizer=adam"]}],
    }


def test_a_tuned_key_that_reaches_one_arms_factor_through_an_interpolation_is_refused(tmp_path):
    path = _contract(tmp_path, **_optimizer_folder(tmp_path, "0.001"))
    data = yaml.safe_load(path.read_text())
    data["tuning"]["space"] = {"train.lr": {"log_uniform": [1e-4, 1.0]}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    (found,) = [d for d in validate(path).diagnostics if d.severity == "error"]
    assert found.code == "P418" and "in arm 'sgd' it sets 'optimizer.lr'" in found.message, (
        found.format()
    )
    assert "in arm 'adam' it sets no factor key" in found.message


def test_a_tuned_key_every_arms_factor_takes_alike_is_fair(tmp_path):
    path = _contract(tmp_path, **_optimizer_folder(tmp_path, "${train.lr}"))
    data = yaml.safe_load(path.read_text())
    data["tuning"]["space"] = {"train.lr": {"log_uniform": [1e-4, 1.0]}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert _errors(path) == []


@pytest.mark.parametrize(
    ("name", "warned"),
    [
        ("test_acc", True),
        ("acc/test", True),
        ("val_acc", False),
        ("latest_acc", False),
        ("contest_score", False),
    ],
)
def test_tuning_on_a_metric_named_as_a_test_set_one_is_warned(tmp_path, name, warned):
    path = _contract(tmp_path, metric={"name": name, "mode": "max"})
    found = [d for d in validate(path).diagnostics if d.code == "P908"]
    assert bool(found) is warned and all(d.severity == "warning" for d in found)
