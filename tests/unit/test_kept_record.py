"""A trial's record kept in trial.dir before its worker returns it (the attempt ledger's
`keep`/`kept`), and the one reader that says whether it is the trial's (`kept_record`): what lets a
trial whose worker died after the trial ended keep its result (docs/reliability.md). The runs
against a real Ray are in tests/e2e/test_worker_dies_after_trial_e2e.py."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

from planner._dispatch import fixed, worker
from planner._dispatch.hooks import Hooks
from planner._trial.attempts import KEPT, Ledger
from planner._trial.protocol import kept_record, run_trial
from planner._trial.spec import TrialSpec


def spec(
    tmp_path,
    trainable="tests.trainables.worker_ends:three_steps",
    *,
    session="s1",
    retries=0,
    **changes,
):
    base = TrialSpec(
        trial_id="confirm-a-s3",
        phase="confirm",
        arm="a",
        seed=3,
        index=0,
        params={"lr": 0.1},
        config={"lr": 0.1, "layers": [1, 2]},
        budget=3,
        dir=str(tmp_path / "confirm-a-s3"),
        trainable=trainable,
        metric="acc",
        retries=retries,
        extra={"session": session},
    )
    return replace(base, **changes)


def test_a_trial_that_ended_keeps_the_record_its_worker_returns(tmp_path):
    s = spec(tmp_path)
    record = run_trial(s)
    assert record["status"] == "completed"
    assert kept_record(s) == json.loads(json.dumps(record))  # the record, as it is
    assert (
        kept_record(spec(tmp_path, session="s2")) is None
    )  # an earlier driver session's is never this one's


def test_a_record_is_kept_for_every_end_of_the_trial_but_a_raise(tmp_path):
    diverged = spec(tmp_path, "tests.trainables.protocol:diverges")
    assert run_trial(diverged)["status"] == "diverged"
    assert (
        kept_record(diverged)["status"] == "diverged"
    )  # a result: never retried after a worker death
    raised = spec(
        tmp_path,
        "tests.trainables.worker_ends:reports_then_raises_then_raises_at_once",
        trial_id="confirm-b-s3",
        arm="b",
        dir=str(tmp_path / "b"),
        retries=1,
    )
    assert run_trial(raised)["status"] == "failed"
    assert kept_record(raised) is None  # its attempts raised: the ledger's errors say what happened


def test_an_attempt_started_after_the_kept_one_has_no_kept_record(tmp_path):
    """A worker that dies mid-trial in a later attempt is a death, whatever an earlier attempt
    kept."""
    s = spec(tmp_path)
    run_trial(s)
    book = Ledger.load(s.dir, "s1")
    book.start(2)
    assert kept_record(s) is None


def test_a_kept_record_of_another_trial_or_config_or_one_the_ledger_contradicts_is_not_taken(
    tmp_path,
):
    s = spec(tmp_path)
    run_trial(s)
    assert kept_record(s) is not None
    assert (
        kept_record(replace(s, params={"lr": 0.2})) is None
    )  # a tuning trial id with other params
    assert kept_record(replace(s, config={"lr": 0.1, "layers": [1, 3]})) is None
    assert kept_record(replace(s, trial_id="confirm-a-s4")) is None
    assert (
        kept_record(replace(s, config={"layers": (1, 2), "lr": 0.1})) is not None
    )  # the same values
    path = tmp_path / "confirm-a-s3" / KEPT
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "record": {**data["record"], "status": "diverged"}}))
    assert kept_record(s) is None  # the ledger says the attempt completed
    path.write_text(json.dumps({**data, "attempt": 2}))
    assert kept_record(s) is None
    path.write_text(json.dumps(data)[:-20])  # torn
    assert kept_record(s) is None
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text(json.dumps(data))
    assert kept_record(s) is None  # never read through a link


def test_tune_starting_again_a_trial_that_ended_gets_the_kept_record_and_does_not_run_it(tmp_path):
    s = spec(tmp_path, phase="tune", trial_id="tune-a-s3-t000")
    record = run_trial(s)
    gone = replace(
        s, trainable="tests.trainables.no_such_module:train"
    )  # were it run, it would fail
    sent = worker.tune_trainable({"planner_spec": asdict(gone)})
    assert sent == {"planner": {"record": json.loads(json.dumps(record)), "kept": True}}


class _Died:
    """A Ray task's reference whose worker died: `ray.get` raises."""


def test_a_confirmation_trial_whose_worker_died_after_it_ended_is_recorded_as_it_ended(
    tmp_path, monkeypatch
):
    s = spec(tmp_path, retries=2)
    record = run_trial(s)
    ended, kept = [], []
    batch = object.__new__(fixed._FixedBatch)
    batch.hooks = Hooks(
        lambda spec: None,
        ended.append,
        lambda spec, why: None,
        trial_kept=lambda spec, record, why: kept.append((spec.trial_id, why)),
    )
    batch.queue, batch.outcome, batch.attempts = [], fixed.Outcome(), {s.trial_id: 1}
    batch.nodes, batch.where, batch.avoid = None, {}, {}  # one machine: no node is chosen
    ref = _Died()
    batch.running = {ref: (s, 0.0, "2026-01-01T00:00:00Z")}

    class Ray:
        @staticmethod
        def get(_):
            raise RuntimeError("ActorDiedError: the worker died unexpectedly\nmore")

    monkeypatch.setattr(fixed, "ray", Ray)
    batch.collect([ref])
    assert ended == [json.loads(json.dumps(record))] and batch.queue == []  # not run again
    assert kept == [("confirm-a-s3", "ActorDiedError: the worker died unexpectedly")]
    Ledger.load(s.dir, "s1").start(2)  # the next attempt died mid-trial: a death, retried
    batch.running = {ref: (s, 0.0, "2026-01-01T00:00:00Z")}
    batch.collect([ref])
    assert batch.queue == [s] and len(ended) == 1
