"""Issue 11: no silently wrong or void decision. One test (or more) per item, pure (no Ray).

The e2e tier runs the same routes through `plan run` (tests/e2e/test_fail_loud_e2e.py).
"""

from __future__ import annotations

import math

import pytest

from planner._contract.compose import compose_arms
from planner._contract.model import Acceptance, Contract
from planner._contract.paths import apply_params
from planner._contract.validate import validate
from planner._core.records import error_groups, final_value, seeds_identical
from planner._stats.decide import compare, decide, seeds_did_not_vary
from planner._trial.protocol import run_trial
from planner._trial.spec import TrialSpec
from tests._contract_helpers import edited, write_contract

REPO = str(__import__("pathlib").Path(__file__).resolve().parents[2])


# ---------------------------------------------------------------- item 1: tuned values before
# interpolation


def _inline(values: dict, space_key: str = "optim.lr") -> Contract:
    return Contract.model_validate(
        {
            "version": 1,
            "name": "interp",
            "hypothesis": "h",
            "trainable": "m:f",
            "config": {"values": values},
            "factor": {"name": "width", "keys": ["width"]},
            "baseline": {"name": "a", "overrides": ["width=8"]},
            "arms": [{"name": "b", "overrides": ["width=16"]}],
            "metric": {"name": "acc", "mode": "max"},
            "acceptance": {"min_effect": 0.01},
            "seeds": [0, 1],
            "budget": {"exposure": 2},
            "tuning": {
                "trials_per_arm": 2,
                "seeds": [100],
                "space": {space_key: {"log_uniform": [1e-4, 1e-1]}},
            },
        }
    )


def test_a_tuned_value_reaches_the_keys_that_interpolate_it(tmp_path):
    values = {
        "optim": {"lr": 0.1},
        "sched": {"peak_lr": "${optim.lr}", "chain": "${sched.peak_lr}"},
        "width": 4,
        "layers": ["${width}", "${width}"],
    }
    composed = compose_arms(_inline(values), tmp_path)
    assert not composed.problems
    arm = composed.configs["b"]
    assert arm["sched"] == {"peak_lr": 0.1, "chain": 0.1} and arm["layers"] == [
        16,
        16,
    ]  # resolved as before
    tuned = apply_params(arm, {"optim.lr": 0.003}, composed.raw["b"])
    assert tuned["optim"]["lr"] == tuned["sched"]["peak_lr"] == tuned["sched"]["chain"] == 0.003
    assert tuned["layers"] == [16, 16]
    # tuning a key that is itself an interpolation replaces it, and what interpolates it follows
    own = apply_params(arm, {"sched.peak_lr": 0.02}, composed.raw["b"])
    assert own["sched"] == {"peak_lr": 0.02, "chain": 0.02} and own["optim"]["lr"] == 0.1
    # a sampled string stays a value, never an interpolation
    assert (
        apply_params(arm, {"optim.name": "${width}"}, composed.raw["b"])["optim"]["name"]
        == "${width}"
    )


# ---------------------------------------------------------------- item 2: the seeds did not vary
# the run


def _record(arm, seed, values, status="completed", metric="acc", phase="confirm", **extra):
    reports = [{"step": i + 1, "metrics": {metric: v}, "time_s": 0.1} for i, v in enumerate(values)]
    return {
        "trial_id": f"{phase}-{arm}-{seed}",
        "phase": phase,
        "arm": arm,
        "seed": seed,
        "status": status,
        "reports": reports,
        "errors": [],
        "violations": [],
        **extra,
    }


def test_identical_curves_across_seeds_are_found_and_make_the_decision_invalid():
    records = [_record("base", s, [0.5, 0.6]) for s in range(3)]
    records += [_record("arm", s, [0.5, 0.6 + 0.01 * s]) for s in range(3)]
    assert seeds_identical(records) == {"base": 3}
    from planner._stats.decide import mark_invalid

    why = seeds_did_not_vary("arm", seeds_identical(records), "base", "acc")
    assert why.startswith("Invalid: the seeds did not vary the run")
    assert "the baseline base reported exactly the same curves on all 3 seeds" in why
    assert seeds_did_not_vary("arm", {}, "base", "acc") is None
    (row,) = mark_invalid(
        [{"arm": "arm", "decision": "reject", "reason": "measured"}], {"arm": why}, "data"
    )
    assert row["decision"] == "invalid" and row["reason"].startswith(why)
    # before: the identical values went to the test, which said reject with CI [+0, +0], p = 1
    values = {"base": [(s, 0.6) for s in range(3)], "arm": [(s, 0.6) for s in range(3)]}
    (plain,) = decide(Acceptance(min_effect=0.01), "max", values, "base", planned_seeds=[0, 1, 2])
    assert plain.decision == "inconclusive" and "degenerate spread" in plain.reason


# ---------------------------------------------------------------- items 3 and 9: the decision
# rule's edges


def test_permutation_tie_tolerance_is_scale_free():
    """Adding 1e10 to every value turned a 3-sd effect into reject with CI [0, 0]."""
    base, arm = [0.1, -0.2, 0.05, 0.0, 0.15, -0.1], [3.1, 2.8, 3.2, 2.9, 3.0, 3.05]
    small = compare(base, arm, mode="max", test="bootstrap", alpha=0.05)
    big = compare(
        [v + 1e10 for v in base], [v + 1e10 for v in arm], mode="max", test="bootstrap", alpha=0.05
    )
    assert small.ci_low > 2 and big.ci_low > 2 and big.p_value == pytest.approx(small.p_value)
    assert big.ci_low == pytest.approx(small.ci_low, abs=1e-4) and big.ci_high == pytest.approx(
        small.ci_high, abs=1e-4
    )


def test_min_effect_is_compared_as_it_prints():
    """0.00999999999999995 once read '+0.01 ... below the minimum 0.01'."""
    base = [0.80, 0.81, 0.79, 0.80, 0.82]
    arm = [
        v + 0.0099999999999999 + d
        for v, d in zip(base, [0.001, -0.001, 0.0005, -0.0005, 0.0], strict=True)
    ]
    (d,) = decide(
        Acceptance(min_effect=0.01, test="paired", correction="none"),
        "max",
        {"b": list(enumerate(base)), "a": list(enumerate(arm))},
        "b",
        planned_seeds=[0, 1, 2, 3, 4],
    )
    assert f"{d.effect:+.4g}" == "+0.01" and d.decision == "accept", d.reason
    assert "below the minimum" not in d.reason


def test_a_look_without_alpha_says_no_stop_is_possible():
    from planner._dispatch.sequential_confirm import _look_json
    from planner._stats.sequential import (
        NO_STOP,
        no_stop_possible,
        plan_design,
        sequential_decision,
    )

    design = plan_design(20, 10, 0.05, test="welch")
    k = next(i for i, p in enumerate(design.nominal_p) if no_stop_possible(p))
    n = design.look_sizes[k]
    step = sequential_decision(
        k,
        [0.1 * (i % 3) for i in range(n)],
        [5 + 0.1 * (i % 4) for i in range(n)],
        design=design,
        mode="max",
        min_effect=0.01,
    )
    assert step.action == "continue" and NO_STOP in step.reason and "nan" not in step.reason.lower()
    assert "inf" not in step.reason and _look_json(step)["note"] == NO_STOP


# ---------------------------------------------------------------- item 4: a metric never reported


def _spec(tmp_path, fn, *, phase="tune", metric="val_acc", heldout=None, budget=3, tid="t"):
    return TrialSpec(
        trial_id=tid,
        phase=phase,
        arm="a",
        seed=1,
        index=0,
        params={},
        config={},
        budget=budget,
        dir=str(tmp_path / tid),
        trainable=f"tests.trainables.fail_loud:{fn}",
        metric=metric,
        heldout=heldout,
        path=(REPO,),
    )


def test_a_metric_never_reported_is_a_protocol_error_naming_what_was_reported(tmp_path):
    record = run_trial(_spec(tmp_path, "misnamed", metric="val_acc"))
    assert record["status"] == "protocol_error" and record["attempts"] == 1
    assert record["errors"][-1]["message"].startswith(
        "metric val_acc never reported; got train_loss, val_accuracy"
    )
    confirm = run_trial(
        _spec(
            tmp_path,
            "misnamed",
            phase="confirm",
            metric="val_accuracy",
            heldout="test_acc",
            tid="c",
        )
    )
    assert (
        confirm["status"] == "protocol_error"
        and "metric test_acc never reported" in confirm["errors"][-1]["message"]
    )
    assert (
        run_trial(_spec(tmp_path, "misnamed", metric="val_accuracy", tid="ok"))["status"]
        == "completed"
    )


# ---------------------------------------------------------------- item 5: errors named once, with
# a count


def test_failed_trials_are_grouped_by_error_in_order_of_first_occurrence():
    failed = [
        _record(
            "a",
            s,
            [],
            status="failed",
            phase="tune",
            errors=[{"type": "KeyError", "message": "'lr'\nmore", "traceback": ""}],
        )
        for s in range(3)
    ]
    other = _record(
        "b",
        0,
        [],
        status="protocol_error",
        phase="tune",
        errors=[{"type": "TrialProtocolError", "message": "metric acc never reported; got x"}],
    )
    groups = error_groups([*failed, _record("c", 0, [0.5]), other])
    assert groups == [
        {"error": "KeyError: 'lr'", "count": 3, "first": "tune-a-0"},
        {
            "error": "TrialProtocolError: metric acc never reported; got x",
            "count": 1,
            "first": "tune-b-0",
        },
    ]


def test_a_run_with_an_arm_without_value_exits_4_and_names_the_error():
    from planner import RunResult
    from planner._cli.run_text import format_result
    from planner._core.errors import EXIT_NO_VALUE

    result = RunResult(
        run_dir=__import__("pathlib").Path("runs/x"),
        state="completed",
        reason="all planned trials ended",
        decisions=[],
        wall_time_s=1.0,
        trials_ended=4,
        no_value_arms=["base", "arm"],
        errors=[{"error": "KeyError: 'lr'", "count": 4, "first": "tune-base-1000-0"}],
    )
    assert result.exit_code == EXIT_NO_VALUE == 4
    text = format_result(result)
    assert "error:      KeyError: 'lr' (in 4 trials, first tune-base-1000-0)" in text
    assert "arms base, arm ended with no usable confirmation value" in text


# ---------------------------------------------------------------- item 6: held-out exposure, one
# per trial


def test_heldout_in_tuning_is_counted_once_per_trial_everywhere():
    from planner._store.facts import heldout_ledger, violations

    contract = {"metric": {"name": "val_acc", "heldout": "test_acc"}, "budget": {"exposure": 3}}
    logged = [
        {"kind": "heldout_in_tuning", "step": s, "metric": "test_acc"} for s in (1, 2, 3)
    ]  # an older run
    records = [
        _record("a", 1000, [0.5, 0.6, 0.7], phase="tune", metric="val_acc", violations=logged),
        _record(
            "a",
            1001,
            [0.5],
            status="early_stopped",
            phase="tune",
            metric="val_acc",
            violations=logged[:1],
        ),
    ]  # rebuilt from what Tune streamed: no test_acc in its reports
    records[0]["trial_id"], records[1]["trial_id"] = "t0", "t1"
    found = violations(records, contract)
    assert [(v["trial_id"], v["step"]) for v in found] == [("t0", 1), ("t1", 1)]
    assert heldout_ledger(records, contract)["tuning_exposures"] == 2


# ---------------------------------------------------------------- items 7 and 8: validate


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_a_non_finite_diverged_value_is_refused(tmp_path, value):
    text = edited(
        "inline.yaml",
        [
            (
                "budget: {exposure: 5}",
                f"budget: {{exposure: 5}}\nfailures: {{diverged_value: {value}}}",
            )
        ],
    )
    result = validate(write_contract(tmp_path, text))
    (error,) = [d for d in result.diagnostics if d.code == "P414"]
    assert (
        error.severity == "error"
        and "failures.diverged_value is" in error.message
        and error.line == 19
    )


@pytest.mark.parametrize(
    "seeds, arms, warned, need",
    [
        ("[0, 1, 2]", 1, True, 4),  # smallest p 0.1 > 0.05
        ("[0, 1, 2, 3]", 2, True, 5),  # 2/70 = 0.029 > 0.025 (holm's first level)
        ("[0, 1, 2, 3]", 1, False, None),
    ],
)
def test_a_bootstrap_design_that_can_never_accept_is_flagged(tmp_path, seeds, arms, warned, need):
    extra = "\n  - {name: wider, overrides: [model.width=256]}" if arms == 2 else ""
    text = edited(
        "inline.yaml",
        [
            ("acceptance: {min_effect: 0.01}", "acceptance: {min_effect: 0.01, test: bootstrap}"),
            ("seeds: [0, 1, 2, 3, 4]", f"seeds: {seeds}"),
            (
                "  - {name: wide, overrides: [model.width=128]}",
                "  - {name: wide, overrides: [model.width=128]}" + extra,
            ),
        ],
    )
    path = write_contract(tmp_path, text)
    found = [d for d in validate(path).diagnostics if d.code == "P904"]
    assert bool(found) == warned
    if warned:
        assert found[0].severity == "warning" and f"at least {need} seeds per arm" in found[0].hint
        assert "cannot accept" in found[0].message
        strict = [d for d in validate(path, strict=True).diagnostics if d.code == "P904"]
        assert strict[0].severity == "error"


# ---------------------------------------------------------------- item 10: hints that lead
# somewhere


def test_an_override_typo_names_the_near_key_not_the_add_form(tmp_path):
    text = edited("inline.yaml", [("overrides: [model.width=128]", "overrides: [model.widht=128]")])
    (error,) = [d for d in validate(write_contract(tmp_path, text)).diagnostics if d.code == "P204"]
    assert "did you mean 'model.width'?" in error.message and "+model" not in error.message
    far = edited(
        "inline.yaml",
        [("overrides: [model.width=128]", "overrides: [model.width=128, trainer.epochs=3]")],
    )
    (error,) = [d for d in validate(write_contract(tmp_path, far)).diagnostics if d.code == "P204"]
    assert "no key is near it; write '+trainer.epochs=3' to add it" in error.message


def test_a_pilot_without_spread_says_what_it_showed():
    from planner import UsageError
    from planner._plan.pilot import Pilot
    from planner._plan.seeds import spread_from_pilot

    pilot = Pilot(
        "runs/p",
        "acc",
        "base",
        ["base", "arm"],
        {"base": {0: 0.5, 1: 0.5}, "arm": {0: 0.6, 1: 0.6}},
    )
    for test in ("welch", "paired"):
        with pytest.raises(UsageError) as caught:
            spread_from_pilot(pilot, test)
        assert "shows no seed-to-seed spread in acc" in str(
            caught.value
        ) and "positive number" not in str(caught.value)


# ---------------------------------------------------------------- one final value


def test_one_final_value_nan_is_kept_and_reaches_the_diverged_value_rule_with_and_without_looks():
    from planner._dispatch.decision import decide_arms
    from planner._dispatch.sequential_confirm import SequentialConfirmation

    record = _record("b", 0, [0.5, "nan"])
    assert math.isnan(final_value(record, "acc")) and final_value(record, "other") is None
    data = {
        "version": 1,
        "name": "fv",
        "hypothesis": "h",
        "trainable": "m:f",
        "config": {"values": {"x": 0}},
        "factor": {"name": "x"},
        "baseline": {"name": "a", "overrides": ["x=0"]},
        "arms": [{"name": "b", "overrides": ["x=1"]}],
        "metric": {"name": "acc", "mode": "max"},
        "acceptance": {"min_effect": 0.05},
        "seeds": [0, 1, 2, 3],
        "budget": {"exposure": 2},
        "failures": {"diverged_value": 0.0},
    }
    records = [_record("a", s, [0.5, 0.5 + 0.01 * s]) for s in range(4)]
    records += [_record("b", 0, [0.5, "nan"])] + [
        _record("b", s, [0.5, 0.6 + 0.01 * s]) for s in range(1, 4)
    ]
    fixed = decide_arms(Contract.model_validate(data), records)[0]
    seq_contract = Contract.model_validate({**data, "confirmation": {"looks": 2}})
    seq = SequentialConfirmation(seq_contract)
    looks = seq.decisions(seq.evaluate({r["trial_id"]: r for r in _by_id(records)}))[0]
    for row in (
        fixed,
        looks,
    ):  # the diverged seed counts as 0.0, in both: neither says "reported no value"
        assert row["decision"] != "incomplete", row["reason"]
        assert row["n_arm"] >= 2


def _by_id(records):
    from planner._plan.trials import confirm_trial_id

    return [{**r, "trial_id": confirm_trial_id(r["arm"], r["seed"])} for r in records]


def test_a_declared_metric_no_row_held_is_a_warning_at_the_end_of_the_run_and_a_degenerate_decision_says_why():  # noqa: E501
    """A new user's `train_loss: train_los_epoch` typo ended exit 0 with nothing on the terminal
    (the note sat in trials.jsonl); and `wd: inconclusive effect +0 CI [none, none]` printed
    without its reason."""
    from pathlib import Path

    from planner import RunResult
    from planner._cli.run_text import format_result
    from planner._core.records import note_groups

    note = "metrics.names maps 'train_loss' to 'train_los_epoch', which no row of {} holds"
    records = [
        {
            "trial_id": f"confirm-a-s{s}",
            "notes": [note.format(f"/runs/x/trials/confirm-a-s{s}/m.csv")],
        }
        for s in range(3)
    ] + [{"trial_id": "confirm-b-s0"}]
    groups = note_groups(records)
    assert [(g["count"], g["first"]) for g in groups] == [(3, "confirm-a-s0")]
    degenerate = {
        "arm": "wd",
        "decision": "inconclusive",
        "effect": 0.0,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "n_arm": 3,
        "n_baseline": 3,
        "reason": "Inconclusive (degenerate spread): every seed gave the same value.",
    }
    text = format_result(
        RunResult(
            run_dir=Path("runs/x"),
            state="completed",
            reason="all planned trials ended",
            decisions=[degenerate],
            wall_time_s=1.0,
            trials_ended=4,
            notes=groups,
        )
    )
    assert (
        "warning:    metrics.names maps 'train_loss' to 'train_los_epoch'" in text
        and "(in 3 trials, first confirm-a-s0)" in text
    )
    assert "    Inconclusive (degenerate spread): every seed gave the same value." in text
