"""The one spelling of budget.resources in Ray's names (no Ray needed: the functions are pure)."""

from __future__ import annotations

import pytest

from planner import UsageError
from planner._contract.model import Budget, Resources
from planner._dispatch.cluster import resources_for, task_options


def test_the_contract_default_asks_for_one_cpu():
    assert resources_for(Resources()) == {"CPU": 1.0, "GPU": 0.0}
    assert task_options(Resources()) == {"num_cpus": 1.0, "num_gpus": 0.0}


def test_tune_and_tasks_spell_the_same_request():
    budget = Budget(
        exposure=2, resources={"cpu": 2, "gpu": 0.5, "custom": {"slot": 1, "unused": 0}}
    )
    request = resources_for(budget)
    options = task_options(budget)
    assert request == {"CPU": 2.0, "GPU": 0.5, "slot": 1.0}
    assert (options["num_cpus"], options["num_gpus"], options["resources"]) == (
        request["CPU"],
        request["GPU"],
        {"slot": 1.0},
    )


def test_a_custom_resource_named_like_ray_s_own_is_refused():
    with pytest.raises(UsageError, match="Ray's own resource 'CPU'"):
        resources_for(Resources(custom={"CPU": 1}))
