"""Every trial accounted for by the driver, without Ray: a completed attempt keeps its result, a
failed record says why, fail fast, the tuning budget matched, exit 4 for an invalid decision, a
summary that never guesses."""

from __future__ import annotations

import json
from pathlib import Path

from planner import RunResult
from planner._contract.model import Contract
from planner._dispatch.decision import NEVER_RAN, budget_not_matched
from planner._dispatch.failfast import FailFast
from planner._dispatch.fixed import after_worker_death, completed_reports
from planner._dispatch.specs import Dispatch
from planner._plan.trials import PlannedTrial, make_plan
from planner._store.writer import RunStore
from planner._trial.attempts import Ledger
from tests._runs import synthetic_contract

TUNING = {
    "trials_per_arm": 3,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
}


def _spec(tmp_path, retries=0):
    contract = Contract.model_validate(synthetic_contract(failures={"retries": retries}))
    store = RunStore.create(tmp_path / "runs", contract.name)
    dispatch = Dispatch.open(contract, tmp_path, {}, store)
    return dispatch.spec(
        PlannedTrial("confirm-treat-s0", "confirm", "treat", 0, 0), {"recipe": {"name": "b"}}
    )


def _completed_attempt(spec, steps):
    ledger = Ledger.load(spec.dir, spec.extra["session"])
    ledger.start(1)
    ledger.end(1, "completed")
    attempt = Path(spec.dir) / "attempt-1"
    attempt.mkdir(parents=True, exist_ok=True)
    (attempt / "reports.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "metrics": {"val_acc": 0.5 + s / 10}}) + "\n"
            for s in range(1, steps + 1)
        )
    )


def test_an_attempt_that_completed_keeps_its_reports_after_its_worker_died(tmp_path):
    spec = _spec(tmp_path)
    _completed_attempt(spec, spec.budget)
    reports = completed_reports(spec)
    assert [r["step"] for r in reports] == list(range(1, spec.budget + 1))
    assert reports[-1]["metrics"]["val_acc"] == 0.5 + spec.budget / 10


def test_an_attempt_short_of_the_exposure_or_not_completed_has_no_kept_result(tmp_path):
    spec = _spec(tmp_path)
    assert completed_reports(spec) is None  # no ledger
    _completed_attempt(spec, spec.budget - 1)
    assert completed_reports(spec) is None


def test_a_failed_record_after_a_worker_death_always_carries_its_reason(tmp_path):
    spec = _spec(tmp_path)
    _completed_attempt(spec, 1)  # the ledger says completed, so it lists no error of its own
    status, errors, used = after_worker_death(spec, "ActorDiedError: the actor died unexpectedly")
    assert status == "failed" and errors, errors
    assert "the worker process died: ActorDiedError" in errors[0]["message"]


def test_a_worker_death_the_ledger_never_heard_of_uses_a_retry_counted_by_the_driver(tmp_path):
    spec = _spec(tmp_path, retries=1)  # no ledger in the driver's folder: the attempt left none
    status, errors, used = after_worker_death(spec, "NodeDiedError: the node died", sent=1)
    assert (status, used) == ("retry", 1)
    assert [e["type"] for e in errors] == ["WorkerDied"]
    status, errors, used = after_worker_death(spec, "NodeDiedError: the node died", sent=2)
    assert (status, used) == ("failed", 2)
    assert errors[-1]["attempt"] == 2 and "the node died" in errors[-1]["message"]


def _failed(trial_id, arm, message):
    return {
        "trial_id": trial_id,
        "arm": arm,
        "phase": "tune",
        "status": "failed",
        "errors": [
            {"attempt": 1, "type": "FileNotFoundError", "message": message, "traceback": ""}
        ],
    }


def test_fail_fast_after_the_first_trials_of_every_arm_fail_with_one_error():
    ff = FailFast("val_acc", frozenset({"base", "treat"}))
    ff.trial_ended(_failed("tune-treat-s100-t000", "treat", "No such file: '/data/run-1/x.csv'"))
    ff.trial_ended(_failed("tune-treat-s100-t001", "treat", "No such file: '/data/run-22/x.csv'"))
    ff.trial_ended(_failed("tune-treat-s100-t002", "treat", "No such file: '/data/run-333/x.csv'"))
    assert ff.should_stop() is None  # one arm crashing while the baseline has not ended is no sign
    ff.trial_ended(_failed("tune-base-s100-t000", "base", "No such file: '/data/run-4444/x.csv'"))
    assert "the first 4 trials all failed with one error" in ff.should_stop()
    assert "(in 4 trials, first tune-treat-s100-t000)" in ff.should_stop()


def test_no_fail_fast_after_a_success_two_errors_or_with_keep_going():
    for second in (
        {"trial_id": "b", "arm": "base", "phase": "tune", "status": "completed", "errors": []},
        _failed("b", "base", "KeyError: 'lr'"),
    ):
        ff = FailFast("val_acc", frozenset({"base", "treat"}))
        ff.trial_ended(_failed("a", "treat", "No such file: '/x'"))
        ff.trial_ended(second)
        for i in range(5):
            ff.trial_ended(_failed(f"c{i}", "base" if i % 2 else "treat", "No such file: '/x'"))
        assert ff.should_stop() is None
    ff = FailFast("val_acc", frozenset({"base", "treat"}), enabled=False)
    for i in range(5):
        ff.trial_ended(_failed(f"c{i}", "base" if i % 2 else "treat", "No such file: '/x'"))
    assert ff.should_stop() is None


def test_fail_fast_on_a_metric_reported_under_another_name_but_not_on_one_reported_late():
    ff = FailFast("val_acc", frozenset({"base", "treat"}))
    for trial in ("t0", "t1"):
        ff.trial_reported(trial, {"val_accuracy": 0.5})
        ff.trial_reported(trial, {"val_accuracy": 0.6})
    assert (
        "never reported the metric 'val_acc' in their first 2 reports (they report val_accuracy)"
        in ff.should_stop()
    )
    late = FailFast("val_acc", frozenset({"base", "treat"}))
    late.trial_reported("t0", {"train_loss": 1.0})
    late.trial_reported("t0", {"train_loss": 0.9, "val_acc": 0.5})
    for trial in ("t1", "t2", "t3"):
        late.trial_reported(trial, {"train_loss": 1.0})
        late.trial_reported(trial, {"train_loss": 0.9})
    assert late.should_stop() is None


def test_an_arm_short_of_tuning_trials_is_not_matched_and_the_baselines_shortfall_is_every_arms():
    contract = Contract.model_validate(
        synthetic_contract(
            tuning=TUNING,
            arms=[
                {"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.7"]},
                {"name": "cosine", "overrides": ["recipe.name=c", "recipe.level=0.6"]},
            ],
        )
    )
    plan = make_plan(contract)
    never = {"status": "failed", "errors": [{"type": NEVER_RAN, "message": "reset_config"}]}
    records = {t.trial_id: {"status": "completed", "errors": []} for t in plan.tune}
    records["tune-cosine-s100-t002"] = never
    assert budget_not_matched(contract, plan, records) == {
        "cosine": "tuning budget not matched: cosine 2 of 3 trials."
    }
    records["tune-base-s100-t001"] = never
    reasons = budget_not_matched(contract, plan, records)
    assert reasons["treat"] == "tuning budget not matched: base 2 of 3 trials."
    assert reasons["cosine"].startswith("tuning budget not matched: cosine 2 of 3 trials.")


def test_a_completed_run_with_an_invalid_decision_exits_4():
    def result(*decisions):
        return RunResult(
            Path("runs/x"),
            "completed",
            "",
            [{"arm": "a", "decision": d} for d in decisions],
            1.0,
            2,
        )

    assert result("accept").exit_code == 0
    assert result("accept", "reject", "inconclusive").exit_code == 0
    assert result("invalid").exit_code == 4
    assert (
        result("accept", "incomplete").exit_code == 4
    )  # a comparison that lacks a confirmation result tested nothing
    assert (
        RunResult(
            Path("runs/x"), "interrupted", "", [{"arm": "a", "decision": "invalid"}], 1.0, 2
        ).exit_code
        == 3
    )


def test_a_lost_ray_session_ends_failed_resumable_not_an_internal_error(tmp_path):
    import ray.exceptions

    from planner._dispatch.run_end import resume_command
    from planner._dispatch.session import HANDLED, RAY_LOST, final_state

    for error in (
        ray.exceptions.RaySystemError("Failed to connect to GCS at 127.0.0.1:6379"),
        ConnectionError("GCS is unreachable"),
    ):
        state, reason, instead = final_state(error)
        assert (state, instead) == ("failed", HANDLED) and reason.startswith(RAY_LOST), reason
        assert "internal error" not in reason
        line = resume_command(state, "c.yaml", None, tmp_path / "runs" / "x", reason)
        assert line is not None and line.startswith("plan run c.yaml --resume ")
    assert final_state(ValueError("a bug"))[1].startswith("internal error")
    assert (
        resume_command("failed", "c.yaml", None, tmp_path, "internal error: ValueError: a bug")
        is None
    )
