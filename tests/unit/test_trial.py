"""The trainable protocol, run in-process (no Ray): statuses, errors, retries, seeding."""

import pytest

from planner._trial.protocol import run_trial
from planner._trial.shortfall import why_short
from tests._trial_specs import spec


def test_a_good_trial_completes_with_every_report(tmp_path):
    record = run_trial(spec("good", tmp_path))
    assert record["status"] == "completed" and record["exposure"] == 3 and record["attempts"] == 1
    assert [r["step"] for r in record["reports"]] == [1, 2, 3]
    assert record["reports"][-1]["metrics"] == {"acc": pytest.approx(0.3)}
    assert record["errors"] == [] and (tmp_path / "t").is_dir()


def test_the_trainable_sees_its_seed_budget_and_config(tmp_path):
    record = run_trial(spec("sees", tmp_path, seed=11, config={"lr": 0.25}, metric="seed"))
    assert record["status"] == "completed"
    assert record["reports"][0]["metrics"] == {"seed": 11.0, "lr": 0.25}


@pytest.mark.parametrize(
    "fn, fragment",
    [
        ("past_budget", "past the budget"),
        ("out_of_order", "does not follow"),
        (
            "out_of_order",
            "trainer.fit called twice, starts its steps over",
        ),  # the usual cause, named
        ("not_a_number", "not a number"),
        ("stops_short", "before the full exposure"),
        ("no_report", "no report at all"),
        ("swallows", "past the budget"),
    ],
)
def test_protocol_errors_fail_the_trial_without_retry(tmp_path, fn, fragment):
    record = run_trial(spec(fn, tmp_path, retries=2))
    assert record["status"] == "protocol_error"
    assert record["attempts"] == 1
    assert fragment in record["errors"][-1]["message"]


def test_a_non_finite_decision_metric_is_diverged_and_stops_there(tmp_path):
    record = run_trial(spec("diverges", tmp_path, retries=2, budget=4))
    assert record["status"] == "diverged" and record["attempts"] == 1
    assert record["exposure"] == 2 and record["reports"][-1]["metrics"]["acc"] == "inf"


def test_a_raise_is_retried_then_failed_with_each_traceback(tmp_path):
    record = run_trial(spec("raises", tmp_path, retries=2))
    assert record["status"] == "failed" and record["attempts"] == 3
    assert len(record["errors"]) == 3
    assert record["errors"][0]["type"] == "ValueError"
    assert "boom in the trainable" in record["errors"][0]["traceback"]
    assert "protocol.py" in record["errors"][0]["traceback"]


def test_a_retry_that_succeeds_completes_and_keeps_the_first_error(tmp_path):
    record = run_trial(spec("flaky", tmp_path, retries=1))
    assert record["status"] == "completed" and record["attempts"] == 2
    assert [e["attempt"] for e in record["errors"]] == [1]


def test_heldout_reported_in_tuning_is_a_violation_not_a_failure(tmp_path):
    record = run_trial(spec("heldout_in_tuning", tmp_path, phase="tune", heldout="test_acc"))
    assert record["status"] == "completed"
    # one violation per trial, at its first step, not one per step
    assert [(v["kind"], v["step"]) for v in record["violations"]] == [("heldout_in_tuning", 1)]
    confirm = run_trial(
        spec("heldout_in_tuning", tmp_path, phase="confirm", heldout="test_acc", tid="c")
    )
    assert confirm["violations"] == []


def test_reports_forwarded_to_tune_leave_out_the_heldout_metric(tmp_path):
    seen = []
    run_trial(
        spec("heldout_in_tuning", tmp_path, phase="tune", heldout="test_acc"),
        forward=lambda step, metrics, t, violations: seen.append((step, metrics)),
    )
    assert seen == [(1, {"acc": 0.5}), (2, {"acc": 0.5}), (3, {"acc": 0.5})]


def test_state_does_not_leak_between_trials_in_one_process(tmp_path):
    first = run_trial(spec("leaky", tmp_path, tid="x1"))
    run_trial(spec("noisy_neighbour", tmp_path, tid="x2", seed=99))
    again = run_trial(spec("leaky", tmp_path, tid="x3"))
    assert [r["metrics"] for r in first["reports"]] == [r["metrics"] for r in again["reports"]]
    other_seed = run_trial(spec("leaky", tmp_path, tid="x4", seed=4))
    assert [r["metrics"] for r in other_seed["reports"]] != [r["metrics"] for r in first["reports"]]


def test_a_trial_that_stops_short_is_told_what_most_often_causes_it(tmp_path):
    # a function trainable ended two steps short: the early-stopping clause, never a command's
    # step_base
    message = run_trial(spec("stops_short", tmp_path))["errors"][-1]["message"]
    assert (
        "EarlyStopping" in message and "tuning.early_stop" in message and "step_base" not in message
    )
    # a command reading a CSV's epoch column one step short: the step_base clause (the clause
    # alone: a command's trial runs a subprocess, which this tier does not)
    one_short = spec("stops_short", tmp_path, budget=2, tid="u")
    one_short.extra["command"] = {
        "metrics": {"file": "metrics.csv", "format": "csv", "step": "epoch", "step_base": 1}
    }
    clause = why_short(one_short, 1)
    assert "one step short" in clause and "step_base: 0" in clause and "epoch column" in clause
    one_short.extra["command"]["metrics"]["step_base"] = (
        0  # said already: the early-stopping clause
    )
    assert "EarlyStopping" in why_short(one_short, 1)
    assert why_short(one_short, 2) == ""


def test_a_last_report_short_of_the_budget_names_the_interval_the_budget_is_no_multiple_of(
    tmp_path,
):
    # nanoGPT's eval_interval 75 and a budget of 200: evaluations at 0, 75, 150, the next at 225
    short = spec("stops_short", tmp_path, budget=200, tid="i")
    clause = why_short(short, 150, steps=[0, 75, 150])
    assert "reported every 75 steps (at 0, 75, 150)" in clause
    assert "budget of 200 is not a multiple of 75" in clause and "225" in clause
    assert "EarlyStopping" not in clause
    # reports that stopped at an interval that would still have fit: the script stopped itself
    assert "EarlyStopping" in why_short(short, 100, steps=[50, 100])


def test_a_script_that_stops_one_interval_before_the_budget_is_told_it_missed_its_last_evaluation(
    tmp_path,
):
    # makemore: `--max-steps 1000` trains steps 0..999 and evaluates at multiples of 500 before
    # its `step += 1`, so its evaluation at 1000 is never reached; one report, at 500
    short = spec("stops_short", tmp_path, budget=1000, tid="m")
    short.extra["command"] = {"budget_key": "max-steps", "metrics": {"format": "stdout"}}
    for steps in ([500], [250, 500, 750]):
        clause = why_short(short, steps[-1], steps=steps)
        assert "stopped one interval short" in clause and "step 1000, the budget" in clause
        assert "max-steps: 1001" in clause and "EarlyStopping" not in clause
    # a function trainable: the same cause, without the command's way out
    function = spec("stops_short", tmp_path, budget=1000, tid="f")
    clause = why_short(function, 500, steps=[500])
    assert "one step past the budget" in clause and "budget_key" not in clause
    # two intervals short is a script that stopped itself
    assert "EarlyStopping" in why_short(short, 500, steps=[250, 500])


def test_a_printed_script_that_trained_past_its_last_evaluation_is_told_so(tmp_path):
    """Its step lines (`iter 490:`) show the script trained on; the clause says so, and where its
    evaluations came at one interval and stopped one short, that clause's way out comes first."""
    short = spec("stops_short", tmp_path, budget=500, tid="p")
    metrics = {"format": "stdout", "names": {"acc": "test_acc"}}
    short.extra["command"] = {"budget_key": "trainer.max_iters", "metrics": metrics}
    clause = why_short(short, 0, 490, steps=[0])
    assert "did train to step 490" in clause and "'test_acc' last at step 0" in clause
    assert "EarlyStopping" not in clause
    longer = spec("stops_short", tmp_path, budget=1000, tid="q")
    longer.extra["command"] = short.extra["command"]
    clause = why_short(longer, 500, 990, steps=[0, 500])
    assert "stopped one interval short" in clause and "trainer.max_iters: 1001" in clause
