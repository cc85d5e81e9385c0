"""The one walk of the process table that ends a trial's processes: descendants of a pid (pure)."""

from __future__ import annotations

from planner._core import supervisor


def test_descendants_walk_every_generation_and_nothing_else():
    table = {
        10: (1, False),
        11: (10, False),
        12: (11, True),
        13: (11, False),
        20: (1, False),
        21: (20, False),
    }
    assert sorted(supervisor.descendants(table, 10)) == [11, 12, 13]
    assert supervisor.descendants(table, 13) == []


def test_descendants_end_on_a_cycle_a_reused_pid_can_make():
    table = {10: (20, False), 20: (10, False), 30: (10, False)}
    assert sorted(supervisor.descendants(table, 10)) == [20, 30]
