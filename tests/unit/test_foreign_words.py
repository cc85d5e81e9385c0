"""`plan validate` maps the words users bring from Optuna, Ray Tune and W&B sweeps to planner's
own."""

from __future__ import annotations

import pytest

from planner._contract.validate import validate
from tests._runs import synthetic_contract, write_contract_data


def _hints(tmp_path, data) -> dict[str, str]:
    result = validate(write_contract_data(tmp_path, data))
    assert not result.valid
    return {d.path: d.hint for d in result.diagnostics}


TUNING = {
    "trials_per_arm": 4,
    "seeds": [1],
    "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
}


@pytest.mark.parametrize(
    ("where", "key", "means"),
    [
        ((), "direction", "metric.mode"),
        (("metric",), "goal", "metric.mode"),
        (("tuning",), "n_trials", "tuning.trials_per_arm"),
        (("tuning",), "num_samples", "tuning.trials_per_arm"),
        (("budget",), "max_iter", "budget.exposure"),
        (("budget",), "epochs", "budget.exposure"),
        (("tuning",), "method", "tuning.sampler: {name: random}"),
        (("tuning",), "parameters", "tuning.space"),
    ],
)
def test_an_unknown_key_from_another_tool_names_planners_word(tmp_path, where, key, means):
    data = synthetic_contract(tuning=dict(TUNING))
    node = data
    for part in where:
        node = node[part]
    node[key] = "minimize" if key in ("direction", "goal") else "random" if key == "method" else 5
    hints = _hints(tmp_path, data)
    hint = hints[".".join([*where, key])]
    assert f"`{means}" in hint and "Did you mean" not in hint and "Remove it" not in hint


def test_sampler_random_gets_the_mapping_it_means(tmp_path):
    data = synthetic_contract(tuning={**TUNING, "sampler": "random"})
    assert _hints(tmp_path, data)["tuning.sampler"] == "Write `sampler: {name: random}`."


def test_mode_minimize_gets_min(tmp_path):
    data = synthetic_contract()
    data["metric"]["mode"] = "minimize"
    assert "`mode: min`" in _hints(tmp_path, data)["metric.mode"]
