"""The report's Cost section gives the disk each arm's trials used (checkpoints pile up, and
without it nothing said how much disk a run used)."""

from __future__ import annotations

from planner._results.cost import cost_by_arm
from planner._results.report import COST_HEADER, cost_lines

CONTRACT = {
    "baseline": {"name": "base"},
    "arms": [{"name": "warm"}],
    "budget": {"resources": {"cpu": 1}},
}


def _record(arm: str, disk: int | None, seconds: float = 2.0) -> dict:
    record = {
        "arm": arm,
        "phase": "confirm",
        "duration_s": seconds,
        "reports": [
            {"step": 1, "time_s": 0.5, "metrics": {"acc": 0.5}},
            {"step": 2, "time_s": 1.0, "metrics": {"acc": 0.6}},
        ],
    }
    if disk is not None:
        record["disk_bytes"] = disk
    return record


def test_each_arms_disk_is_the_sum_of_its_trials_disk_bytes_and_shows_in_the_cost_table():
    rows = cost_by_arm(
        [_record("base", 3 * 2**20), _record("base", 2**20), _record("warm", 5 * 2**30)], CONTRACT
    )
    assert [(r["arm"], r["disk_bytes"]) for r in rows] == [("base", 4 * 2**20), ("warm", 5 * 2**30)]
    table = cost_lines(rows)
    header = next(line for line in table if line.startswith("| arm"))
    cells = [cell.strip() for cell in header.strip("|").split("|")]
    assert cells == COST_HEADER[:3] + ["disk"] + COST_HEADER[3:]  # gpu-seconds stays last
    assert any(line.startswith("| base") and "4.0 MiB" in line for line in table)
    assert any(line.startswith("| warm") and "5.0 GiB" in line for line in table)


def test_without_disk_figures_the_cost_table_is_as_before():
    rows = cost_by_arm([_record("base", None), _record("warm", None)], CONTRACT)
    assert all(r["disk_bytes"] is None for r in rows)
    header = next(line for line in cost_lines(rows) if line.startswith("| arm"))
    assert [cell.strip() for cell in header.strip("|").split("|")] == COST_HEADER
