"""The plan and the tuning space: pure functions of the contract."""

import pytest
import yaml

from planner._contract.model import Contract
from planner._plan.space import arm_space, grid, to_optuna
from planner._plan.trials import confirm_trial_id, make_plan, tune_trial_id

BASE = """
version: 1
name: demo
hypothesis: B beats A.
trainable: toy:train
config: {values: {opt: {name: sgd, lr: 0.1}, width: 64}}
factor: {name: opt}
baseline: {name: a, overrides: [opt.name=sgd]}
arms: [{name: b, overrides: [opt.name=adam]}, {name: c, overrides: [opt.name=rms]}]
metric: {name: acc, mode: max}
acceptance: {min_effect: 0.01}
seeds: [0, 1, 2]
budget: {exposure: 5, max_trials: 100}
tuning:
  trials_per_arm: 4
  seeds: [100, 101]
  space: {opt.lr: {log_uniform: [1.0e-4, 1.0]}, width: {choice: [32, 64]}}
  arm_space: {b: {opt.lr: {log_uniform: [1.0e-5, 1.0e-2]}}}
"""


def contract(**patch):
    data = yaml.safe_load(BASE)
    for key, value in patch.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return Contract.model_validate(data)


def test_plan_expands_arms_seeds_and_trials_with_stable_ids():
    plan = make_plan(contract())
    assert plan.arms == ("a", "b", "c")
    assert len(plan.tune) == 3 * 2 * 4 and len(plan.confirm) == 3 * 3
    assert plan.planned_count == 33
    assert plan.tune[0].trial_id == "tune-a-s100-t000"
    assert plan.tune[5].trial_id == "tune-a-s101-t001"
    assert plan.confirm[-1].trial_id == "confirm-c-s2"
    assert len({t.trial_id for t in plan.trials}) == plan.planned_count
    assert make_plan(contract()) == plan
    assert [(g.arm, g.seed, g.size) for g in plan.tune_groups][:2] == [("a", 100, 4), ("a", 101, 4)]
    assert (
        tune_trial_id("x", 7, 12) == "tune-x-s7-t012" and confirm_trial_id("x", 3) == "confirm-x-s3"
    )


def test_plan_without_tuning_has_only_confirmation():
    plan = make_plan(contract(tuning=None))
    assert plan.tune == () and len(plan.confirm) == 9 and plan.tune_groups == ()


def test_budget_max_trials_names_both_numbers():
    from planner._contract.rules import max_trials_problem

    plan = make_plan(contract(budget={"exposure": 5, "max_trials": 20}))
    problem = max_trials_problem(plan.counts, plan.max_trials)
    assert problem is not None and "33" in problem and "20" in problem
    plan = make_plan(contract())
    assert max_trials_problem(plan.counts, plan.max_trials) is None


def test_plan_as_dict_lists_every_trial():
    data = make_plan(contract()).as_dict()
    assert data["planned_count"] == 33
    assert [p["phase"] for p in data["phases"]] == ["tune", "confirm"]
    assert data["phases"][1]["trials"][0] == {
        "trial_id": "confirm-a-s0",
        "phase": "confirm",
        "arm": "a",
        "seed": 0,
        "index": 0,
    }


def test_arm_space_overlays_the_arms_own_range():
    c = contract()
    assert arm_space(c.tuning, "a")["opt.lr"].bounds == (1e-4, 1.0)
    assert arm_space(c.tuning, "b")["opt.lr"].bounds == (1e-5, 1e-2)
    assert set(arm_space(c.tuning, "b")) == {"opt.lr", "width"}


def test_optuna_distributions_match_the_declared_kinds():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    tuning = contract(
        tuning={
            "trials_per_arm": 2,
            "seeds": [9],
            "space": {
                "a": {"log_uniform": [1e-3, 1]},
                "b": {"uniform": [0, 0.5]},
                "c": {"int": [1, 4]},
                "d": {"choice": ["x", "y"]},
            },
        }
    ).tuning
    dists = to_optuna(arm_space(tuning, "a"))
    assert dists["a"] == FloatDistribution(1e-3, 1.0, log=True)
    assert dists["b"] == FloatDistribution(0.0, 0.5)
    assert dists["c"] == IntDistribution(1, 4)
    assert dists["d"] == CategoricalDistribution(["x", "y"])


def test_samplers_are_the_declared_ones_with_the_declared_seed_and_draw_by_index():
    from planner._dispatch.search import SweepStudy

    c = contract()
    space = to_optuna(arm_space(c.tuning, "a"))

    def draws(sampler_decl, indices=(0, 1, 2)):
        study = SweepStudy(None, "a", sampler_decl, space, "max")
        return [study.ask(i, f"t{i}")[1]["opt.lr"] for i in indices]

    tpe = c.tuning.sampler
    assert draws(tpe) == draws(tpe)
    other = tpe.model_copy(update={"seed": tpe.seed + 1})
    assert draws(other) != draws(tpe)
    random_decl = tpe.model_copy(update={"name": "random"})
    assert draws(random_decl) == draws(random_decl)
    # the draw at an index does not depend on what was asked before it (a resumed sweep starts
    # later)
    assert draws(random_decl, (2,)) == draws(random_decl)[2:]
    assert len(set(draws(random_decl))) == 3


def test_grid_takes_only_choices():
    c = contract()
    with pytest.raises(ValueError, match="opt.lr"):
        grid(arm_space(c.tuning, "a"))
    only_choice = {"width": arm_space(c.tuning, "a")["width"]}
    assert grid(only_choice) == {"width": [32, 64]}


def test_the_plan_lists_as_many_trials_as_planned_trials_counts():
    from planner._contract.rules import planned_trials
    from planner._plan.estimate import estimate

    for c in (contract(), contract(tuning=None)):
        counts = planned_trials(c)
        assert make_plan(c).counts == counts
        assert estimate(c)["trials_planned"] == counts["total"]


def test_max_trials_holds_at_the_limit_and_without_one():
    from planner._contract.rules import max_trials_problem

    assert max_trials_problem({"tune": 3, "confirm": 2, "total": 5}, 5) is None
    assert max_trials_problem({"tune": 3, "confirm": 2, "total": 5}, None) is None
