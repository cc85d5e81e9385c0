"""`${hydra:...}` in a `command:` contract's configs: Hydra's own resolver is let
through, kept as written in the composed config; every other resolver, and `hydra` anywhere but
plainly in a value, stays P205."""

from __future__ import annotations

import json

import pytest

from planner._contract.compose import calls_resolver
from planner._contract.paths import apply_params, resolve
from planner._contract.validate import validate
from tests._contract_helpers import edited, write_contract

COMMAND = ("trainable: fixture_trainable:train", "command: python fixture_trainable.py")


def _validate(tmp_path, value: str, *, command: bool = True):
    edits = [("data: {batch_size: 32}", f"data: {{batch_size: 32}}\n    out: {json.dumps(value)}")]
    result = validate(
        write_contract(tmp_path, edited("inline.yaml", edits + ([COMMAND] if command else [])))
    )
    return result, [d for d in result.diagnostics if d.severity == "error"]


@pytest.mark.parametrize(
    "value",
    [
        "${hydra:runtime.output_dir}",
        "${hydra:runtime.output_dir}/checkpoints",
        "${hydra:job.name}-${optimizer.name}",
    ],
)
def test_a_command_contract_may_use_hydras_own_resolver(tmp_path, value):
    result, errors = _validate(tmp_path, value)
    assert not errors, [(d.code, d.message) for d in errors]


@pytest.mark.parametrize(
    "value",
    [
        "${oc.env:HOME}",
        "${${hydra:job.name}}",
        "${hydra:${model.width}}",
        "${oc.select:${hydra:job.name},x}",
        "${hydra_x:job.name}",
    ],
)
def test_every_other_resolver_and_hydra_inside_another_interpolation_stay_refused(tmp_path, value):
    _, errors = _validate(tmp_path, value)
    assert [d.code for d in errors] == ["P205"], [(d.code, d.message) for d in errors]


def test_a_function_trainable_gets_no_hydra_resolver_and_is_told_why(tmp_path):
    _, errors = _validate(tmp_path, "${hydra:runtime.output_dir}", command=False)
    assert [d.code for d in errors] == ["P205"]
    assert "runs without Hydra" in errors[0].message


def test_the_interpolation_is_kept_as_written_and_references_to_it_follow():
    raw = {
        "out": "${hydra:runtime.output_dir}",
        "ckpt": "${out}/ckpt",
        "lr": 0.1,
        "name": "lr${lr}",
    }
    assert resolve(raw) == {
        "out": "${hydra:runtime.output_dir}",
        "ckpt": "${hydra:runtime.output_dir}/ckpt",
        "lr": 0.1,
        "name": "lr0.1",
    }
    assert apply_params(resolve(raw), {"lr": 0.5}, raw)["name"] == "lr0.5"
    assert not calls_resolver("${hydra:runtime.output_dir}") and calls_resolver(
        "${hydra:x}", hydra=False
    )


def test_a_tuning_choice_stays_plain_even_in_a_command_contract(tmp_path):
    edits = [
        COMMAND,
        (
            "metric: {name: loss, mode: min}",
            "metric: {name: loss, mode: min}\ntuning:\n  trials_per_arm: 2\n"
            "  seeds: [9]\n  space:\n    optimizer.name: {choice: [sgd, '${hydra:job.name}']}",
        ),
    ]
    result = validate(write_contract(tmp_path, edited("inline.yaml", edits)))
    assert [d.code for d in result.diagnostics if d.severity == "error"] == ["P205"]
