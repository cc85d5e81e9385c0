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
from typing import Any, cast

from planner._contract.paths import (
    MISSING,
    apply_params,
    config_diff,
    get_path,
    interpolated_paths,
    is_interpolation,
)
from planner._core.errors import PlannerError, RunError
from planner._core.records import TrialRecord, metric_curve
from planner._data.checks import cross_trial_violations, data_violations
from planner._dispatch.cluster import resources_for
from planner._dispatch.fixed import run_fixed
from planner._dispatch.hooks import Hooks, Outcome
from planner._dispatch.keeper import keeper_name
from planner._dispatch.nodes import FIRST_CHECK_S, NodeGuard
from planner._plan.space import arm_space
from planner._store.facts import kept_of_tuning
from planner._store.identity import trainable_search_path
from planner._store.resume import failed_for_the_disk
from planner._trial.command import command_trainable
from planner._trial.spec import TrialSpec


def at_budget(
    contract, configs: dict[str, dict], raw_configs: dict[str, dict]
) -> tuple[dict, dict]:
    """The arms' composed configs (and unresolved ones) with `command.budget_key` set to the
    exposure, as every trial receives it: what configs/<arm>.yaml and the lineage hashes hold. The
    seed differs per trial, so its key keeps the composed value there; each trial's record holds
    the seed it ran."""
    spec = contract.command_spec
    if spec is None or not spec.budget_key:
        return configs, raw_configs
    values = {spec.budget_key: int(contract.budget.exposure)}
    return (
        {
            arm: apply_params(config, values, raw_configs.get(arm))
            for arm, config in configs.items()
        },
        {arm: apply_params(raw, values) for arm, raw in raw_configs.items()},
    )


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
    remote: bool = (
        False  # on a cluster the code ships through runtime_env: no driver paths in the specs
    )
    session: str = field(default_factory=new_session)
    # the folder a function trainable's reads are named from (its trials record the files they read
    # below it and their module's folder); "." on a cluster: the worker's copy of it
    reads_base: str | None = None
    storage: str | None = (
        None  # plan run --storage: where the trials' files are kept for every node
    )
    records: dict[str, dict] = field(default_factory=dict)  # trial_id -> the record, as trials end
    # trial_id -> the tuned values a tuning trial with no record yet first started with: a trial
    # run again (a second pass of the phase, a --resume) runs them again, never a new draw
    started_params: dict[str, dict] = field(default_factory=dict)
    listener: Any = None  # started(spec), ended(record), cancelled(spec, why), after the run folder
    # the arms' composed configs, and the same before interpolations are resolved: a trial's config
    # is built on them
    configs: dict[str, dict] = field(default_factory=dict)
    raw_configs: dict[str, dict] = field(default_factory=dict)
    _frozen: dict | None = field(
        default=None, repr=False
    )  # the contract as plain data (what the facts read)
    nodes: NodeGuard | None = None  # a cluster run's nodes, checked and held (guard_nodes)

    @classmethod
    def open(
        cls,
        contract,
        contract_dir: Path,
        configs: dict[str, dict],
        store,
        *,
        contract_sha256: str | None = None,
        search_path: list[str] | None = None,
        script_options: tuple | None = None,
        **options,
    ) -> Dispatch:
        """A Dispatch for `contract`; `configs` are the arms' composed configs (a command trainable
        needs them), `raw_configs` (an option) the same before interpolations are resolved;
        `script_options`, what the contract's check read of an argparse script's options
        (`command_trainable`)."""
        command, options = None, dict(options)
        if contract.trainable:
            remote = options.get("remote", False)
            options.setdefault("reads_base", "." if remote else str(Path(contract_dir).resolve()))
        if contract.command:
            command = command_trainable(
                contract, contract_dir, configs, script_options=script_options
            ).to_dict()
        return cls(
            contract,
            store,
            search_path if search_path is not None else trainable_search_path(contract_dir),
            contract_sha256 or contract.sha256(),
            command,
            configs=dict(configs),
            **options,
        )

    def planner_values(self, seed: int) -> dict[str, int]:
        """What planner sets in a trial's config besides the tuned values: `command.seed_key` (the
        trial's seed) and `command.budget_key` (the exposure); {} for a function trainable, which
        reads trial.seed."""
        keys = self.command or {}
        out = {}
        if keys.get("seed_key"):
            out[keys["seed_key"]] = int(seed)
        if keys.get("budget_key"):
            out[keys["budget_key"]] = int(self.contract.budget.exposure)
        return out

    def raw_for(self, arm: str, seed: int) -> dict | None:
        """The arm's unresolved config with the planner's values set (a sweep's, whose trials share
        a seed): the tuned values go in on top, then it is resolved (apply_params)."""
        raw = self.raw_configs.get(arm)
        values = self.planner_values(seed)
        return raw if raw is None or not values else apply_params(raw, values)  # set, not resolved

    def received(self, arm: str, seed: int, config: dict) -> dict:
        """The config a trial of `arm` at `seed` receives: `config` (the arm's, with any tuned
        values) with the planner's values set, as the trainable gets it
        (docs/command-trainables.md, "What a record holds").

        The values are set on the arm's unresolved config together with what made `config` from the
        arm's (its tuned keys, and every other leaf that differs and is not itself an
        interpolation), then resolved: a key that interpolates the seed (`data.split_seed:
        ${seed}`) follows it, as with tuned values. Anything else coming out different is a planner
        bug, and raised as one.
        """
        values = self.planner_values(seed)
        raw, base = self.raw_configs.get(arm), self.configs.get(arm)
        if not values or raw is None or base is None or raw == base:  # no interpolation to follow
            return apply_params(config, values)
        chosen = {}
        for path, _, after in config_diff(base, config):
            if after is MISSING:
                raise PlannerError(
                    f"the config of a trial of {arm!r} lacks {path!r}, which the arm's composed "
                    "config has: it cannot be rebuilt from the arm's config"
                )
            if not is_interpolation(get_path(raw, path)):
                chosen[path] = after
        if self.contract.tuning is not None:
            chosen.update(
                {
                    key: get_path(config, key)
                    for key in arm_space(self.contract.tuning, arm)
                    if get_path(config, key) is not MISSING
                }
            )
        out = apply_params(base, {**chosen, **values}, raw)
        derived = interpolated_paths(raw)
        wrong = [
            path
            for path, _, _ in config_diff(apply_params(base, chosen, raw), config)
            if path not in derived
        ]
        if wrong:
            raise PlannerError(
                f"planner could not rebuild the config of a trial of {arm!r} from the arm's config "
                f"({', '.join(wrong[:3])} differ): this is a bug in planner; please report it"
            )
        return out

    def spec(self, trial, config: dict, params: dict | None = None) -> TrialSpec:
        """The TrialSpec of `trial` (anything with trial_id, phase, arm, seed, index) on `config`,
        with the planner's values (`planner_values`) set: the config in the spec, and so in the
        record, is the one the trainable receives."""
        c = self.contract
        config = self.received(trial.arm, trial.seed, config)
        extra: dict[str, Any] = {
            "session": self.session,
            "max_trial_memory_bytes": c.budget.max_trial_memory_bytes,
            "data": c.data.model_dump(),
        }  # the worker checks the splits against it
        if self.command is not None:
            extra["command"] = self.command
        elif self.reads_base is not None:
            extra["reads_base"] = self.reads_base
        if self.storage:  # checkpoints across nodes (planner._trial.storage): this run's own prefix
            where, _, query = self.storage.partition("?")
            run = f"{self.store.root.parent.name}/{self.store.root.name}"
            extra["storage"] = f"{where.rstrip('/')}/{run}" + (f"?{query}" if query else "")
        if self.remote:  # the ledger, the kept record and the output log go to the driver's node
            extra["keeper"] = keeper_name(self.session)
        return TrialSpec(
            trial_id=trial.trial_id,
            phase=trial.phase,
            arm=trial.arm,
            seed=trial.seed,
            index=trial.index,
            params=dict(params or {}),
            config=config,
            budget=c.budget.exposure,
            dir=self.store.trial_dir(trial.trial_id),
            trainable=c.trainable or c.command_line,
            metric=c.metric.name,
            heldout=c.metric.heldout,
            retries=c.failures.retries,
            contract_sha256=self.contract_sha256,
            max_trial_time_s=c.budget.max_trial_time_s,
            unit=c.budget.unit,
            path=() if self.remote else tuple(self.search_path),
            cwd=None if self.remote else os.getcwd(),
            extra=extra,
        )

    # the hooks: the run folder first, then the listener
    def _started(self, spec: TrialSpec) -> None:
        self.store.event(
            "trial_started",
            sync=False,
            trial_id=spec.trial_id,
            arm=spec.arm,
            phase=spec.phase,
            seed=spec.seed,
            params=spec.params,
        )
        if spec.phase == "tune":
            self.started_params.setdefault(spec.trial_id, dict(spec.params))
        if self.listener is not None:
            self.listener.started(spec)

    def _ended(self, record: dict, *, heard: bool = True) -> None:
        """A trial's record: checked across trials, written, kept; the listener hears of it when
        `heard`."""
        self.started_params.pop(record["trial_id"], None)
        disk = failed_for_the_disk(record)
        if disk is not None:  # the machine's failure, not the trial's result: it runs again
            raise RunError(
                f"trial {record['trial_id']} failed on a full or failing disk ({disk}); that is "
                f"not its result, so it is not recorded: free space (or mend the disk), then "
                f"resume with --resume {self.store.root}, which runs it again"
            )
        self._check_data(record)
        self.store.record_trial(record)
        self.records[record["trial_id"]] = record
        self.store.event(
            "trial_ended",
            sync=False,
            trial_id=record["trial_id"],
            status=record["status"],
            exposure=record["exposure"],
        )
        if self.listener is not None and heard:
            self.listener.ended(record)
        self.slim(record)

    def slim(self, record: dict) -> None:
        """A tuning trial's record, once written whole and heard by the listener, down to what the
        driver reads of it again (planner._store.facts.kept_of_tuning: the selection metric's last
        reports and the summary the facts read), in place: the one object Tune's state, fail fast
        and `records` hold. The confirmation's records stay whole (the decision, the looks and the
        seeds check read their reports)."""
        if record.get("phase") != "tune":
            return
        if self._frozen is None:
            self._frozen = self.contract.frozen()
        selection = self.contract.tuning.selection if self.contract.tuning is not None else None
        metric = self.contract.metric.name
        # the record as the writer built it: a StoredTrial's keys
        kept = kept_of_tuning(
            cast(TrialRecord, record), self._frozen, metric, selection.k if selection else None
        )
        record["metric_curve"] = metric_curve(
            record, metric
        )  # the tuned-values check compares whole curves
        record["reports"], record["summary"] = kept["reports"], kept["summary"]

    def _check_data(self, record: dict) -> None:
        """The data checks across trials (docs/data.md), added to the record before it is written;
        each data violation of the record is also a `data_violation` event (the listener shows it
        when the trial ends)."""
        if record.get("splits"):
            earlier = [r for r in self.records.values() if r["trial_id"] != record["trial_id"]]
            record["violations"] = list(record.get("violations") or []) + cross_trial_violations(
                record,
                earlier,
                self.contract.data.model_dump(),
                baseline=self.contract.baseline.name,
            )
        for v in data_violations(record):
            self.store.event(
                "data_violation",
                sync=False,
                trial_id=record["trial_id"],
                arm=record.get("arm"),
                phase=record.get("phase"),
                seed=record.get("seed"),
                violation=v,
            )

    def recover(self, record: dict, session: Any) -> None:
        """On --resume, before anything runs: the record a trial's worker kept as the trial ended
        while the earlier driver (`session`) stopped, before that driver wrote it; written now as
        the trial's, with an event that says so. Kept like the records read back from trials.jsonl
        (the listener is not told)."""
        self.store.event(
            "trial_recovered",
            sync=False,
            trial_id=record["trial_id"],
            phase=record.get("phase"),
            status=record.get("status"),
            session=session,
        )
        self._ended(record, heard=False)

    def _cancelled(self, spec: TrialSpec, why: str) -> None:
        self.store.event("trial_cancelled", sync=False, trial_id=spec.trial_id, reason=why)
        if self.listener is not None:
            self.listener.cancelled(spec, why)

    def _kept(self, spec: TrialSpec, record: dict, why: str) -> None:
        """Before the record is written: its worker died after the trial ended, and the record is
        the one the worker kept (nothing is hidden: the event says so, with Ray's word for the
        death)."""
        self.store.event(
            "worker_died_after_trial_ended",
            sync=False,
            trial_id=spec.trial_id,
            phase=spec.phase,
            status=record.get("status"),
            attempts=record.get("attempts"),
            reason=why,
        )
        if self.listener is not None and hasattr(self.listener, "kept"):
            self.listener.kept(spec, why)

    def hooks(self) -> Hooks:
        listener = self.listener
        return Hooks(
            self._started,
            self._ended,
            self._cancelled,
            should_stop=getattr(listener, "should_stop", lambda: None),
            trial_reported=getattr(listener, "trial_reported", lambda *report: None),
            trial_kept=self._kept,
            node_refused=getattr(listener, "node_refused", lambda node_id, problem: None),
        )

    def guard_nodes(self) -> NodeGuard | None:
        """On a cluster, for a function trainable: the run's NodeGuard, once every node's check has
        answered (or FIRST_CHECK_S passed: a node still checked stays held). None elsewhere: an
        embedded Ray is the driver's own machine, whose Python imported the trainable already. A
        run whose every node is refused stops here (RunError), before any trial."""
        if not self.remote or self.command is not None or not self.contract.trainable:
            return None
        if self.nodes is None:
            need = resources_for(self.contract.budget.resources)
            self.nodes = NodeGuard(self.contract.trainable, (), need, self.hooks().node_refused)
            self.nodes.look(wait_s=FIRST_CHECK_S)
            if (why := self.nodes.none_can_run()) is not None:
                raise RunError(why)
        return self.nodes

    def release_nodes(self) -> None:
        """The run's end: the refused nodes held by guard_nodes are let go."""
        if self.nodes is not None:
            self.nodes.release()

    def run_fixed(self, specs: list[TrialSpec], remaining_s: float | None = None) -> Outcome:
        """Run fixed-config trials as Ray tasks within `remaining_s` seconds (None: no limit); the
        Outcome."""
        return run_fixed(
            specs,
            resources=self.contract.budget.resources,
            hooks=self.hooks(),
            max_trial_time_s=self.contract.budget.max_trial_time_s,
            deadline=None if remaining_s is None else time.monotonic() + remaining_s,
            guard=self.nodes,
        )
