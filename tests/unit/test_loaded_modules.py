"""The modules a function trainable loaded: each look at sys.modules sees what was loaded since the
last."""

from __future__ import annotations

import sys
import types

from planner._trial.loading import new_modules, top_level_modules


def test_a_module_loaded_or_swapped_since_the_last_look_is_seen(monkeypatch):
    before = top_level_modules()
    assert top_level_modules() == before  # nothing loaded: the same names
    monkeypatch.setitem(sys.modules, "planner_probe_one", types.ModuleType("planner_probe_one"))
    monkeypatch.setitem(
        sys.modules, "planner_probe_one.sub", types.ModuleType("planner_probe_one.sub")
    )
    assert "planner_probe_one" in top_level_modules() and "planner_probe_one" in new_modules(before)
    # as many modules as before, another one last: still seen
    now = top_level_modules()
    monkeypatch.delitem(sys.modules, "planner_probe_one.sub")
    monkeypatch.setitem(sys.modules, "planner_probe_two", types.ModuleType("planner_probe_two"))
    assert "planner_probe_two" in top_level_modules() and "planner_probe_two" not in now


def test_a_module_loaded_again_last_with_as_many_modules_is_still_a_change(monkeypatch):
    monkeypatch.setitem(sys.modules, "planner_probe_a", types.ModuleType("planner_probe_a"))
    monkeypatch.setitem(sys.modules, "planner_probe_last", types.ModuleType("planner_probe_last"))
    before = top_level_modules()
    monkeypatch.delitem(sys.modules, "planner_probe_a")
    monkeypatch.delitem(sys.modules, "planner_probe_last")
    monkeypatch.setitem(sys.modules, "planner_probe_new", types.ModuleType("planner_probe_new"))
    monkeypatch.setitem(sys.modules, "planner_probe_last", types.ModuleType("planner_probe_last"))
    after = top_level_modules()
    assert "planner_probe_new" in after and "planner_probe_a" not in after and before != after
