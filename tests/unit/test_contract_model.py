"""The contract model: defaults written out, hash stable under formatting."""

import pytest
import yaml
from pydantic import ValidationError

from planner._contract.model import Contract, parse_duration, parse_memory

MINIMAL = """
version: 1
name: demo
hypothesis: B beats A.
trainable: toy:train
config: {values: {lr: 0.1, opt: sgd}}
factor: {name: opt}
baseline: {name: a, overrides: [opt=sgd]}
arms: [{name: b, overrides: [opt=adam]}]
metric: {name: acc, mode: max}
acceptance: {min_effect: 0.01}
seeds: [0, 1]
budget: {exposure: 3}
"""


def test_defaults_are_written_out_in_the_frozen_copy():
    frozen = Contract.model_validate(yaml.safe_load(MINIMAL)).frozen()
    assert frozen["factor"]["keys"] == ["opt"]
    assert frozen["acceptance"] == {"min_effect": 0.01, "alpha": 0.05, "test": "welch", "correction": "holm"}
    assert frozen["budget"]["unit"] == "step"
    assert frozen["budget"]["resources"] == {"cpu": 1, "gpu": 0, "custom": {}}
    assert frozen["failures"] == {"retries": 0, "diverged_value": None}


def test_hash_ignores_key_order_and_comments_but_not_values():
    a = Contract.model_validate(yaml.safe_load(MINIMAL))
    reordered = yaml.safe_load("# a comment\n" + MINIMAL)
    reordered = dict(reversed(list(reordered.items())))
    assert Contract.model_validate(reordered).sha256() == a.sha256()
    changed = yaml.safe_load(MINIMAL)
    changed["seeds"] = [0, 2]
    assert Contract.model_validate(changed).sha256() != a.sha256()


def test_frozen_copy_round_trips():
    c = Contract.model_validate(yaml.safe_load(MINIMAL))
    assert Contract.model_validate(c.frozen()) == c


@pytest.mark.parametrize(
    "patch",
    [
        {"name": "Bad Name"},
        {"version": 2},
        {"acceptance": {"min_effect": 0}},
        {"acceptance": {"min_effect": 0.1, "alpha": 0.7}},
        {"seeds": [0]},
        {"budget": {"exposure": 0}},
        {"trainable": "not a path"},
        {"config": {"dir": "conf"}},
        {"extra_key": 1},
    ],
)
def test_out_of_range_values_are_refused(patch):
    data = yaml.safe_load(MINIMAL)
    data.update(patch)
    with pytest.raises(ValidationError):
        Contract.model_validate(data)


def test_durations_and_memory_sizes():
    assert parse_duration("2h") == 7200
    assert parse_duration("20m") == 1200
    assert parse_duration(30) == 30
    assert parse_memory("2G") == 2 * 1024**3
    with pytest.raises(ValueError):
        parse_duration("soon")
