"""The trials a command sends to Ray: their specs, the hooks that log them, the fixed-config tasks.

`plan run` (tuning, confirmation, confirmation in looks) and `plan reeval`
send trials the same way, through one `Dispatch`:

    Dispatch.open(contract, contract_dir, configs, store)
        .spec(planned trial, config)   -> a TrialSpec: the trainable, the budget's
                                          limits, the retries, this driver's session
        .hooks()                       -> log a trial as it starts, ends, is cancelled
        .run_fixed(specs, deadline)    -> run fixed-config trials as Ray tasks

Each ended trial is appended to trials.jsonl and kept in `records`; a
`listener` (the driver's live progress) hears of each start and end after
the run folder does.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._data.checks import cross_trial_violations, data_violations
from planner._dispatch.fixed import run_fixed
from planner._dispatch.hooks import Hooks, Outcome
from planner._dispatch.session import trainable_search_path
from planner._trial.command import command_trainable
from planner._trial.protocol import TrialSpec


def new_session() -> str:
    """This driver process, as the trials' attempt ledgers name it: tells a retry from a resume."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


@dataclass
class Dispatch:
    contract: Any  # planner._contract.model.Contract
    store: Any  # planner._store.writer.RunStore
    search_path: list[str]
    contract_sha256: str
    command: dict | None = None  # a `command:` trainable, as plain data every TrialSpec carries
    remote: bool = False  # on a cluster the code ships through runtime_env: no driver paths in the specs
    session: str = field(default_factory=new_session)
    records: dict[str, dict] = field(default_factory=dict)  # trial_id -> the record, as trials end
    listener: Any = None  # started(spec), ended(record), cancelled(spec, why), after the run folder

    @classmethod
    def open(cls, contract, contract_dir: Path, configs: dict[str, dict], store, *,
             contract_sha256: str | None = None, search_path: list[str] | None = None, **options) -> Dispatch:
        """A Dispatch for `contract`; `configs` are the arms' composed configs (a command trainable needs them)."""
        command = None
        if contract.command:
            command = command_trainable(contract, contract_dir, configs).to_dict()
        return cls(contract, store, search_path if search_path is not None else trainable_search_path(contract_dir),
                   contract_sha256 or contract.sha256(), command, **options)

    def spec(self, trial, config: dict, params: dict | None = None) -> TrialSpec:
        """The TrialSpec of `trial` (anything with trial_id, phase, arm, seed, index) on `config`."""
        c = self.contract
        extra: dict[str, Any] = {"session": self.session, "max_trial_memory_bytes": c.budget.max_trial_memory_bytes,
                                 "data": c.data.model_dump()}  # the worker checks the splits against it
        if self.command is not None:
            extra["command"] = self.command
        return TrialSpec(trial_id=trial.trial_id, phase=trial.phase, arm=trial.arm, seed=trial.seed,
                         index=trial.index, params=dict(params or {}), config=config, budget=c.budget.exposure,
                         dir=self.store.trial_dir(trial.trial_id), trainable=c.trainable or c.command_line,
                         metric=c.metric.name, heldout=c.metric.heldout, retries=c.failures.retries,
                         contract_sha256=self.contract_sha256, max_trial_time_s=c.budget.max_trial_time_s,
                         path=() if self.remote else tuple(self.search_path),
                         cwd=None if self.remote else os.getcwd(), extra=extra)

    # the hooks: the run folder first, then the listener
    def _started(self, spec: TrialSpec) -> None:
        self.store.event("trial_started", sync=False, trial_id=spec.trial_id, arm=spec.arm, phase=spec.phase,
                         seed=spec.seed)
        if self.listener is not None:
            self.listener.started(spec)

    def _ended(self, record: dict) -> None:
        self._check_data(record)
        self.store.record_trial(record)
        self.records[record["trial_id"]] = record
        self.store.event("trial_ended", sync=False, trial_id=record["trial_id"], status=record["status"],
                         exposure=record["exposure"])
        if self.listener is not None:
            self.listener.ended(record)

    def _check_data(self, record: dict) -> None:
        """The data checks across trials (docs/data.md), added to the record before it is written; each data
        violation of the record is also a `data_violation` event (the listener shows it when the trial ends)."""
        if record.get("splits"):
            earlier = [r for r in self.records.values() if r["trial_id"] != record["trial_id"]]
            record["violations"] = list(record.get("violations") or []) + cross_trial_violations(
                record, earlier, self.contract.data.model_dump(), baseline=self.contract.baseline.name)
        for v in data_violations(record):
            self.store.event("data_violation", sync=False, trial_id=record["trial_id"], arm=record.get("arm"),
                             phase=record.get("phase"), seed=record.get("seed"), violation=v)

    def _cancelled(self, spec: TrialSpec, why: str) -> None:
        self.store.event("trial_cancelled", sync=False, trial_id=spec.trial_id, reason=why)
        if self.listener is not None:
            self.listener.cancelled(spec, why)

    def hooks(self) -> Hooks:
        listener = self.listener
        return Hooks(self._started, self._ended, self._cancelled,
                     should_stop=getattr(listener, "should_stop", lambda: None),
                     trial_reported=getattr(listener, "trial_reported", lambda trial_id, metrics: None))

    def run_fixed(self, specs: list[TrialSpec], remaining_s: float | None = None) -> Outcome:
        """Run fixed-config trials as Ray tasks within `remaining_s` seconds (None: no limit); the Outcome."""
        return run_fixed(specs, resources=self.contract.budget.resources, hooks=self.hooks(),
                         max_trial_time_s=self.contract.budget.max_trial_time_s,
                         deadline=None if remaining_s is None else time.monotonic() + remaining_s)
