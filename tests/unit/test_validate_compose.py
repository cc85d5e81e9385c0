"""Composition: each arm's config is what `hydra.compose` gives for its overrides (group choices
composed by Hydra, value overrides applied after), and composing leaves no global Hydra state."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from planner._contract.compose import compose_arms
from tests._contract_helpers import FIXTURES

CONF = FIXTURES / "conf"


def _public(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return OmegaConf.to_container(compose(config_name="train", overrides=overrides))


def _arm(overrides):
    arm = SimpleNamespace(name="a", overrides=overrides)
    contract = SimpleNamespace(
        config=SimpleNamespace(dir=str(CONF), name="train", overrides=[], values=None),
        all_arms=[arm],
        baseline=arm,
        command=None,
    )
    return compose_arms(contract, CONF)


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["optimizer=adam"],
        ["schedule=warmup_then_constant"],
        ["+optimizer@opt2=adam"],
        ["~schedule"],
        ["optimizer=adam", "model.width=3"],
        ["+model.extra=1"],
        ["schedule=warmup_cosine", "optimizer=adam"],
    ],
)
def test_an_arms_config_is_what_hydra_compose_gives(overrides):
    composed = _arm(overrides)
    assert composed.problems == []
    assert composed.raw["a"] == _public(overrides)
    assert not GlobalHydra.instance().is_initialized()


def test_a_missing_option_leaves_no_global_state_either():
    composed = _arm(["optimizer=nope"])
    assert [p.kind for p in composed.problems] == ["missing_option"]
    assert not GlobalHydra.instance().is_initialized()


def test_one_compose_per_distinct_group_choice(tmp_path):
    from planner._contract.validate import validate
    from tests._contract_helpers import edited, write_contract

    text = edited(
        "hydra.yaml",
        [
            (
                "    overrides: [optimizer=adam]",
                "    overrides: [optimizer=adam]\n  - {name: fast-sgd, overrides: [optimizer=sgd, "
                "optimizer.momentum=0.5]}",
            ),
            ("max_trials: 100", "max_trials: 30"),
        ],
    )
    result = validate(write_contract(tmp_path, text))
    assert result.valid, [d.format() for d in result.diagnostics]
    # sgd and fast-sgd share the group choice: two composes for three arms
    from planner._contract.compose import compose_arms

    assert compose_arms(result.loaded.contract, tmp_path).composes == 2


def test_a_primary_config_that_overrides_hydras_own_defaults_composes_as_hydra_compose_does(
    tmp_path,
):
    (tmp_path / "train.yaml").write_text(
        "defaults:\n  - override hydra/job_logging: disabled\n  - _self_\nlr: 0.1\n"
    )
    arm = SimpleNamespace(name="a", overrides=["lr=0.2"])
    contract = SimpleNamespace(
        config=SimpleNamespace(dir=str(tmp_path), name="train", overrides=[], values=None),
        all_arms=[arm],
        baseline=arm,
        command=None,
    )
    composed = compose_arms(contract, tmp_path)
    assert composed.problems == []
    assert composed.raw["a"] == {"lr": 0.2}
    assert not GlobalHydra.instance().is_initialized()
