"""`plan reeval RUN_DIR --arm NAME`: re-run an arm's selected config exactly as logged.

    run folder -> logged identity and effective config -> dispatch -> compare with the log

`prepare(run_dir, arm, ...)` reads the run folder alone (no Ray): the frozen
contract, the arm's effective config as the confirmation trials received it
(else configs/<arm>.yaml with the selected tuning params), the seeds, the
logged values of the decision metric, the identity differences between the log
and today, and the held-out ledger's cap. `run_reeval(plan)` dispatches the
trials through Ray the way `plan run` confirms (the driver's `Dispatch`: the
same specs, limits, hooks and Ray tasks; phase `reeval`, full exposure, no
early stopping), appends them to trials.jsonl and one record to reevals.jsonl, and
returns the comparison. The rest are pure functions of values; only the CLI
prints.

Exit codes (ReevalResult.exit_code): 0 the logged results reproduce within the
tolerance (or only new seeds ran, and all ran); 1 a logged seed does not
reproduce; 3 trials failed to run. An interrupted reeval (Ctrl-C, SIGTERM) is
logged with verdict `interrupted` and ends as a KeyboardInterrupt (130). Refusals raise: UsageError
(2) for an unknown arm, a bad option or the held-out cap; RunError (3) for a run folder
that cannot be re-evaluated.
"""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner._contract.model import SEED_MAX, SEED_RANGE, Contract
from planner._contract.paths import apply_params, config_diff, interpolated_paths
from planner._core.errors import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    RunError,
    UsageError,
)
from planner._core.records import TrialRecord, finite_final_value
from planner._core.redact import Redactor
from planner._core.status import FAILED, StopReason, TrialStatus
from planner._core.text import number, utc_now
from planner._core.text_tables import text_table
from planner._core.version import VERSION
from planner._data.checks import fingerprint_differences
from planner._dispatch.cluster import resolve_address
from planner._dispatch.session import RunSession, trainable_search_path
from planner._dispatch.specs import Dispatch
from planner._plan.trials import PlannedTrial
from planner._stats.decide import compare
from planner._store import facts
from planner._store import read as rf
from planner._store.identity import (
    changed_files,
    code_identity,
    command_code_identity,
    data_fingerprints,
    describe_fact,
    logged_files_read,
    packages,
    read_name,
)
from planner._store.writer import RunStore

# a reeval trial that did not give a result: it failed, or it never ran (NOT_RUN: a logged seed not
# run again)
DID_NOT_RUN = FAILED | {TrialStatus.NOT_RUN}
CODE_KEYS = ("commit", "dirty", "diff_sha256", "trainable_source_sha256", "trainable_file")
_REEVAL_ID = re.compile(r"^reeval-.+-s-?\d+-(\d+)$")


# ------------------------------------------------------------------ identity


@dataclass(frozen=True)
class Difference:
    """One identity fact that is not today what the log says (None: absent on that side)."""

    what: (
        str  # dotted: code.commit, code.trainable_source_sha256, packages.ray, python, data.<path>
    )
    logged: Any
    current: Any

    def __str__(self) -> str:
        return f"{self.what}: {_short(self.logged)} (logged) -> {_short(self.current)} (today)"


def compare_identity(logged: dict[str, Any] | None, current: dict[str, Any]) -> list[Difference]:
    """What differs between the logged run identity and today's: code, python, packages, data.

    Code: the git commit, the dirty flag, the hash of the uncommitted diff, the
    digest of the trainable module's source and the file it was found in.
    A fact missing from the log is reported only when today's value is known.
    """
    logged = logged or {}
    out: list[Difference] = []
    logged_code, current_code = logged.get("code") or {}, current.get("code") or {}
    for key in CODE_KEYS:
        if key not in logged_code and key not in current_code:
            continue
        a, b = logged_code.get(key), current_code.get(key)
        if a != b:
            out.append(Difference(f"code.{key}", a, b))
    if logged.get("python") != current.get("python") and current.get("python") is not None:
        out.append(Difference("python", logged.get("python"), current.get("python")))
    a_map, b_map = logged_code.get("local_sources"), current_code.get("local_sources") or {}
    if isinstance(a_map, dict):  # the local modules imported
        for name in sorted(set(a_map) | set(b_map)):
            if a_map.get(name) != b_map.get(name):
                out.append(
                    Difference(f"code.local_sources.{name}", a_map.get(name), b_map.get(name))
                )
    for section in ("packages", "data"):
        a_map, b_map = logged.get(section) or {}, current.get(section) or {}
        for name in sorted(set(a_map) | set(b_map)):
            if a_map.get(name) != b_map.get(name):
                out.append(Difference(f"{section}.{name}", a_map.get(name), b_map.get(name)))
    return out


def current_identity(
    trainable: str,
    search_path: list[str],
    data_paths: list[str],
    contract_dir: Path,
    module: bool = True,
    *,
    command_dir: Path | None = None,
    package_names: Iterable[str] = (),
) -> dict:
    """Today's code, python, packages and data fingerprints, as identity.json records them.

    A `command:` trainable (module=False, trainable "command: <line>") is identified by its command
    line and the script it names in the folder it runs in (`command_dir`: `Contract.command_dir`),
    when it names one. `package_names`: the packages whose versions are compared besides planner's
    own (the logged run's and the ones the trainable uses today), so a changed, added or removed
    lightning is named.
    """
    code = (
        code_identity(trainable, search_path)
        if module
        else command_code_identity(trainable.removeprefix("command: "), command_dir or contract_dir)
    )
    return {
        "code": code,
        "python": platform.python_version(),
        "packages": packages(package_names),
        "data": data_fingerprints(data_paths, contract_dir),
    }


def files_read_differences(run_dir: Path, base: Path) -> list[Difference]:
    """The files the run's trials read (identity.json's `files_read`, the records' `inputs.files`)
    that are not today what was logged, each named once; a file that did not change is never named.
    """
    return [
        Difference(f"files_read.{name}", describe_fact(then), describe_fact(now))
        for name, then, now in changed_files(logged_files_read(run_dir), base)
    ]


def _short(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40,64}", value):
        return value[:12]
    return "<absent>" if value is None else str(value)


# ------------------------------------------------------------------ pure comparison


@dataclass(frozen=True)
class SeedRow:
    """One seed: the logged trial (when there is one) beside the reeval trial."""

    seed: int
    trial_id: str
    logged_status: str | None  # None: a new seed, not logged
    logged: float | None
    new_status: str
    new: float | None
    diff: float | None  # new - logged
    reproduced: bool | None  # None: a new seed, or a trial that failed to run
    data: tuple[
        str, ...
    ] = ()  # splits whose fingerprints differ from the logged trial's (docs/data.md)
    # the logged trial continued from its checkpoint (`resumed`): no exact repeat expected
    continued: bool = False

    @property
    def is_new(self) -> bool:
        return self.logged_status is None


def compare_seed(
    seed: int,
    trial_id: str,
    logged: Mapping[str, Any] | None,
    new: dict | None,
    metric: str,
    tolerance: float,
) -> SeedRow:
    """Logged vs new at one seed: reproduced when both have the same status and |new - logged| <=
    tolerance."""
    new_status = new.get("status", TrialStatus.FAILED) if new else TrialStatus.NOT_RUN
    new_value = finite_final_value(new, metric) if new else None
    if logged is None:
        return SeedRow(seed, trial_id, None, None, new_status, new_value, None, None)
    logged_status = str(logged.get("status"))
    logged_value = finite_final_value(logged, metric)
    diff = None if logged_value is None or new_value is None else new_value - logged_value
    if new_status in DID_NOT_RUN and logged_status not in DID_NOT_RUN:
        reproduced = None  # it did not run: no evidence either way
    elif new_status != logged_status:
        reproduced = False
    elif logged_value is None and new_value is None:
        reproduced = True  # the same non-result (both diverged, or neither reported the metric)
    else:
        reproduced = diff is not None and abs(diff) <= tolerance
    data: tuple[str, ...] = ()
    if new is not None and (logged.get("splits") or new.get("splits")):
        data = tuple(fingerprint_differences(logged, new))
        if data and new_status not in DID_NOT_RUN:
            reproduced = False  # a re-evaluation on different data is not a reproduction
    continued = bool(logged.get("resumed") or logged.get("resumed_from"))
    return SeedRow(
        seed,
        trial_id,
        logged_status,
        logged_value,
        new_status,
        new_value,
        diff,
        reproduced,
        data,
        continued,
    )


def verdict(rows: list[SeedRow]) -> tuple[str, int]:
    """(verdict, exit code): a logged seed that differs -> not_reproduced (1); else a trial that
    failed to run -> failed (3); else reproduced (0), or new_seeds (0) when no logged seed was
    compared."""
    if any(r.reproduced is False for r in rows):
        return "not_reproduced", EXIT_INVALID
    if any(r.new_status in DID_NOT_RUN for r in rows):
        return "failed", EXIT_INCOMPLETE
    if any(not r.is_new for r in rows):
        return "reproduced", EXIT_OK
    return "new_seeds", EXIT_OK


def estimate(values: list[float]) -> dict[str, Any]:
    """n, mean and sample sd (None where undefined)."""
    n = len(values)
    return {
        "n": n,
        "mean": statistics.fmean(values) if n else None,
        "sd": statistics.stdev(values) if n >= 2 else None,
    }


def compare_new(
    contract, arm: str, new: dict[int, float], baseline_logged: dict[int, float]
) -> dict | None:
    """The new seeds' effect against the logged baseline, by the contract's test; None when not
    meaningful.

    Not meaningful for the baseline itself, or with fewer than 2 values a side.
    The paired test pairs by seed; new seeds the baseline never ran cannot pair,
    so then Welch's test is used and the result says so.
    """
    if arm == contract.baseline.name or len(new) < 2 or len(baseline_logged) < 2:
        return None
    test, note = contract.acceptance.test, ""
    if test == "paired" and len(set(new) & set(baseline_logged)) < 2:
        test, note = (
            "welch",
            "the paired test needs seeds the baseline ran; Welch's test used instead",
        )
    try:
        c = compare(
            list(baseline_logged.values()),
            list(new.values()),
            mode=contract.metric.decision_mode,
            test=test,
            alpha=contract.acceptance.alpha,
            baseline_seeds=list(baseline_logged),
            arm_seeds=list(new),
        )
    except ValueError as error:
        return {"test": test, "note": str(error)}
    return {
        "test": c.test,
        "alpha": c.alpha,
        "effect": c.effect,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "p_value": c.p_value,
        "n_baseline": c.n_baseline,
        "n_arm": c.n_arm,
        "note": note,
    }


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


# ------------------------------------------------------------------ reading the run folder


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
        duplicates = sorted({s for s in seeds if seeds.count(s) > 1})
        if duplicates:
            raise UsageError(
                f"--seeds lists {', '.join(map(str, duplicates))} more than once: give each seed "
                f"once"
            )
        outside = [s for s in seeds if not 0 <= s <= SEED_MAX]
        if outside:
            raise UsageError(f"--seeds {outside[0]} is outside {SEED_RANGE}")
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
    from planner._store.identity import trainable_imports

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
        for d in files_read_differences(run_dir, contract.command_dir(contract_dir))
        if d.what.removeprefix("files_read.") not in named
    ]
    if info.get("contract_sha256") and info["contract_sha256"] != contract.sha256():
        differences.insert(
            0, Difference("contract_sha256", info["contract_sha256"], contract.sha256())
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
    )


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
        return Contract.model_validate(data)
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


# ------------------------------------------------------------------ running (Ray)


@dataclass
class ReevalResult:
    plan: ReevalPlan
    rows: list[SeedRow]
    verdict: str
    exit_code: int
    logged_estimate: dict[str, Any]
    new_estimate: dict[str, Any] | None
    comparison: dict[str, Any] | None
    record: dict[str, Any]


def run_reeval(plan: ReevalPlan, *, address: str | None = None) -> ReevalResult:
    """Run the planned reeval trials through Ray, log them, compare them with the log.

    The RunSession `plan run` uses holds the folder: its lock (as `plan reeval`), SIGTERM stopping
    a reeval like Ctrl-C, and Ray, shut down with the lock released whatever happens.
    """
    c = plan.contract
    store = RunStore.open(plan.run_dir)
    store.redactor = Redactor.for_run(
        c.frozen(), *plan.arm_configs.values()
    )  # what a run scrubs, a reeval scrubs
    started = utc_now()
    with RunSession(store, command="plan reeval") as session:
        session.stop_on_signals()
        _recheck_under_lock(plan)
        # the driver's own way to spec, send and log trials; a command trainable is built from the
        # logged configs, and on a cluster the code ships (no driver paths)
        raw_configs = rf.open_run(
            plan.run_dir
        ).unresolved_configs()  # a key that interpolates the seed follows it
        dispatch = Dispatch.open(
            c,
            plan.contract_dir,
            plan.arm_configs,
            store,
            contract_sha256=plan.contract_sha256,
            raw_configs=raw_configs,
            search_path=plan.search_path,
            remote=resolve_address(address) is not None,
        )
        specs = [
            dispatch.spec(
                PlannedTrial(plan.trial_id(seed), "reeval", plan.arm, seed, 0),
                plan.config,
                params=plan.params,
            )
            for seed in plan.seeds
        ]
        try:
            session.start_ray(
                address,
                plan.search_path,
                plan.run_dir.parent.parent,
                log_dir=plan.run_dir,
                contract=c,
                contract_dir=plan.contract_dir,
                keeper_session=dispatch.session,
            )
        except RunError:
            raise
        except (
            Exception
        ) as error:  # a local Ray that cannot start (an overloaded machine): a sentence
            raise RunError(
                f"cannot start a local Ray for the reeval: {error}; nothing ran"
            ) from None
        store.event(
            "reeval_started",
            reeval=plan.reeval_number,
            arm=plan.arm,
            seeds=plan.seeds,
            tolerance=plan.tolerance,
        )
        outcome = dispatch.run_fixed(specs)
        result = _result(plan, dispatch.records)
        if outcome.stopped == StopReason.INTERRUPTED:
            result.verdict = result.record["verdict"] = "interrupted"
            result.exit_code = result.record["exit_code"] = EXIT_INTERRUPTED
        result.record.update(started=started, ended=utc_now(), planner_version=VERSION)
        store.append("reevals.jsonl", result.record)
        store.event("reeval_ended", reeval=plan.reeval_number, verdict=result.verdict)
        if outcome.stopped == StopReason.INTERRUPTED:
            raise KeyboardInterrupt
        return result
    # not reached: a session swallows an error only when an `on_end` bookkeeping says it handled it,
    # and a reeval gives none
    raise AssertionError("plan reeval's session swallowed an error")


def _recheck_under_lock(plan: ReevalPlan) -> None:
    """Another reeval may have ended between `prepare` and the lock: re-count the ledger and
    renumber."""
    folder = rf.RunFolder(plan.run_dir)
    frozen = folder.contract()
    plan.ledger = facts.heldout_ledger(folder.trials(slim=frozen).records, frozen)
    refusal = heldout_refusal(plan.ledger, len(plan.seeds))
    if refusal:
        raise UsageError(refusal)
    plan.reeval_number = next_reeval_number(
        folder.reevals().records, folder.trials(slim=frozen).records
    )


def _result(plan: ReevalPlan, records: dict[str, dict]) -> ReevalResult:
    """Compare the reeval records with the log (pure)."""
    rows = [
        compare_seed(
            seed,
            plan.trial_id(seed),
            plan.logged.get(seed),
            records.get(plan.trial_id(seed)),
            plan.metric,
            plan.tolerance,
        )
        for seed in plan.seeds
    ]
    name, code = verdict(rows)
    new_values = {r.seed: r.new for r in rows if r.is_new and r.new is not None}
    new_estimate = estimate(list(new_values.values())) if plan.new_seeds else None
    comparison = (
        compare_new(plan.contract, plan.arm, new_values, plan.baseline_logged)
        if plan.new_seeds
        else None
    )
    logged_estimate = estimate(list(plan.arm_logged.values()))
    record = {
        "reeval": plan.reeval_number,
        "arm": plan.arm,
        "seeds": plan.seeds,
        "new_seeds": plan.new_seeds,
        "tolerance": plan.tolerance,
        "metric": plan.metric,
        "config_source": plan.config_source,
        "config": plan.config,
        "trial_ids": [plan.trial_id(s) for s in plan.seeds],
        "rows": [asdict(r) for r in rows],
        "identity_differences": [asdict(d) for d in plan.differences],
        "identity": plan.identity,
        "logged_estimate": logged_estimate,
        "new_estimate": new_estimate,
        "comparison": comparison,
        "verdict": name,
        "exit_code": code,
        "notes": plan.notes,
    }
    return ReevalResult(
        plan, rows, name, code, logged_estimate, new_estimate, comparison, _jsonable(record)
    )


def _jsonable(value: Any) -> Any:
    """Non-finite floats -> None (reevals.jsonl is strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# ------------------------------------------------------------------ formatting (the CLI prints
# these)


def format_plan(plan: ReevalPlan) -> str:
    """What is about to run, and how today's identity differs from the log's."""
    seeds = ", ".join(f"{s}{' (new)' if s in plan.new_seeds else ''}" for s in plan.seeds)
    lines = [
        f"reeval {plan.reeval_number} of arm {plan.arm} in {plan.run_dir}",
        f"  config:  from {plan.config_source}"
        + (f"; params {plan.params}" if plan.params else ""),
        f"  seeds:   {seeds}",
        f"  metric:  {plan.metric} (final value), tolerance {plan.tolerance:g}",
    ]
    ledger = plan.ledger
    if ledger.get("metric"):
        cap = f" of at most {ledger['cap']}" if ledger.get("cap") is not None else ""
        lines.append(
            f"  held-out ledger: {ledger['evaluations']} evaluation(s) of {ledger['metric']}{cap} "
            f"so far; "
            f"this reeval adds {len(plan.seeds)}"
        )
    if plan.differences:
        lines.append(f"identity: {len(plan.differences)} difference(s) from the log:")
        lines += [f"  {d}" for d in plan.differences]
    elif plan.contract.trainable is None and not (plan.identity.get("code") or {}).get(
        "trainable_source_sha256"
    ):
        lines.append(
            "identity: python, packages and data match the log; code: not recorded for a command "
            "that "
            "names no script in the contract's folder (only its command line)"
        )
    else:
        lines.append("identity: code, python, packages and data match the log")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)


def format_table(rows: list[SeedRow]) -> str:
    header = ["seed", "logged", "new", "diff", "result"]
    body = []
    for r in rows:
        if r.is_new:
            result = (
                "new seed" if r.new_status not in DID_NOT_RUN else f"{r.new_status} (did not run)"
            )
        elif r.reproduced is None:
            result = f"{r.new_status} (did not run)"
        else:
            result = "reproduced" if r.reproduced else "DIFFERS"
            if r.new_status != r.logged_status:
                result += f" (status {r.logged_status} -> {r.new_status})"
            if r.data:
                result += f" (different data: {'; '.join(r.data)})"
            if r.continued and not r.reproduced:
                result += " (logged: continued from its checkpoint)"
        logged = (
            "-"
            if r.is_new
            else (number(r.logged, 10) if r.logged is not None else str(r.logged_status))
        )
        new = number(r.new, 10) if r.new is not None else r.new_status
        body.append([str(r.seed), logged, new, number(r.diff, 3, sign=True), result])
    return "\n".join(text_table(body, header=header, right=range(4), indent=0))


def format_result(result: ReevalResult) -> str:
    plan = result.plan
    lines = [format_table(result.rows)]
    if result.new_estimate is not None:
        lines.append(f"logged {plan.metric}: {_estimate(result.logged_estimate)}")
        lines.append(f"new seeds {plan.metric}: {_estimate(result.new_estimate)}")
        c = result.comparison
        if c and "effect" in c:
            lines.append(
                f"new seeds vs the logged baseline ({c['test']}): effect {c['effect']:+.4g}  "
                f"CI [{c['ci_low']:+.4g}, {c['ci_high']:+.4g}]  p={c['p_value']:.3g}  "
                f"n={c['n_arm']} vs {c['n_baseline']}"
                + (f"  ({c['note']})" if c.get("note") else "")
            )
        elif c:
            lines.append(f"new seeds vs the logged baseline: not computed ({c['note']})")
        logged = plan.logged_effect
        if logged and logged.get("effect") is not None:
            lines.append(
                f"logged decision: {logged.get('decision')}  effect {logged['effect']:+.4g}  "
                f"CI [{logged['ci_low']:+.4g}, {logged['ci_high']:+.4g}]"
            )
    compared = [r for r in result.rows if not r.is_new]
    tolerance = "exactly" if plan.tolerance == 0 else f"within {plan.tolerance:g}"
    text = {
        "reproduced": f"reproduced: {len(compared)} of {len(compared)} logged seeds {tolerance}",
        "not_reproduced": f"NOT reproduced: {sum(r.reproduced is False for r in compared)} of "
        f"{len(compared)} "
        f"logged seeds differ (tolerance {plan.tolerance:g})",
        "failed": f"failed: {sum(r.new_status in DID_NOT_RUN for r in result.rows)} trial(s) did "
        f"not run to "
        f"the end (see trials.jsonl)",
        "new_seeds": f"new seeds only: {len(result.rows)} trial(s) ran; nothing logged to compare",
        "interrupted": "interrupted before every trial ended",
    }[result.verdict]
    lines.append(f"verdict: {text}")
    continued = [r for r in compared if r.reproduced is False and r.continued]
    if result.verdict == "not_reproduced" and continued:
        lines.append(
            f"{len(continued)} of the differing logged seeds "
            f"({', '.join(str(r.seed) for r in continued)}) "
            "continued from a checkpoint after an interruption: their later epochs saw another "
            "data "
            "order than one uninterrupted training does, so they are not expected to repeat "
            "exactly; "
            "compare with a tolerance, or on new seeds"
        )
    if result.verdict == "not_reproduced" and plan.differences:
        lines.append(
            "identity differences that may explain it: "
            + ", ".join(d.what for d in plan.differences)
        )
    lines.append(f"logged: reeval {plan.reeval_number} in {plan.run_dir / 'reevals.jsonl'}")
    return "\n".join(lines)


def _estimate(e: dict[str, Any]) -> str:
    if not e.get("n"):
        return "no values"
    sd = f" ± {e['sd']:.4g} (sd)" if e.get("sd") is not None else ""
    return f"mean {e['mean']:.6g}{sd}, n={e['n']}"


def reeval(
    run_dir: str | os.PathLike,
    arm: str,
    *,
    seeds: list[int] | None = None,
    tolerance: float = 0.0,
    address: str | None = None,
) -> ReevalResult:
    """`plan reeval RUN_DIR --arm ARM` from Python: plan (refusing early, before Ray), run, compare.

    `prepare_reeval` alone reads the folder and plans without running anything.
    """
    return run_reeval(prepare(run_dir, arm, seeds=seeds, tolerance=tolerance), address=address)
