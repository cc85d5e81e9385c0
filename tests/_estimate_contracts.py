"""A tuned two-arm contract for the tests of `plan estimate` and `plan power`, with fields to
patch."""

from __future__ import annotations

import copy

from planner._contract.model import Contract

TUNED = {
    "version": 1,
    "name": "est",
    "hypothesis": "b beats a",
    "trainable": "m:f",
    "config": {"values": {"x": 0, "lr": 0.1}},
    "factor": {"name": "x"},
    "baseline": {"name": "a", "overrides": ["x=0"]},
    "arms": [{"name": "b", "overrides": ["x=1"]}],
    "metric": {"name": "acc", "mode": "max"},
    "acceptance": {"min_effect": 0.02},
    "seeds": [0, 1, 2, 3, 4],
    "budget": {"exposure": 9},
    "tuning": {
        "trials_per_arm": 9,
        "seeds": [1000],
        "space": {"lr": {"log_uniform": [1e-3, 1.0]}},
        "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 3},
    },
}


def contract(**patch):
    data = copy.deepcopy(TUNED)
    data.update(patch)
    return Contract.model_validate(data)
