"""Issue 11 end to end: each route to a silently void decision, through `plan run` on a real local
Ray.

Tiny contracts (2 arms, 2-3 seeds, exposure 2-3, few tuning trials) with the trainables of
tests/trainables/fail_loud.py.
"""

from __future__ import annotations

import io
import json

import pytest

from planner import load_run, run
from planner._cli.run_text import format_result
from tests._runs import contract_writer

pytestmark = pytest.mark.ray

T = "tests.trainables.fail_loud"
BASE = {
    "version": 1,
    "name": "loud",
    "hypothesis": "The treatment raises val_acc.",
    "trainable": f"{T}:ignores_seed",
    "config": {
        "values": {
            "level": 0.5,
            "optim": {"lr": 0.01},
            "sched": {"peak_lr": "${optim.lr}"},
            "x": 0.5,
        }
    },
    "factor": {"name": "level", "keys": ["level"]},
    "baseline": {"name": "base", "overrides": ["level=0.5"]},
    "arms": [{"name": "treat", "overrides": ["level=0.6"]}],
    "metric": {"name": "val_acc", "mode": "max"},
    "acceptance": {"min_effect": 0.01},
    "seeds": [0, 1, 2],
    "budget": {"exposure": 2},
}
TUNING = {
    "trials_per_arm": 2,
    "seeds": [1000],
    "sampler": {"name": "random", "seed": 0},
    "space": {"optim.lr": {"log_uniform": [1.0e-3, 1.0e-1]}},
}


write = contract_writer(BASE)


def status_text(run_dir):
    from planner._results.run_status import format_status, read_status

    return format_status(read_status(run_dir))


def test_item1_tuned_values_reach_interpolated_keys_everywhere(ray_local, in_repo, tmp_path):
    result = run(
        write(tmp_path, trainable=f"{T}:interpolated", tuning=TUNING, seeds=[0, 1]),
        runs_dir=tmp_path / "runs",
        quiet=True,
    )
    trials = load_run(result.run_dir).records
    assert len(trials) == 8 and all(t["status"] == "completed" for t in trials)
    for t in trials:  # what the trainable got (its reports) is what trials.jsonl shows
        last = t["reports"][-1]["metrics"]
        assert (
            t["config"]["sched"]["peak_lr"]
            == t["config"]["optim"]["lr"]
            == last["peak_lr"]
            == last["lr"]
        )
        if t["phase"] == "tune":
            assert t["config"]["optim"]["lr"] == t["params"]["optim.lr"] != 0.01
    selection = json.loads((result.run_dir / "selection.json").read_text())["arms"]
    for t in (t for t in trials if t["phase"] == "confirm"):
        assert t["config"]["sched"]["peak_lr"] == selection[t["arm"]]["params"]["optim.lr"]
    from planner._reeval.prepare import prepare

    plan = prepare(result.run_dir, "treat", seeds=None, tolerance=1e-6)
    assert plan.config["sched"]["peak_lr"] == selection["treat"]["params"]["optim.lr"]
    # without logged confirmation trials, reeval builds the config from configs/ and the selected
    # params
    from planner._reeval.prepare import _effective_config, _frozen_contract
    from planner._store.read import open_run

    assert (result.run_dir / "configs" / "unresolved" / "treat.yaml").is_file()
    folder = open_run(result.run_dir)
    config, _, _ = _effective_config(folder, _frozen_contract(folder), "treat", {}, [])
    assert (
        config["sched"]["peak_lr"]
        == config["optim"]["lr"]
        == selection["treat"]["params"]["optim.lr"]
    )


def test_item2_a_trainable_that_ignores_its_seed_is_invalid_not_rejected(
    ray_local, in_repo, tmp_path
):
    result = run(write(tmp_path), runs_dir=tmp_path / "runs", quiet=True)
    (d,) = result.decisions
    assert d["decision"] == "invalid" and "the seeds did not vary the run" in d["reason"]
    doc = json.loads((result.run_dir / "decisions.json").read_text())
    assert {f["arm"] for f in doc["findings"]} == {"base", "treat"}
    said = "every confirmation seed of base (3 seeds) reported exactly the same curves"
    assert said in format_result(result) and said in status_text(result.run_dir)
    from planner._results.report import render_markdown

    assert said in render_markdown(load_run(result.run_dir))


def test_item4_a_metric_never_reported_is_a_protocol_error_and_says_so(
    ray_local, in_repo, tmp_path
):
    stream = io.StringIO()
    # keep_going: every trial runs to show its own message (fail fast would stop after the first
    # few: tests/e2e/test_accounting_e2e.py)
    result = run(
        write(tmp_path, trainable=f"{T}:misnamed", tuning=TUNING),
        runs_dir=tmp_path / "runs",
        stream=stream,
        keep_going=True,
    )
    trials = load_run(result.run_dir).records
    assert {t["status"] for t in trials} == {"protocol_error"} and len(trials) == 4
    said = "metric val_acc never reported; got train_loss, val_accuracy"
    assert said in stream.getvalue()  # at once, on the progress line of the first trial
    assert result.exit_code == 4 and said in format_result(result)
    for d in result.decisions:
        assert d["decision"] == "incomplete" and "not run yet" not in d["reason"], d["reason"]
        assert "Resuming will not change this" in d["reason"]


def test_item5_a_trainable_that_always_fails_names_its_error_and_exits_4(
    ray_local, in_repo, tmp_path
):
    from planner._cli.main import main

    stream = io.StringIO()
    result = run(
        write(tmp_path, trainable=f"{T}:key_error", seeds=[0, 1]),
        runs_dir=tmp_path / "runs",
        stream=stream,
        keep_going=True,
    )  # every trial runs (fail fast: test_accounting_e2e.py)
    lines = [line for line in stream.getvalue().splitlines() if " failed" in line]
    assert len(lines) == 4
    assert "failed: KeyError: 'lr' [first occurrence]" in lines[0]
    assert "KeyError: 'lr' [4 trials so far]" in lines[-1]
    assert result.state == "completed" and result.exit_code == 4
    text = format_result(result)
    assert "error:      KeyError: 'lr' (in 4 trials, first confirm-" in text
    assert "arms base, treat ended with no usable confirmation value" in text
    assert (
        main(
            [
                "run",
                str(write(tmp_path, trainable=f"{T}:key_error", seeds=[0, 1])),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--quiet",
                "--keep-going",
            ]
        )
        == 4
    )


def test_item6_heldout_in_tuning_is_one_count_everywhere(ray_local, in_repo, tmp_path):
    tuning = {
        **TUNING,
        "trials_per_arm": 4,
        "space": {"x": {"uniform": [0.0, 1.0]}},
        "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 2},
    }
    result = run(
        write(
            tmp_path,
            trainable=f"{T}:heldout_everywhere",
            tuning=tuning,
            seeds=[0, 1],
            budget={"exposure": 3},
            metric={"name": "val_acc", "mode": "max", "heldout": "test_acc"},
        ),
        runs_dir=tmp_path / "runs",
        stream=(stream := io.StringIO()),
    )
    assert (
        "reported the held-out metric test_acc at step 1 while tuning: test exposure"
        in stream.getvalue()
    )
    tune = [t for t in load_run(result.run_dir).records if t["phase"] == "tune"]
    assert len(tune) == 8 and all(len(t["violations"]) == 1 for t in tune)  # early-stopped ones too
    assert (
        result.heldout_exposures == 8
        and "warning:    8 tuning trial(s) reported the held-out metric" in format_result(result)
    )
    text = status_text(result.run_dir)
    assert (
        "protocol violations: 8 (heldout_in_tuning 8)" in text
        and "8 tuning trial(s) reported it" in text
    )
    from planner._results.report import summarize

    results = load_run(result.run_dir)
    s = summarize(results)
    assert len(s["violations"]) == 8 and s["heldout"]["tuning_exposures"] == 8


def test_item7_an_exception_while_deciding_keeps_the_final_bookkeeping(
    ray_local, in_repo, tmp_path, monkeypatch
):
    """The decision raised (once: a non-finite diverged_value); state, run_ended and the lock were
    skipped."""
    import planner._stats.decide as decide_module
    from planner import RunError

    def boom(*args, **kwargs):
        raise ValueError("values must be a flat sequence of finite numbers")

    monkeypatch.setattr(decide_module, "decide", boom)
    with pytest.raises(RunError) as caught:
        run(
            write(tmp_path, trainable=f"{T}:interpolated", seeds=[0, 1]),
            runs_dir=tmp_path / "runs",
            quiet=True,
        )
    assert "the decision could not be made: ValueError: values must be a flat sequence" in str(
        caught.value
    )
    (root,) = (tmp_path / "runs" / "loud").glob("*/")
    state = json.loads((root / "state.json").read_text())
    assert state["state"] == "failed" and "the decision could not be made" in state["reason"]
    assert state["budget"]["trials_ended"] == 4
    events = load_run(root).events
    assert events[-1]["event"] == "run_ended" and events[-1]["state"] == "failed"
    assert not (root / "lock").exists()
