"""Composition: the direct Hydra path gives exactly what `hydra.compose` gives, and leaves no global state."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from planner._contract.compose import compose_without_hydra_node
from tests._contract_helpers import FIXTURES

CONF = FIXTURES / "conf"


def _public(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return OmegaConf.to_container(compose(config_name="train", overrides=overrides))


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
def test_direct_compose_matches_hydra_compose(overrides):
    assert compose_without_hydra_node(CONF, "train", overrides) == _public(overrides)
    assert not GlobalHydra.instance().is_initialized()


@pytest.mark.parametrize("overrides", [["optimizer=nope"], ["hydra.job.name=x"]])
def test_direct_compose_refuses_what_it_is_not_sure_of(overrides):
    with pytest.raises(Exception):  # noqa: B017 - the caller falls back to hydra.compose on any error
        compose_without_hydra_node(CONF, "train", overrides)


def test_one_compose_per_distinct_group_choice(tmp_path):
    from planner._contract.validate import validate
    from tests._contract_helpers import edited, write_contract

    text = edited(
        "hydra.yaml",
        [
            (
                "    overrides: [optimizer=adam]",
                "    overrides: [optimizer=adam]\n  - {name: fast-sgd, overrides: [optimizer=sgd, optimizer.momentum=0.5]}",
            ),
            ("max_trials: 100", "max_trials: 30"),
        ],
    )
    result = validate(write_contract(tmp_path, text))
    assert result.valid, [d.format() for d in result.diagnostics]
    # sgd and fast-sgd share the group choice: two composes for three arms
    from planner._contract.compose import compose_arms

    assert compose_arms(result.loaded.contract, tmp_path).composes == 2
