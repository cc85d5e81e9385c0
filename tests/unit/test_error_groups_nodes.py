"""Grouped errors name the Ray nodes their trials ran on, when a run's trials ran on several."""

from __future__ import annotations

from planner._core.records import error_groups, on_nodes


def _failed(trial_id: str, node: str) -> dict:
    error = {"attempt": 1, "type": "ModuleNotFoundError", "message": "No module named 'sklearn'"}
    return {"trial_id": trial_id, "status": "failed", "node_id": node, "errors": [error]}


def test_an_error_group_names_the_nodes_its_trials_ran_on():
    bad, good = "a" * 56, "b" * 56
    records = [_failed("confirm-a-s0", bad), _failed("confirm-a-s1", bad)]
    records.append({"trial_id": "confirm-a-s2", "status": "completed", "node_id": good})
    (group,) = error_groups(records)
    assert group["count"] == 2 and group["nodes"] == [bad[:12]]
    assert on_nodes(group) == f", on node {bad[:12]}"


def test_on_one_node_an_error_group_says_nothing_of_it():
    (group,) = error_groups([_failed("confirm-a-s0", "a" * 56)])
    assert "nodes" not in group and on_nodes(group) == ""
