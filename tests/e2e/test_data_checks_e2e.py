"""The contract's data section checked at run time (docs/data.md), on function and `command:`
trainables.

One clean run passes every check; one dirty run breaks all three (rows of a
patient in train and test, an arm that shuffles with another seed, a test split
drawn from the trial's seed); one run leaves a required split unlogged.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from planner import load_run, run
from planner._cli.main import main
from planner._results.report import render_markdown
from planner._results.run_status import format_status, read_status
from tests.trainables.splits import DEFAULTS

pytestmark = pytest.mark.ray

DATA = {
    "unit": "row",
    "independent": {"pairs": [["train", "test"], ["train", "val"]], "by": ["unit", "patient"]},
    "fixed": ["test"],
    "require": ["train", "val", "test"],
}


def contract(tmp_path, kind: str, *, config_overrides=(), treat=(), data=None, tuning=None):
    base = {
        "version": 1,
        "name": "data-checks",
        "hypothesis": "The treatment raises val_acc.",
        "config": {"values": copy.deepcopy(DEFAULTS), "overrides": list(config_overrides)},
        "factor": {"name": "recipe", "keys": ["recipe.name", "recipe.level", "data.shuffle"]},
        "baseline": {"name": "base", "overrides": ["recipe.name=a"]},
        "arms": [{"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.7", *treat]}],
        "metric": {"name": "val_acc", "mode": "max"},
        # welch: the trainable's noise is the seed's alone, so the arms differ by an exact shift,
        # which the paired test's sign rule shows only from 6 seeds
        "acceptance": {"min_effect": 0.05, "test": "welch"},
        "seeds": [0, 1, 2],
        "budget": {"exposure": 2},
        "data": data or DATA,
    }
    if tuning:
        base["tuning"] = tuning
    if kind == "function":
        base["trainable"] = "tests.trainables.splits:train"
    else:
        base["command"] = "python -m tests.trainables.split_script"
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def violations(run_dir, kind):
    return [
        (r["trial_id"], r["arm"], r["seed"], v)
        for r in load_run(run_dir).records
        for v in r.get("violations") or []
        if v["kind"] == kind
    ]


@pytest.mark.parametrize("kind", ["function", "command"])
def test_a_clean_split_passes_every_check_and_the_report_shows_its_counts(
    ray_local, in_repo, tmp_path, kind
):
    result = run(contract(tmp_path, kind), runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result
    records = load_run(result.run_dir).records
    assert len(records) == 6 and all(r["status"] == "completed" for r in records), records
    assert all(not r["violations"] for r in records), [r["violations"] for r in records]
    splits = records[0]["splits"]
    assert set(splits) == {"train", "val", "test"}
    # 400 rows of 100 patients: 20 test patients (80 rows), 16 val patients (64 rows), 256 train
    # rows + 128 repeats
    assert (
        splits["test"]["distinct"] == 80 and splits["test"]["groups"]["patient"]["distinct"] == 20
    )
    assert splits["train"]["presentations"] == 384 and splits["train"]["distinct"] == 256
    assert splits["test"]["overlap"] == {
        "train": {"unit": 0, "patient": 0},
        "val": {"unit": 0, "patient": 0},
    }
    # the fixed test split is one set over every trial
    assert len({r["splits"]["test"]["fingerprint"] for r in records}) == 1
    # no id is stored, only counts and fingerprints
    text = (result.run_dir / "trials.jsonl").read_text()
    assert "p0001" not in text
    assert next(d for d in result.decisions if d["arm"] == "treat")["decision"] == "accept"
    report = render_markdown(load_run(result.run_dir))
    assert (
        "- train: 384 presentations of 256 distinct rows from 64 patients (6 trials, 3 different "
        "sets, varying between seeds)" in report
    )
    assert (
        "- test: 80 presentations of 80 distinct rows from 20 patients (6 trials, the same set in "
        "every trial)" in report
    )
    assert "data violations: none" in report


@pytest.mark.parametrize("kind", ["function", "command"])
def test_a_leaky_unmatched_varying_split_is_caught_and_the_arm_is_invalid(
    ray_local, in_repo, tmp_path, kind
):
    path = contract(
        tmp_path,
        kind,
        config_overrides=["data.by=row", "data.test_varies=true"],
        treat=["data.shuffle=1"],
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result  # the run state is unaffected
    root = result.run_dir

    overlap = violations(root, "split_overlap")
    assert {(v["splits"][0], v["splits"][1], v["by"]) for *_, v in overlap} >= {
        ("train", "test", "patient")
    }
    assert all(v["by"] == "patient" for *_, v in overlap)  # rows are not shared, patients are
    first = next(v for *_, v in overlap if v["splits"] == ["train", "test"])
    assert (
        first["count"] > 0
        and first["message"] == f"{first['count']} patients are in both train and test"
    )

    unmatched = violations(root, "unmatched_data")
    assert {s for _, _, s, _ in unmatched} == {
        0,
        1,
        2,
    }  # every seed: treat shuffles train and val differently
    assert {v["split"] for *_, v in unmatched} == {
        "train",
        "val",
    }  # the test split does not depend on the arm
    assert all(sorted(v["arms"]) == ["base", "treat"] for *_, v in unmatched)

    varies = violations(root, "split_varies")
    assert varies and all(
        v["split"] == "test" and v["seeds"][0] != v["seeds"][1] for *_, v in varies
    )

    events = [e for e in load_run(root).events if e["event"] == "data_violation"]
    assert len(events) == len(overlap) + len(unmatched) + len(varies)

    decisions = json.loads((root / "decisions.json").read_text())["decisions"]
    treat = next(d for d in decisions if d["arm"] == "treat")
    assert treat["decision"] == "invalid" and treat["reason"].startswith("Invalid: ")
    assert treat["effect"] is not None  # what was measured stays, it just does not count

    status = format_status(read_status(root))
    assert "data violations: split_overlap" in status and "decisions: treat invalid" in status
    loaded = load_run(root)
    assert {v["kind"] for v in loaded.violations} >= {
        "split_overlap",
        "unmatched_data",
        "split_varies",
    }
    assert loaded.data["violations"]["unmatched_data"] == len(unmatched)
    report = render_markdown(loaded)
    assert "## Data" in report and "patients are in both train and test" in report
    assert "train and test share 0 rows" in report  # rows are not shared between train and test...
    assert "| treat | invalid |" in report


@pytest.mark.parametrize("kind", ["function", "command"])
def test_a_required_split_left_unlogged_is_a_protocol_error(ray_local, in_repo, tmp_path, kind):
    result = run(
        contract(tmp_path, kind, config_overrides=["data.log_test=false"]),
        runs_dir=tmp_path / "runs",
        quiet=True,
        keep_going=True,
    )  # every trial says it (not fail fast)
    records = load_run(result.run_dir).records
    assert records and all(r["status"] == "protocol_error" for r in records)
    message = records[0]["errors"][-1]["message"]
    assert "logged no split test, which data.require needs" in message
    assert all(d["decision"] == "incomplete" for d in result.decisions)


def test_a_reeval_on_different_data_is_not_a_reproduction(ray_local, in_repo, tmp_path, capsys):
    result = run(
        contract(tmp_path, "function", config_overrides=["data.reeval_shift=true"]),
        runs_dir=tmp_path / "runs",
        quiet=True,
    )
    assert result.state == "completed" and not violations(result.run_dir, "split_varies")
    capsys.readouterr()
    assert main(["reeval", str(result.run_dir), "--arm", "treat"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS (different data: split test differs (unit fingerprint" in out, out
    row = load_run(result.run_dir).reevals[-1]["rows"][0]
    assert (
        row["reproduced"] is False and row["diff"] == 0.0 and row["data"]
    )  # the metric alone reproduced


def test_tuning_trials_carry_their_splits_when_the_driver_builds_their_records_from_the_reports(
    ray_local, in_repo, tmp_path
):
    tuning = {
        "trials_per_arm": 3,
        "seeds": [100],
        "space": {"recipe.noise": {"uniform": [0.001, 0.02]}},
        "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 2},
    }
    path = contract(tmp_path, "function", treat=["data.shuffle=1"], tuning=tuning)
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    tuned = [r for r in load_run(result.run_dir).records if r["phase"] == "tune"]
    assert len(tuned) == 6 and all(
        set(r.get("splits") or {}) == {"train", "val", "test"} for r in tuned
    ), [(r["trial_id"], r["status"], list(r.get("splits") or {})) for r in tuned]
    unmatched = [v for r in tuned for v in r["violations"] if v["kind"] == "unmatched_data"]
    assert unmatched and all(v["seed"] == 100 for v in unmatched)


def test_a_script_that_logs_its_metrics_to_a_file_still_logs_its_splits(tmp_path):
    import sys
    import textwrap

    from planner._trial.command import run_command
    from planner._trial.metrics_files import MetricsSpec
    from tests.trial_double import TrialDouble

    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent("""
        import os, sys
        import planner
        out = sys.argv[-1].split('=', 1)[1].strip("'")
        os.makedirs(out + '/logs')
        planner.log_split('train', [1, 2, 3, 3], groups={'patient': ['a', 'b', 'c', 'c']})
        planner.log_split('test', [4, 5], groups={'patient': ['c', 'd']})
        with open(out + '/logs/m.csv', 'w') as f:
            f.write('epoch,val_acc\\n0,0.5\\n1,0.6\\n')
    """)
    )
    spec = MetricsSpec(
        file="logs/*.csv",
        format="csv",
        step="epoch",
        names={"val_acc": "val_acc"},
        require="val_acc",
        step_base=0,
    )
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=2)
    run_command(
        [sys.executable, str(script)], [], trial, cwd=tmp_path, metrics=spec, kill_grace_s=1.0
    )
    assert trial.reports == [(1, {"val_acc": 0.5}), (2, {"val_acc": 0.6})]
    assert trial.splits["train"]["presentations"] == 4 and trial.splits["train"]["distinct"] == 3
    assert trial.splits["test"]["overlap"] == {"train": {"unit": 0, "patient": 1}}
