"""Sequential confirmation in `plan run`: the runner-side looks (pure), and the look sizes `plan
validate` checks."""

from __future__ import annotations

import copy

import pytest

from planner._contract.model import Contract
from planner._dispatch.sequential_confirm import SequentialConfirmation, comparison_alpha
from planner._plan.trials import confirm_trial_id
from planner._stats.looks import look_batches

BASE = {
    "version": 1,
    "name": "seq",
    "hypothesis": "b beats a",
    "trainable": "m:f",
    "config": {"values": {"x": 0}},
    "factor": {"name": "x"},
    "baseline": {"name": "a", "overrides": ["x=0"]},
    "arms": [{"name": "b", "overrides": ["x=1"]}],
    "metric": {"name": "acc", "mode": "max"},
    "acceptance": {"min_effect": 0.05},
    "seeds": [0, 1, 2, 3, 4, 5],
    "budget": {"exposure": 3},
    "confirmation": {"looks": 3, "futility": True},
}


def contract(**patch):
    data = copy.deepcopy(BASE)
    data.update(patch)
    return Contract.model_validate(data)


def record(arm, seed, value, status="completed"):
    return {
        "trial_id": confirm_trial_id(arm, seed),
        "phase": "confirm",
        "arm": arm,
        "seed": seed,
        "status": status,
        "reports": [{"step": 3, "metrics": {"acc": value}, "time_s": 0.1}],
    }


def records(values: dict[str, dict[int, float]]) -> dict[str, dict]:
    out = {}
    for arm, by_seed in values.items():
        for seed, v in by_seed.items():
            r = record(arm, seed, v)
            out[r["trial_id"]] = r
    return out


def test_batches_follow_the_contract_order_of_seeds():
    assert look_batches([5, 3, 9, 1, 7, 2], 3) == [[5, 3], [9, 1], [7, 2]]


def test_the_first_look_asks_for_the_first_batch_of_every_arm_and_the_baseline():
    seq = SequentialConfirmation(contract())
    state = seq.evaluate({})
    assert state.needed == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert state.running == ["b"] and state.arms["b"].waiting == 0


def test_a_clear_effect_stops_the_arm_and_nothing_more_is_needed():
    seq = SequentialConfirmation(contract())
    noise = [0.0, 0.01, -0.01, 0.005, -0.005, 0.0]
    done = records(
        {"a": {s: 0.5 + noise[s] for s in range(4)}, "b": {s: 0.7 - noise[s] for s in range(4)}}
    )
    state = seq.evaluate(done)
    steps = state.arms["b"].steps
    assert [s.action for s in steps] == ["continue", "accept"]
    assert state.needed == [] and state.running == []
    row = seq.decisions(state)[0]
    assert row["decision"] == "accept" and row["n_arm"] == 4 and row["p_value"] is None
    assert [look["look"] for look in row["looks"]] == [1, 2] and row["looks"][-1][
        "action"
    ] == "accept"
    assert row["looks"][0]["boundary"] > row["looks"][1]["boundary"] > 0


def test_the_baseline_keeps_running_while_one_arm_continues():
    c = contract(arms=[{"name": "b", "overrides": ["x=1"]}, {"name": "c", "overrides": ["x=2"]}])
    seq = SequentialConfirmation(c)
    assert seq.alpha == pytest.approx(0.025) == comparison_alpha(c)  # Bonferroni across 2 arms
    noise = [0.0, 0.01, -0.01, 0.005, -0.005, 0.0]
    done = records(
        {
            "a": {s: 0.5 + noise[s] for s in range(4)},
            "b": {s: 0.9 - noise[s] for s in range(4)},
            "c": {s: 0.5 + 2 * noise[s] for s in range(2)},
        }
    )
    state = seq.evaluate(done)
    assert state.arms["b"].stopped and not state.arms["c"].stopped
    assert state.needed == [
        ("c", 2),
        ("c", 3),
    ]  # c catches up with look 2; the baseline already has it
    done.update(records({"c": {2: 0.52, 3: 0.49}}))
    state = seq.evaluate(done)
    if state.arms["c"].stopped:
        assert state.needed == []
    else:
        assert state.needed == [("a", 4), ("a", 5), ("c", 4), ("c", 5)]  # b gets no more seeds


def test_a_failed_trial_makes_the_arm_incomplete_at_once():
    seq = SequentialConfirmation(contract())
    done = records({"a": {0: 0.5, 1: 0.51}, "b": {0: 0.7}})
    failed = record("b", 1, 0.0, status="failed")
    done[failed["trial_id"]] = failed
    state = seq.evaluate(done)
    assert state.arms["b"].stopped and "seed 1 failed" in state.arms["b"].problem
    assert state.needed == []
    assert seq.decisions(state)[0]["decision"] == "incomplete"


def test_an_interrupted_look_is_incomplete_with_its_looks_so_far():
    seq = SequentialConfirmation(contract())
    done = records({"a": {0: 0.5, 1: 0.51, 2: 0.5}, "b": {0: 0.55, 1: 0.56}})
    row = seq.decisions(seq.evaluate(done))[0]
    assert row["decision"] == "incomplete" and "look 2 of 3" in row["reason"]
    assert len(row["looks"]) == 1 and row["looks"][0]["action"] == "continue"
