"""`plan estimate` and `plan power`: the ASHA arithmetic against Ray's own scheduler, the pilot
reader, the figures, and the command line (exit codes, sentences for bad input)."""

from __future__ import annotations

import copy
import json
import statistics
import types
from pathlib import Path

import pytest
import yaml

from planner._cli.estimate_text import format_estimate
from planner._cli.main import main
from planner._cli.power_text import format_power
from planner._plan.estimate import (
    asha_milestones,
    estimate,
    median_rule_range,
)
from planner._plan.pilot import read_pilot
from planner._plan.seeds import power_summary
from planner._stats.power import detection_power, pilot_sd, seeds_for_power
from tests._estimate_contracts import TUNED, contract


def test_milestones_are_ray_asha_rungs_below_the_exposure():
    assert asha_milestones(1, 3, 9) == [1, 3]
    assert asha_milestones(2, 3, 8) == [2, 6]
    assert asha_milestones(1, 2, 10) == [1, 2, 4, 8]
    assert asha_milestones(3, 3, 3) == []


def test_no_early_stopping_saves_nothing_and_the_median_rule_gives_a_range():
    plain = estimate(contract(tuning={**TUNED["tuning"], "early_stop": {"rule": "none"}}))
    tune, confirm = plain["phases"]
    assert tune["steps_expected"] == tune["steps_planned"] == 2 * 9 * 9 and tune["saving"] == 0
    assert confirm["trials"] == 10 and confirm["steps_planned"] == 90
    median = estimate(
        contract(tuning={**TUNED["tuning"], "early_stop": {"rule": "median", "grace": 2}})
    )
    low, high = median["phases"][0]["steps_range"]
    assert (low, high) == (2 * median_rule_range(9, 9, 2)[0], 2 * 81) and low < high
    assert "data-dependent" in format_estimate(median)


def test_the_forecast_uses_the_pilot_timing_and_the_slots():
    timing = types.SimpleNamespace(
        time_per_step_s=1.0,
        overhead_s=2.0,
        cold_start_s=5.0,
        startup_s=3.0,
        as_dict=lambda: {
            "time_per_step_s": 1.0,
            "overhead_s": 2.0,
            "cold_start_s": 5.0,
            "startup_s": 3.0,
            "slots": 1,
        },
    )
    one = estimate(contract(tuning=None), timing, slots=1)
    two = estimate(contract(tuning=None), timing, slots=2)
    assert one["phases"][0]["wall_s"] == pytest.approx(
        5 + 10 * (9 + 2)
    )  # 10 trials one after another
    assert two["phases"][0]["wall_s"] == pytest.approx(5 + 5 * (9 + 2))
    assert one["wall_s"] == pytest.approx(3 + one["phases"][0]["wall_s"])
    looks = estimate(contract(tuning=None, confirmation={"looks": 2}), timing, slots=4)
    assert looks["phases"][0]["wall_s"] == pytest.approx(
        5 + (1 + 2) * 11
    )  # looks of 2 + 3 seeds: 4 trials, then 6 on 4 slots


# --------------------------------------------------------------------------- pilots and power


def make_pilot(root: Path, values: dict[str, dict[int, float]], metric="acc", baseline="a") -> Path:
    run = root / "pilot"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": "p", "name": "p"}))
    (run / "contract.yaml").write_text(
        yaml.safe_dump(
            {"baseline": {"name": baseline}, "arms": [{"name": a} for a in values if a != baseline]}
        )
    )
    lines, events = (
        [],
        [
            {"event": "run_started", "time": "2026-01-01T00:00:00.000Z"},
            {"event": "phase_started", "time": "2026-01-01T00:00:10.000Z", "phase": "confirm"},
        ],
    )
    t = 10.0
    for arm, by_seed in values.items():
        for seed, v in by_seed.items():
            tid = f"confirm-{arm}-s{seed}"
            reports = [
                {"step": s, "metrics": {metric: v}, "time_s": 0.5 + 0.25 * s} for s in (1, 2, 3, 4)
            ]
            lines.append(
                {
                    "trial_id": tid,
                    "phase": "confirm",
                    "arm": arm,
                    "seed": seed,
                    "status": "completed",
                    "exposure": 4,
                    "reports": reports,
                    "duration_s": 1.6,
                }
            )
            events += [
                {"event": "trial_started", "time": f"2026-01-01T00:00:{t:06.3f}Z", "trial_id": tid},
                {
                    "event": "trial_ended",
                    "time": f"2026-01-01T00:00:{t + 2:06.3f}Z",
                    "trial_id": tid,
                },
            ]
            t += 2
    events.append(
        {"event": "phase_ended", "time": f"2026-01-01T00:00:{t:06.3f}Z", "phase": "confirm"}
    )
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


VALUES = {"a": {0: 0.80, 1: 0.82, 2: 0.79, 3: 0.81}, "b": {0: 0.83, 1: 0.86, 2: 0.82, 3: 0.83}}


def test_a_pilot_gives_values_by_arm_and_the_time_per_step(tmp_path):
    pilot = read_pilot(make_pilot(tmp_path, VALUES), "acc")
    assert pilot.values == VALUES and pilot.baseline == "a"
    timing = pilot.require_timing()
    assert timing.time_per_step_s == pytest.approx(0.25) and timing.startup_s == pytest.approx(10)
    assert timing.overhead_s == pytest.approx(1.0)  # 2 s per trial, one at a time, 1 s of it steps


def test_power_figures_come_from_the_statistics_module():
    c = contract(tuning=None)
    sd = 0.015
    s = power_summary(c, sd)
    assert s["test"] == "paired"  # the default: the arms run on the same seeds
    assert s["needed"]["80"]["seeds"] == seeds_for_power(sd, 0.02, 0.05, 0.8, "paired")
    assert s["needed"]["90"]["seeds"] > s["needed"]["80"]["seeds"]
    assert s["declared"]["power"] == pytest.approx(detection_power(5, 0.02, sd, 0.05, "paired"))
    assert detection_power(
        5, s["declared"]["detectable_effect_80"], sd, 0.05, "paired"
    ) == pytest.approx(0.8, abs=1e-6)
    assert s["needed"]["80"]["accept_probability"] < s["needed"]["80"]["power"]
    text = format_power(s)
    assert "P(CI low > 0)" in text and "for 90 % power" in text


def test_plan_power_from_a_pilot_and_validate_warns_when_underpowered(tmp_path, capsys):
    pilot = make_pilot(tmp_path, VALUES)
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {**copy.deepcopy(TUNED), "tuning": None, "trainable": None, "command": "python -c pass"}
        )
    )
    assert main(["power", str(path), "--pilot", str(pilot), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    diffs = [VALUES["b"][s] - VALUES["a"][s] for s in range(4)]
    assert out["test"] == "paired" and out["sd"] == pytest.approx(statistics.stdev(diffs))
    # the pilot also gives the within-arm sd: what Welch would need is said beside it
    pooled = pilot_sd({a: list(v.values()) for a, v in VALUES.items()})
    other = out["other_test"]
    assert other["test"] == "welch" and other["sd"] == pytest.approx(pooled)
    assert other["seeds_80"] == seeds_for_power(pooled, out["min_effect"], 0.05, 0.8, "welch")
    assert main(["power", str(path), "--pilot", str(pilot)]) == 0
    assert f"the welch test would need {other['seeds_80']} seeds per arm" in capsys.readouterr().out
    assert main(["validate", str(path), "--pilot", str(pilot)]) == 0
    assert "warning P903" not in capsys.readouterr().out  # paired, 5 seeds are enough here
    path.write_text(  # not under Welch, whose sd is the seeds' own spread
        yaml.safe_dump(
            {
                **copy.deepcopy(TUNED),
                "tuning": None,
                "trainable": None,
                "command": "python -c pass",
                "acceptance": {"min_effect": 0.02, "test": "welch"},
            }
        )
    )
    assert main(["validate", str(path), "--pilot", str(pilot)]) == 0
    assert "warning P903" in capsys.readouterr().out
    assert main(["validate", str(path), "--pilot", str(pilot), "--strict"]) == 1
    capsys.readouterr()


def test_bad_pilots_are_sentences(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {**copy.deepcopy(TUNED), "tuning": None, "trainable": None, "command": "python -c pass"}
        )
    )
    assert main(["power", str(path), "--pilot", str(tmp_path)]) == 2
    assert "is not a run folder" in capsys.readouterr().err
    empty = make_pilot(tmp_path / "e", {"a": {0: 0.8}})
    assert main(["power", str(path), "--pilot", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "at least 2 seeds" in err and "Traceback" not in err
    assert main(["power", str(path), "--sd", "-1"]) == 2
    assert main(["estimate", str(path), "--slots", "0"]) == 2
    assert main(["estimate", str(path), "--slots", "3"]) == 0
    assert "give --pilot" in capsys.readouterr().out


def test_a_spread_no_practical_number_of_seeds_overcomes_is_said_in_words_not_as_none():
    """min_effect in the wrong units (0.02 against an sd of 1): no n up to 100,000 reaches 80 %
    power, and the summary said "use at least None seeds per arm"."""
    s = power_summary(contract(tuning=None), 5.0)
    assert s["underpowered"] and s["needed"]["80"]["seeds"] is None
    text = format_power(s)
    assert (
        "None" not in text and "no number of seeds up to 100,000 per arm reaches 80 % power" in text
    )
    huge = format_power(power_summary(contract(tuning=None), 1e300))
    assert (
        "x min_effect" in huge and max(len(word) for word in huge.split()) < 40
    )  # no 300-digit ratio
