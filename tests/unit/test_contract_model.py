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
    assert frozen["acceptance"] == {
        "min_effect": 0.01,
        "alpha": 0.05,
        "test": "paired",
        "correction": "holm",
    }
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


TUNED = (
    MINIMAL + "tuning: {trials_per_arm: 2, seeds: [1000], sampler: {name: random, seed: 0}, "
    "space: {lr: {uniform: [0.01, 1]}}}\n"
)


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ("seeds: [0, 1]", "seeds: [true, false]", "P102"),  # read as 1 and 0 before
        ("seeds: [0, 1]", 'seeds: ["0", "1"]', "P102"),
        ("exposure: 3", "exposure: true", "P102"),
        ("min_effect: 0.01", 'min_effect: "0.01"', "P102"),
        ("budget: {exposure: 3}", 'budget: {exposure: 3}\nconfirmation: {looks: "2"}', "P102"),
        ("trials_per_arm: 2", "trials_per_arm: 2.0", "P102"),
        ("uniform: [0.01, 1]", 'uniform: ["0.01", 1]', "P102"),
        # numpy seeds modulo 2**32: the tuning seed 2**32 drew the confirmation seed 0's numbers
        ("seeds: [1000]", "seeds: [4294967296]", "P103"),
        ("seeds: [0, 1]", "seeds: [0, -1]", "P103"),
        ("seed: 0}", "seed: -1}", "P103"),  # Optuna refused it mid-run: an internal error
        ("seed: 0}", "seed: 4294967296}", "P103"),
    ],
)
def test_a_value_of_another_type_or_a_seed_numpy_would_cut_is_refused(tmp_path, old, new, code):
    from planner._contract.validate import validate

    assert old in TUNED
    (tmp_path / "toy.py").write_text("def train(config, trial):\n    trial.report(1, acc=0.5)\n")
    path = tmp_path / "contract.yaml"
    path.write_text(TUNED.replace(old, new))
    result = validate(path)
    assert {d.code for d in result.diagnostics if d.severity == "error"} == {code}, [
        d.format() for d in result.diagnostics
    ]


def test_the_largest_seed_numpy_takes_is_a_seed_and_an_integer_is_a_number(tmp_path):
    from planner._contract.validate import validate

    (tmp_path / "toy.py").write_text("def train(config, trial):\n    trial.report(1, acc=0.5)\n")
    path = tmp_path / "contract.yaml"
    path.write_text(
        TUNED.replace("seeds: [1000]", "seeds: [4294967295]").replace(
            "min_effect: 0.01", "min_effect: 1"
        )
    )
    assert not [d.format() for d in validate(path).diagnostics if d.severity == "error"]


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bucket/planner",
        "s3://checkpoints/planner?endpoint_override=127.0.0.1:9000&scheme=http",
        "gs://bucket/prefix",
        "/mnt/nfs/planner",
        "hdfs://namenode@host:8020/planner",
    ],
)
def test_storage_takes_a_uri_pyarrow_opens_or_an_absolute_path(uri):
    c = Contract.model_validate({**yaml.safe_load(MINIMAL), "storage": uri})
    assert c.storage == uri and c.frozen()["storage"] == uri
    assert Contract.model_validate(c.frozen()) == c


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("runs/storage", "absolute path"),
        ("ftp://host/x", "not a storage pyarrow opens"),
        ("s3://AKIA:secret@bucket/x", "credentials"),
        ("s3://bucket/x?region=us-east-1&secret_key=abc", "credentials (secret_key=)"),
        ("s3://", "names no bucket"),
        ("", "at least 1 character"),
    ],
)
def test_storage_refuses_what_is_not_one_place_for_every_node(uri, said):
    with pytest.raises(ValidationError, match="storage") as error:
        Contract.model_validate({**yaml.safe_load(MINIMAL), "storage": uri})
    assert said in str(error.value)


def test_a_contract_without_storage_keeps_its_hash():
    c = Contract.model_validate(yaml.safe_load(MINIMAL))
    assert c.storage is None and "storage" not in c.frozen()
    stored = Contract.model_validate({**yaml.safe_load(MINIMAL), "storage": "s3://b/p"})
    assert stored.sha256() != c.sha256()
