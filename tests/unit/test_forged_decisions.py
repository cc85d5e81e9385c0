"""A decision its own numbers do not give (decisions.json edited or damaged) is flagged by `plan
status` and `plan report`, refused by `plan promote` and `baseline: {from_run: ...}`, and marked
UNVERIFIED by `plan log` where a ledger promotes an arm its run folder does not back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._run_folders import cli


def _forge(run: Path, decision: str, low: float, high: float) -> None:
    doc = json.loads((run / "decisions.json").read_text())
    doc["decisions"][0].update(decision=decision, effect=(low + high) / 2, ci_low=low, ci_high=high)
    (run / "decisions.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("decision", "low", "high"),
    [("accept", -0.02, 0.05), ("reject", 0.03, 0.09)],
    ids=["accept with 0 in the CI", "reject with the CI above min_effect"],
)
@pytest.mark.parametrize("command", ["status", "report"])
def test_a_decision_that_does_not_follow_from_its_numbers_is_flagged(
    run, decision, low, high, command, capsys
):
    _forge(run, decision, low, high)
    code, out, err = cli([command, str(run)], capsys)
    assert code == 0 and "does not follow" not in err
    assert f"says sgd {decision}" in out or "does not follow" in out or "give" in out, out
    assert "the file was edited or is damaged" in out, out


def test_a_consistent_decision_is_not_flagged(run, capsys):
    code, out, _ = cli(["status", str(run)], capsys)
    assert code == 0 and "edited or is damaged" not in out


def test_plan_log_marks_a_promotion_its_run_folder_does_not_back(run, capsys):
    """A ledger line promoting the never-tested baseline was shown by `plan log` as the baseline in
    force."""
    from planner._lineage.ledger import append

    runs = run.parents[1]
    key = f"demo/{run.name}"
    append(runs, "run_started", run=key, line="demo", name="demo", baseline={"arm": "sgd"})
    append(runs, "promoted", run=key, arm="sgd", line="demo", note="forged")
    code, out, err = cli(["log", "--runs-dir", str(runs)], capsys)
    assert code == 0, err
    assert "UNVERIFIED" in out and "no decision for arm sgd" in out, out


def test_plan_promote_refuses_an_accept_its_numbers_do_not_give(run, capsys):
    """A decisions.json forged to `accept` (its CI includes 0) was promoted into the ledger as it
    said."""
    doc = json.loads((run / "decisions.json").read_text())
    arm = doc["decisions"][0]["arm"]
    selection = json.loads(
        (run / "selection.json").read_text()
    )  # the synthetic run selects for its baseline only
    tuned = next(
        r
        for r in map(json.loads, (run / "trials.jsonl").read_text().splitlines())
        if r["phase"] == "tune" and r["arm"] == arm
    )
    selection["arms"][arm] = {"arm": arm, "trial_id": tuned["trial_id"], "params": tuned["params"]}
    (run / "selection.json").write_text(json.dumps(selection))
    _forge(run, "accept", -0.02, 0.05)
    code, out, err = cli(["promote", str(run), "--arm", arm], capsys)
    assert code == 1 and "P711" in err and "do not give accept" in err, out + err
    assert not (run.parents[1] / "ledger.jsonl").exists()


def test_a_baseline_from_a_run_whose_accept_does_not_follow_is_flagged(tmp_path, monkeypatch):
    """`baseline: {from_run: ...}` believed a decisions.json forged to `accept` (its CI includes
    0)."""
    from planner._lineage.resolve import validate
    from tests._lineage_runs import FIRST, REPO, codes, fake_run, second, write

    monkeypatch.chdir(REPO)  # the lineage trainable imports as tests.trainables.lineage
    runs = tmp_path / "runs"
    first = fake_run(
        write(tmp_path / "c", FIRST),
        runs,
        {"high": "accept"},
        params={"base": {"recipe.lr": 0.02}, "high": {"recipe.lr": 0.0125}},
    )
    assert "P930" not in codes(validate(write(tmp_path / "c2", second(first)), runs_dir=runs))
    doc = json.loads((first / "decisions.json").read_text())
    doc["decisions"][0]["ci_low"] = -0.1
    (first / "decisions.json").write_text(json.dumps(doc))
    result = validate(write(tmp_path / "c3", second(first)), runs_dir=runs)
    assert "P930" in codes(result) and any(
        "do not give accept" in d.message for d in result.diagnostics
    )
