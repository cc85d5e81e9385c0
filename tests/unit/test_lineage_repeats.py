"""plan log's count of repeated tests: the same factor on the same trainable only, and a run that
repeats another bit for bit is a replication, named as such and not counted as a second test."""

from __future__ import annotations

from planner._cli.lineage_text import format_log
from planner._lineage.ledger import append
from planner._lineage.log import build_log

SHA = "sha-of-the-baseline"


def _run(runs, name, trainable, effect, *, contract="c1", decision="inconclusive"):
    append(
        runs,
        "run_started",
        run=f"{name}/r",
        name=name,
        line="width",
        contract_sha256=contract,
        baseline={"arm": "base", "config_sha256": SHA, "from": None},
        factor={"name": "width", "keys": ["width"]},
        arms=["base", "wide"],
        alpha=0.05,
        trainable=trainable,
    )
    append(
        runs,
        "run_ended",
        run=f"{name}/r",
        state="completed",
        reason="",
        alpha=0.05,
        decisions=[
            {
                "arm": "wide",
                "decision": decision,
                "effect": effect,
                "ci_low": effect - 0.01,
                "ci_high": effect + 0.01,
                "p_value": 0.2,
            }
        ],
    )


def _experiments(log):
    return {
        x["run"]: x
        for line in log["lines"]
        for base in line["baselines"]
        for x in base["experiments"]
    }


def test_a_factor_tested_on_another_trainable_is_not_a_repeated_test(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "first", "m:train", 0.01)
    _run(runs, "other", "other:train", 0.02)
    log = build_log(runs)
    assert _experiments(log)["other/r"]["repetition"] is None
    assert not [f for f in log["lines"][0]["forking"] if f["kind"] == "repeated_test"]
    _run(runs, "again", "m:train", 0.03)
    log = build_log(runs)
    rep = _experiments(log)["again/r"]["repetition"]
    assert rep["count"] == 2 and [e["run"] for e in rep["earlier"]] == ["first/r"]


def test_a_bit_identical_repeat_is_a_replication_not_a_second_test(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "first", "m:train", 0.0123456789)
    _run(runs, "copy", "m:train", 0.0123456789)
    log = build_log(runs)
    copy = _experiments(log)["copy/r"]
    assert copy["repetition"] is None and copy["replicates"] == ["first/r"]
    assert not [f for f in log["lines"][0]["forking"] if f["kind"] == "repeated_test"]
    assert "replicates first/r bit for bit" in format_log(log)
    # a result that differs in its last bit is another test; the copy is still named, not counted
    _run(runs, "third", "m:train", 0.0123456789 + 1e-17 + 1e-12)
    log = build_log(runs)
    rep = _experiments(log)["third/r"]["repetition"]
    assert rep["count"] == 2 and rep["replications"] == ["copy/r"]
    (fork,) = [f for f in log["lines"][0]["forking"] if f["kind"] == "repeated_test"]
    assert fork["count"] == 2 and fork["replications"] == ["copy/r"]
    assert abs(fork["family_alpha"] - (1 - 0.95**2)) < 1e-6
    # the same numbers under another contract are a new test, not a replication
    _run(runs, "edited", "m:train", 0.0123456789, contract="c2")
    assert _experiments(build_log(runs))["edited/r"]["repetition"]["count"] == 3
