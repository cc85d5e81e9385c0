"""The one Dispatch the driver and reeval share: every trial's spec carries the same limits (no Ray
needed)."""

from __future__ import annotations

from planner._contract.model import Contract
from planner._dispatch.specs import Dispatch
from planner._plan.trials import PlannedTrial
from planner._store.writer import RunStore
from tests._runs import synthetic_contract


def test_run_and_reeval_trials_get_one_spec_shape(tmp_path):
    contract = Contract.model_validate(
        synthetic_contract(
            budget={
                "exposure": 3,
                "unit": "epoch",
                "max_trial_time": 60,
                "max_trial_memory": "512MiB",
            },
            failures={"retries": 2},
        )
    )
    store = RunStore.create(tmp_path / "runs", contract.name)
    dispatch = Dispatch.open(contract, tmp_path, {}, store)
    config = {"recipe": {"name": "b"}}
    confirm = dispatch.spec(PlannedTrial("confirm-treat-s0", "confirm", "treat", 0, 0), config)
    reeval = dispatch.spec(
        PlannedTrial("reeval-treat-s0-1", "reeval", "treat", 0, 0), config, params={"lr": 0.1}
    )
    for spec in (confirm, reeval):
        assert spec.extra == {
            "session": dispatch.session,
            "max_trial_memory_bytes": 512 * 1024**2,
            "data": contract.data.model_dump(),
            "reads_base": str(tmp_path.resolve()),
        }  # the data section the worker checks splits by; the folder a trial's reads are named from
        assert (spec.budget, spec.unit, spec.retries, spec.max_trial_time_s) == (3, "epoch", 2, 60)
        assert spec.contract_sha256 == contract.sha256() and spec.config == config
        assert spec.dir == store.trial_dir(spec.trial_id)
    assert (confirm.params, reeval.params) == ({}, {"lr": 0.1})


def test_on_a_cluster_the_specs_carry_no_driver_paths(tmp_path):
    contract = Contract.model_validate(synthetic_contract())
    store = RunStore.create(tmp_path / "runs", contract.name)
    here = Dispatch.open(contract, tmp_path, {}, store)
    there = Dispatch.open(contract, tmp_path, {}, store, remote=True)
    trial = PlannedTrial("confirm-base-s0", "confirm", "base", 0, 0)
    assert here.spec(trial, {}).path == tuple(here.search_path) and here.spec(trial, {}).cwd
    assert there.spec(trial, {}).path == () and there.spec(trial, {}).cwd is None


def test_the_hooks_log_the_trial_then_tell_the_listener(tmp_path):
    contract = Contract.model_validate(synthetic_contract())
    store = RunStore.create(tmp_path / "runs", contract.name)
    heard = []

    class Listener:
        def started(self, spec):
            heard.append(("started", spec.trial_id))

        def ended(self, record):
            heard.append(("ended", record["trial_id"], record["trial_id"] in dispatch.records))

        def cancelled(self, spec, why):
            heard.append(("cancelled", spec.trial_id))

    dispatch = Dispatch.open(contract, tmp_path, {}, store, listener=Listener())
    spec = dispatch.spec(PlannedTrial("confirm-base-s0", "confirm", "base", 0, 0), {})
    hooks = dispatch.hooks()
    hooks.trial_started(spec)
    hooks.trial_ended(
        {
            "trial_id": spec.trial_id,
            "phase": "confirm",
            "arm": "base",
            "seed": 0,
            "status": "completed",
            "exposure": 3,
            "reports": [],
        }
    )
    store.close()
    assert heard == [("started", spec.trial_id), ("ended", spec.trial_id, True)]
    events = (store.root / "events.jsonl").read_text()
    assert '"trial_started"' in events and '"trial_ended"' in events
    assert spec.trial_id in (store.root / "trials.jsonl").read_text()
