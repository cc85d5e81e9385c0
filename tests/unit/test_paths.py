"""The one flatten and the one config diff (planner/_contract/paths.py): the policy every caller
shares."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from planner._contract.paths import MISSING, apply_params, config_diff, diff_rows, flatten, get_path


def test_flatten_walks_mappings_and_keeps_lists_whole():
    config = {"model": {"layers": [64, 64], "dropout": 0.1}, "epochs": 3}
    assert flatten(config) == {"model.layers": [64, 64], "model.dropout": 0.1, "epochs": 3}


def test_flatten_keeps_an_empty_mapping_below_the_root_as_a_leaf():
    assert flatten({"a": {}, "b": {"c": {}}}) == {"a": {}, "b.c": {}}


def test_flatten_of_the_root_has_no_empty_path():
    assert flatten({}) == {}
    assert flatten(None) == {}
    assert flatten(3) == {}
    assert "" not in flatten({"a": 1})


def test_config_diff_names_every_changed_leaf_in_path_order():
    base = {"optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}, "epochs": 3}
    arm = {"optimizer": {"name": "adam", "lr": 0.1, "betas": [0.9, 0.99]}, "epochs": 3}
    assert config_diff(base, arm) == [
        ("optimizer.betas", MISSING, [0.9, 0.99]),
        ("optimizer.momentum", 0.9, MISSING),
        ("optimizer.name", "sgd", "adam"),
    ]
    assert diff_rows(base, arm) == [
        {"path": "optimizer.betas", "baseline": None, "arm": [0.9, 0.99], "change": "added"},
        {"path": "optimizer.momentum", "baseline": 0.9, "arm": None, "change": "removed"},
        {"path": "optimizer.name", "baseline": "sgd", "arm": "adam", "change": "changed"},
    ]


def test_config_diff_descends_into_lists_of_equal_length_only():
    assert config_diff({"layers": [64, 64]}, {"layers": [64, 128]}) == [("layers.1", 64, 128)]
    assert config_diff({"layers": [64]}, {"layers": [64, 64]}) == [("layers", [64], [64, 64])]


def test_config_diff_of_a_deletion_is_the_deleted_leaves_not_the_emptied_mapping():
    assert config_diff({"model": {"dropout": 0.1}}, {"model": {}}) == [
        ("model.dropout", 0.1, MISSING)
    ]
    assert config_diff({}, {"extra": {}}) == [("extra", MISSING, {})]


def test_config_diff_tells_types_apart():
    assert config_diff({"x": 1}, {"x": 1.0}) == [("x", 1, 1.0)]
    assert config_diff({"x": 1}, {"x": True}) == [("x", 1, True)]
    assert config_diff({"x": 1}, {"x": 1}) == []


def test_get_and_apply_params_use_the_same_dotted_paths():
    config = {"model": {"layers": [64, 32]}}
    assert get_path(config, "model.layers.1") == 32
    assert get_path(config, "model.width") is MISSING
    changed = apply_params(config, {"model.width": 8, "lr": 0.1})
    assert changed == {"model": {"layers": [64, 32], "width": 8}, "lr": 0.1}
    assert config == {"model": {"layers": [64, 32]}}  # a copy
    assert [path for path, _, _ in config_diff(config, changed)] == ["lr", "model.width"]


def test_flatten_into_lists_reaches_every_scalar():
    config = {"a": [{"b": "x"}, 2], "c": [], "d": {}}
    assert flatten(config, into_lists=True) == {"a.0.b": "x", "a.1": 2, "c": [], "d": {}}


_KEYS = st.sampled_from(["a", "b", "lr", "model", "width"])
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.just("???"),  # OmegaConf's mandatory value
)
_CONFIGS = st.recursive(
    _LEAVES, lambda inner: st.dictionaries(_KEYS, inner, max_size=3) | st.lists(inner, max_size=2)
)


@settings(max_examples=300, deadline=None)
@given(
    config=st.dictionaries(_KEYS, _CONFIGS, max_size=4),
    params=st.dictionaries(
        st.lists(_KEYS, min_size=1, max_size=3).map(".".join),
        st.one_of(st.floats(allow_nan=False), st.integers(), st.text(max_size=6), st.none()),
        min_size=1,
        max_size=3,
    ),
)
def test_tuned_values_set_without_omegaconf_are_what_omegaconf_sets(config, params):
    """A config with no interpolation takes its tuned values as plain items (no OmegaConf config a
    trial): the result is OmegaConf's update and resolve of the same values, or the OmegaConf path
    is taken."""
    import omegaconf

    def by_omegaconf():
        cfg = omegaconf.OmegaConf.create(copy.deepcopy(config))
        for path, value in params.items():
            text = value.replace("${", "\\${") if isinstance(value, str) else value
            omegaconf.OmegaConf.update(cfg, path, text, merge=False, force_add=True)
        return omegaconf.OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)

    try:
        expected: object = by_omegaconf()
    except Exception as error:  # noqa: BLE001 - the same refusal is expected of apply_params
        expected = type(error)
    try:
        got: object = apply_params(copy.deepcopy(config), params, copy.deepcopy(config))
    except Exception as error:  # noqa: BLE001
        got = type(error)
    if expected != got and not isinstance(expected, type):
        raise AssertionError((config, params, expected, got))
    if isinstance(expected, type):
        assert isinstance(got, type), (config, params, got)
