"""What a refused cluster node's holder reserves, and when no node is left to run a trial
(planner._dispatch.nodes). Without Ray: a guard's state is set as its looks would leave it."""

from __future__ import annotations

import pickle

from planner._dispatch.nodes import NodeGuard, holdable, trials_held

HEAD, WORKER = "a" * 56, "b" * 56


def test_the_holder_takes_every_resource_a_trial_can_ask_for_and_no_marker():
    offered = {
        "CPU": 8.0,
        "GPU": 2.0,
        "big_mem": 1.0,
        "accelerator_type:H100": 1.0,
        "memory": 1e10,
        "object_store_memory": 1e9,
        "node:10.0.0.5": 1.0,
        "node:__internal_head__": 1.0,
        "unused": 0.0,
    }
    assert holdable(offered) == {
        "CPU": 8.0,
        "GPU": 2.0,
        "big_mem": 1.0,
        "accelerator_type:H100": 1.0,
    }
    assert trials_held({"CPU": 2.0, "GPU": 0.0}, offered) == 4
    assert trials_held({"CPU": 1.0, "GPU": 1.0}, offered) == 2
    assert trials_held({"CPU": 1.0, "big_mem": 2.0}, offered) == 0


def _guard(**state) -> NodeGuard:
    """A guard as a copy Tune unpickles it (inert), its state then set."""
    guard = pickle.loads(pickle.dumps(NodeGuard.__new__(NodeGuard)))
    guard.need = {"CPU": 1.0}
    for name, value in state.items():
        setattr(guard, name, value)
    return guard


def test_a_run_stops_only_when_every_alive_node_that_could_run_a_trial_is_refused():
    why = "ModuleNotFoundError: No module named 'sklearn'"
    offers = {HEAD: {"CPU": 1.0}, WORKER: {"CPU": 2.0}}
    refused = _guard(alive={HEAD, WORKER}, offers=offers, refused={WORKER: why}, here=HEAD)
    assert refused.none_can_run() is not None  # nothing checked, nothing pending
    refused.checked = {HEAD}
    assert refused.none_can_run() is None and refused.usable() == {HEAD: 1}
    refused.gone(HEAD)
    said = refused.none_can_run()
    assert said == (
        "no node of the Ray cluster can run the trainable "
        f"(node {WORKER[:12]}: ModuleNotFoundError: No module named 'sklearn')"
    )
    refused.pending = {object(): HEAD}  # a node still checked may pass
    assert refused.none_can_run() is None

    mine = _guard(alive={HEAD}, offers=offers, refused={HEAD: why}, here=HEAD)
    assert f"node {HEAD[:12]} (the one the driver runs on): ModuleNotFoundError" in str(
        mine.none_can_run()
    )


def test_a_copy_of_the_guard_holds_and_looks_at_nothing():
    copy = pickle.loads(pickle.dumps(NodeGuard.__new__(NodeGuard)))
    copy.look()  # no Ray call: an unpickled guard never looks
    assert copy.none_can_run() is None and copy.usable() == {} and copy.held == {}
    copy.release()
