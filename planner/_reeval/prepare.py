"""What a reeval will run, read from the run folder alone (no Ray): the frozen contract, the arm's
effective config as its confirmation trials received it (else configs/<arm>.yaml with the selected
tuning params), the seeds, the logged values of the decision metric, the identity differences
between the log and today, and the held-out ledger's cap. Refusals raise before anything runs."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner._contract.model import SEED_MAX, SEED_RANGE, Contract, contract_from
from planner._contract.paths import apply_params, config_diff, interpolated_paths
from planner._core.errors import RunError, UsageError
from planner._core.records import TrialRecord, finite_final_value
from planner._core.status import TrialStatus
from planner._reeval.differences import (
    Difference,
    compare_identity,
    current_identity,
    files_read_differences,
)
from planner._store import facts
from planner._store import read as rf
from planner._store.identity import (
    logged_files_read,
    read_name,
    trainable_imports,
    trainable_search_path,
)

_REEVAL_ID = re.compile(r"^reeval-.+-s-?\d+-(\d+)$")


def heldout_refusal(ledger: dict[str, Any], adding: int) -> str | None:
    """Why running `adding` more held-out evaluations would break budget.max_heldout_evaluations,
    or None."""
    cap, used = ledger.get("cap"), int(ledger.get("evaluations") or 0)
    if not ledger.get("metric") or cap is None or used + adding <= cap:
        return None
    left = max(cap - used, 0)
    what = (
        f"re-evaluate at most {left} seed(s), or start a new run with fresh held-out data"
        if left
        else "the cap is spent: start a new run with fresh held-out data"
    )
    return (
        f"the held-out metric {ledger['metric']} has been evaluated {used} time(s) in this run "
        f"(confirm {ledger.get('confirm', 0)}, reeval {ledger.get('reeval', 0)}); {adding} more "
        f"would make "
        f"{used + adding}, over budget.max_heldout_evaluations = {cap}. Every look at held-out "
        f"data spends "
        f"some of its value: {what}"
    )


def next_reeval_number(reevals: list[dict], records: Sequence[Mapping[str, Any]]) -> int:
    """1 + the highest reeval number logged in reevals.jsonl or in a reeval trial id."""
    seen = [int(r["reeval"]) for r in reevals if isinstance(r.get("reeval"), int)]
    for record in records:
        match = (
            _REEVAL_ID.match(str(record.get("trial_id", "")))
            if record.get("phase") == "reeval"
            else None
        )
        if match:
            seen.append(int(match.group(1)))
    return 1 + max(seen, default=0)


def reeval_trial_id(arm: str, seed: int, n: int) -> str:
    return f"reeval-{arm}-s{seed}-{n}"


@dataclass
class ReevalPlan:
    """Everything `run_reeval` needs, read from the run folder; nothing has run yet."""

    run_dir: Path
    run_id: str
    contract: Any  # planner._contract.model.Contract, from the frozen contract.yaml
    contract_sha256: str
    contract_dir: Path
    search_path: list[str]
    arm: str
    seeds: list[int]
    new_seeds: list[int]
    tolerance: float
    metric: str  # the decision metric
    config: dict[str, Any]
    params: dict[str, Any]
    config_source: str
    logged: dict[int, TrialRecord]  # seed -> the logged confirmation record of the arm
    arm_logged: dict[
        int, float
    ]  # seed -> logged decision-metric value of the arm (every logged seed)
    baseline_logged: dict[int, float]  # seed -> logged decision-metric value of the baseline
    logged_effect: dict | None  # the arm's row of decisions.json
    reeval_number: int
    identity: dict[str, Any]  # today's
    differences: list[Difference]
    ledger: dict[str, Any]
    arm_configs: dict[str, dict] = field(
        default_factory=dict
    )  # configs/<arm>.yaml (a command trainable needs them)
    notes: list[str] = field(default_factory=list)
    files_checked: int = 0  # the logged files the trials read, each compared with today's

    def trial_id(self, seed: int) -> str:
        return reeval_trial_id(self.arm, seed, self.reeval_number)


def prepare(
    run_dir: str | os.PathLike, arm: str, *, seeds: list[int] | None = None, tolerance: float = 0.0
) -> ReevalPlan:
    """Read the run folder and plan the reeval; refuse (UsageError / RunError) before anything
    runs."""
    if not isinstance(tolerance, int | float) or not math.isfinite(tolerance) or tolerance < 0:
        raise UsageError(f"--tolerance must be a finite number >= 0, got {tolerance}")
    folder = rf.open_run(run_dir)
    run_dir = folder.path.resolve()
    contract = _frozen_contract(folder)
    arms = [a.name for a in contract.all_arms]
    if arm not in arms:
        listed = ", ".join(f"{a} (baseline)" if a == contract.baseline.name else a for a in arms)
        raise UsageError(f"{arm!r} is not an arm of this run; its arms are: {listed}")
    if seeds is not None:
        _check_seeds(seeds)
    info = folder.run_info()
    records = folder.trials().records
    metric = contract.metric.decision_metric
    logged: dict[Any, TrialRecord] = {
        r["seed"]: r
        for r in records
        if r.get("phase") == "confirm" and r.get("arm") == arm and isinstance(r.get("seed"), int)
    }
    order = {s: i for i, s in enumerate(contract.seeds)}
    logged = dict(sorted(logged.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    if seeds is None:
        if not logged:
            raise UsageError(
                f"arm {arm!r} has no logged confirmation trials to reproduce; give --seeds to run "
                "its selected config on seeds of your choice"
            )
        seeds = list(logged)
    notes: list[str] = []
    config, params, source = _effective_config(folder, contract, arm, logged, notes)

    contract_path = info.get("contract_path")
    contract_dir = Path(contract_path).parent if contract_path else run_dir
    if not contract_dir.is_dir():
        notes.append(
            f"the run's contract folder {contract_dir} is gone: the trainable is imported from the "
            "current folder and planner's own"
        )
    search_path = trainable_search_path(contract_dir)
    tuning_seeds = set(contract.tuning.seeds) if contract.tuning else set()
    reused = sorted(s for s in seeds if s in tuning_seeds)
    if reused:
        notes.append(
            f"seeds {', '.join(map(str, reused))} were tuning seeds: the config was selected on "
            f"them, "
            "so their estimate is optimistic"
        )
    logged_read = logged_files_read(run_dir)
    identity, differences = _identity_today(
        folder, contract, contract_dir, search_path, info, logged_read
    )
    ledger = facts.heldout_ledger(folder.trials(slim=folder.contract()).records, folder.contract())
    refusal = heldout_refusal(ledger, len(seeds))
    if refusal:
        raise UsageError(refusal)
    arm_logged = _logged_values(records, arm, metric)
    baseline_logged = _logged_values(records, contract.baseline.name, metric)
    logged_effect = next(
        (d for d in (folder.decisions() or {}).get("decisions") or [] if d.get("arm") == arm), None
    )
    return ReevalPlan(
        run_dir=run_dir,
        run_id=str(info.get("run_id")),
        contract=contract,
        contract_sha256=str(info.get("contract_sha256") or contract.sha256()),
        contract_dir=contract_dir,
        search_path=search_path,
        arm=arm,
        seeds=list(seeds),
        new_seeds=[s for s in seeds if s not in logged],
        tolerance=float(tolerance),
        metric=metric,
        config=config,
        params=params,
        config_source=source,
        logged={s: r for s, r in logged.items() if s in seeds},
        arm_logged=arm_logged,
        baseline_logged=baseline_logged,
        logged_effect=logged_effect,
        reeval_number=next_reeval_number(folder.reevals().records, records),
        identity=identity,
        differences=differences,
        ledger=ledger,
        arm_configs=folder.configs(),
        notes=notes,
        files_checked=len(logged_read),
    )


def _check_seeds(seeds: list[int]) -> None:
    """Refuse --seeds that list a seed twice or one outside the contract's seed range."""
    duplicates = sorted({s for s in seeds if seeds.count(s) > 1})
    if duplicates:
        raise UsageError(
            f"--seeds lists {', '.join(map(str, duplicates))} more than once: give each seed once"
        )
    outside = [s for s in seeds if not 0 <= s <= SEED_MAX]
    if outside:
        raise UsageError(f"--seeds {outside[0]} is outside {SEED_RANGE}")


def _identity_today(
    folder: rf.RunFolder,
    contract: Contract,
    contract_dir: Path,
    search_path: list[str],
    info: Mapping[str, Any],
    logged_read: dict[str, Any],
) -> tuple[dict[str, Any], list[Difference]]:
    """Today's identity of the run's trainable, and how it differs from the logged one (the
    contract's hash first, when that changed); `logged_read`: the files the trials read, as
    logged (`logged_files_read`)."""
    run_dir = folder.path.resolve()
    used_today, local_today, _ = trainable_imports(contract, contract_dir, search_path)
    used = set((folder.identity() or {}).get("packages") or {}) | set(used_today)
    identity = current_identity(
        contract.trainable or f"command: {contract.command_line}",
        search_path,
        list(contract.data.fingerprint),
        contract_dir,
        module=contract.trainable is not None,
        command_dir=contract.command_dir(contract_dir),
        package_names=sorted(used),
    )
    # today's local modules, computed as the run computed them (a command's too: without them every
    # logged module read as gone)
    identity["code"]["local_sources"] = local_today
    differences = compare_identity(folder.identity(), identity)
    named = {
        d.what.removeprefix("code.local_sources.")
        for d in differences
        if d.what.startswith("code.local_sources.")
    }
    trainable_file = identity["code"].get("trainable_file")
    if trainable_file and any(d.what == "code.trainable_source_sha256" for d in differences):
        named.add(read_name(trainable_file, contract.command_dir(contract_dir)))
    differences += [  # a file the code comparison named already is named once
        d
        for d in files_read_differences(run_dir, contract.command_dir(contract_dir), logged_read)
        if d.what.removeprefix("files_read.") not in named
    ]
    if info.get("contract_sha256") and info["contract_sha256"] != contract.sha256():
        differences.insert(
            0, Difference("contract_sha256", info["contract_sha256"], contract.sha256())
        )
    return identity, differences


def _logged_values(records: Sequence[Mapping[str, Any]], arm: str, metric: str) -> dict[int, float]:
    """seed -> the final decision-metric value of the arm's completed confirmation trials."""
    return {
        r["seed"]: v
        for r in records
        if r.get("phase") == "confirm"
        and r.get("arm") == arm
        and r.get("status") == TrialStatus.COMPLETED
        and isinstance(r.get("seed"), int)
        for v in [finite_final_value(r, metric)]
        if v is not None
    }


def _frozen_contract(folder):
    data = folder.contract()
    if not data:
        raise RunError(f"{folder.path} has no frozen contract.yaml: nothing to re-run")
    try:
        return contract_from(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunError(
            f"the frozen contract in {folder.file('contract.yaml')} does not load with this "
            f"planner "
            f"version ({where}: {first['msg']}); re-evaluate it with the planner version that ran "
            f"it"
        ) from None


def _same_but_seed(contract, raw: dict | None):
    """Whether two configs of the arm are one config run on two seeds: equal but for
    `command.seed_key`, which each record holds at its own seed, and the keys that interpolate
    something (`data.split_seed: ${seed}`)."""
    spec = contract.command_spec
    ignored = {spec.seed_key} if spec is not None and spec.seed_key else set()
    if ignored:
        ignored |= interpolated_paths(raw or {})

    def same(a: dict | None, b: dict | None) -> bool:
        if not (ignored and isinstance(a, dict) and isinstance(b, dict)):
            return a == b
        return all(path in ignored for path, _, _ in config_diff(a, b))

    return same


def _effective_config(
    folder, contract, arm: str, logged: Mapping[int, Mapping[str, Any]], notes: list[str]
):
    """(config, params, source): what the arm's confirmation trials received, from the log alone."""
    selection = (folder.selection() or {}).get("arms", {}).get(arm) or {}
    stored = folder.configs().get(arm)
    from_files = None
    if stored is not None:
        raw = folder.unresolved_configs().get(
            arm
        )  # interpolations: the params go in before resolving
        from_files = (
            apply_params(stored, selection.get("params") or {}, raw) if contract.tuning else stored
        )
    if logged:
        configs = [r.get("config") for r in logged.values()]
        same = _same_but_seed(contract, folder.unresolved_configs().get(arm))
        if any(not same(c, configs[0]) for c in configs[1:]):
            raise RunError(
                f"the logged confirmation trials of {arm!r} received different configs; the log "
                f"does "
                "not say which one to re-run"
            )
        if from_files is not None and not same(from_files, configs[0]):
            notes.append(
                f"configs/{arm}.yaml with the selected params differs from what the confirmation "
                f"trials "
                "received; re-running what they received"
            )
        return (
            configs[0],
            dict(next(iter(logged.values())).get("params") or {}),
            "the logged confirmation trials",
        )
    if stored is None:
        raise RunError(
            f"{folder.path} has neither confirmation trials of {arm!r} nor configs/{arm}.yaml: "
            "its effective config is not logged"
        )
    if contract.tuning is not None and not selection.get("trial_id"):
        why = selection.get("reason") or "selection.json does not list it"
        raise UsageError(f"arm {arm!r} has no selected config to re-run ({why})")
    source = f"configs/{arm}.yaml" + (
        " with the selected params of selection.json" if contract.tuning else ""
    )
    return from_files, {}, source
