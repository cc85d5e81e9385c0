"""The facts of a run's records (planner._store.facts) are functions of them: they return values
and leave the records as they were; a slimmed record gives the same facts as the full one. The
trainable rules are checks of a probe's result, and a deferred import (planner._core.lazy) happens
on first use only."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from planner._contract.probe import TrainableProbe
from planner._contract.rules import trainable_problem
from planner._core.lazy import lazy_import
from planner._store import facts

CONTRACT = {
    "baseline": {"name": "base"},
    "arms": [{"name": "treat"}],
    "metric": {"name": "acc", "heldout": "test"},
    "budget": {"exposure": 3, "max_wall_time": "2h", "max_heldout_evaluations": 1},
}


def _record(trial_id, phase, arm, status, steps, metrics=("acc",), **extra):
    reports = [
        {"step": s, "metrics": {m: 0.1 * s for m in metrics}, "time_s": 0.5 + 2.0 * s}
        for s in steps
    ]
    return {
        "trial_id": trial_id,
        "phase": phase,
        "arm": arm,
        "seed": 0,
        "status": status,
        "exposure": steps[-1] if steps else 0,
        "reports": reports,
        "duration_s": 4.0,
        **extra,
    }


RECORDS = [
    _record("tune-base-s1-t000", "tune", "base", "completed", [1, 2, 3], metrics=("acc", "test")),
    _record(
        "tune-treat-s1-t000",
        "tune",
        "treat",
        "failed",
        [1],
        errors=[
            {
                "attempt": 1,
                "type": "KeyError",
                "message": "'lr'",
                "traceback": 'File "t.py", line 3',
            }
        ],
    ),
    _record("confirm-base-s0", "confirm", "base", "completed", [1, 2, 3], metrics=("acc", "test")),
    _record(
        "confirm-treat-s0", "confirm", "treat", "diverged", [1, 2, 3, 4], metrics=("acc", "test")
    ),
    _record("reeval-base-s0-1", "reeval", "base", "completed", [1, 2, 3], metrics=("acc", "test")),
]


def _all_facts(records, contract=CONTRACT):
    return (
        facts.failures(records),
        facts.violations(records, contract),
        facts.heldout_ledger(records, contract),
        facts.budget_used(
            records, contract, {"budget": {"wall_time_s": 9.0}}, {"planned_count": 4}
        ),
        [facts.seconds_per_step(r) for r in records],
        [sorted(facts.metric_names(r)) for r in records],
        [facts.record_last_step(r) for r in records],
    )


def test_the_facts_leave_the_records_as_they_were():
    records = copy.deepcopy(RECORDS)
    _all_facts(records)
    slim = [facts.slim_record(r, CONTRACT) for r in records]
    assert records == RECORDS
    assert all("summary" not in r for r in records) and all("summary" in r for r in slim)


def test_a_slimmed_record_gives_the_same_facts_as_the_full_one():
    slim = [facts.slim_record(r, CONTRACT) for r in RECORDS]
    assert [len(r["reports"]) for r in slim] == [
        3,
        0,
        0,
        4,
        0,
    ]  # kept: a held-out metric in tuning, past budget
    assert _all_facts(slim) == _all_facts(RECORDS)
    full = _all_facts(RECORDS)
    assert [f["trial_id"] for f in full[0]] == ["tune-treat-s1-t000", "confirm-treat-s0"]
    assert {v["kind"] for v in full[1]} == {"heldout_in_tuning", "report_past_budget"}
    assert full[2]["evaluations"] == 3 and full[2]["over_cap"] and full[2]["tuning_exposures"] == 1
    assert (
        full[3]["max_wall_time_s"] == 7200.0 and full[3]["reeval_trials"] == 1 and full[4][0] == 2.0
    )


def test_what_the_driver_keeps_of_a_tuning_trial_selects_and_gives_the_facts_as_the_whole_record():
    """Issue 23: a running driver keeps of a tuning trial the selection metric's last k reports and
    the summary: the same score (final and mean of the last k, with reports that lack the metric in
    between), the same facts; reports that show a violation are kept whole; the record itself is
    left as it is."""
    from planner._stats.select import score

    irregular = _record("tune-base-s1-t001", "tune", "base", "completed", list(range(1, 11)))
    for i, report in enumerate(irregular["reports"]):
        report["metrics"]["acc"] = [0.3, 0.5, 0.2, 0.9, 0.4, 0.6, 0.1, 0.8, 0.7, 0.55][i]
        if i in (8, 9):
            del report["metrics"]["acc"]  # the metric missing from the last reports
            report["metrics"]["loss"] = 1.0 / (i + 1)
    records = [irregular, *RECORDS]
    before = copy.deepcopy(records)
    contract = {
        **CONTRACT,
        "budget": {**CONTRACT["budget"], "exposure": 10},
    }  # the 10 reports are within budget
    for k in (None, 1, 3):
        kept = [facts.kept_of_tuning(r, contract, "acc", k) for r in records]
        assert records == before
        for whole, slim in zip(records, kept, strict=True):
            assert score(slim, "acc", "final") == score(whole, "acc", "final")
            assert score(slim, "acc", "mean_last_k", k or 1) == score(
                whole, "acc", "mean_last_k", k or 1
            )
        assert _all_facts(kept, contract) == _all_facts(records, contract)
        assert len(kept[0]["reports"]) == (k or 1) and all(
            "acc" in p["metrics"] for p in kept[0]["reports"]
        )
        assert (
            sorted(facts.metric_names(kept[0])) == ["acc", "loss"]
            and facts.record_last_step(kept[0]) == 10
        )
    assert (
        len(facts.kept_of_tuning(RECORDS[0], CONTRACT, "acc")["reports"]) == 3
    )  # held-out in tuning: whole


def test_the_trainable_rules_read_the_probe_and_import_nothing(tmp_path):
    base = {
        "trainable": "mytrain:train",
        "module": "mytrain",
        "function": "train",
        "roots": (str(tmp_path), "/cwd"),
    }
    assert (
        trainable_problem(TrainableProbe(**base, outcome="found", origin="/x/mytrain.py")) is None
    )
    code, message, hint = trainable_problem(
        TrainableProbe(**base, outcome="not_found", near=("/up/mytrain.py", "/up"))
    )
    assert (
        code == "P501"
        and str(tmp_path) in message
        and "It is at /up/mytrain.py: run `plan` from /up" in hint
    )
    code, message, _ = trainable_problem(
        TrainableProbe(**base, outcome="module_exit", origin="/x/mytrain.py", how="os._exit(3)")
    )
    assert code == "P421" and "os._exit(3)" in message
    code, _, hint = trainable_problem(
        TrainableProbe(**base, outcome="no_function", origin="/x/mytrain.py", close="trian")
    )
    assert code == "P502" and hint == "Did you mean `mytrain:trian`?"
    assert "mytrain" not in sys.modules and not Path(tmp_path, "mytrain.py").exists()


def test_a_deferred_import_happens_on_first_use(monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    colorsys = lazy_import("colorsys")
    assert "colorsys" not in sys.modules
    assert colorsys.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert "colorsys" in sys.modules and colorsys.hsv_to_rgb is sys.modules["colorsys"].hsv_to_rgb
