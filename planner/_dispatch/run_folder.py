"""The run folder of `plan run`: made new (the contract, configs, plan and identity frozen in it)
or opened on --resume (refused when the configs, the trainable's code or the storage changed; torn
lines healed, the trials cut short found), and the `latest` pointer at it."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from planner._contract.paths import config_diff
from planner._core.errors import RunError, UsageError, disk_failed
from planner._core.redact import Redactor
from planner._core.text import shown_path, terminal_safe, yaml_value
from planner._core.version import VERSION
from planner._dispatch.runner import Runner
from planner._lineage import record as lineage_record
from planner._lineage.resolve import ProjectLineage
from planner._plan.trials import Plan
from planner._store.files import refuse_in_place
from planner._store.identity import files_read_refusal, run_identity, trainable_search_path
from planner._store.live import write_latest
from planner._store.read import RunFolder, read_yaml
from planner._store.resume import REWRITTEN, heal_files, resumable_run_dir, unfinished
from planner._store.writer import RunStore


def announce(root: Path, stream) -> None:
    """Point runs/<name>/latest at this run and print its folder, before Ray starts: a second
    terminal can follow it at once. A `latest` that cannot be written (a folder there) is a note,
    not a stop; a disk that cannot take it (full, read-only) cannot take the run either, and stops
    it with the disk's one sentence."""
    shown = shown_path(root)
    try:
        write_latest(root.parent.parent, root.parent.name, root.name)
        follow = shown_path(root.parent / "latest")
    except (OSError, RunError) as error:
        if disk_failed(error):
            raise
        note = f"note: {shown_path(root.parent / 'latest')} not written: {error}"
        print(terminal_safe(note), file=sys.stderr)
        follow = shown
    print(
        terminal_safe(
            f"run folder: {shown} (follow it: plan status {shlex.quote(follow)} --watch)"
        ),
        file=stream,
        flush=True,
    )


def open_store(
    contract, configs: dict[str, dict], *, runs_dir, resume, contract_dir: Path
) -> tuple[RunStore, dict[str, Any] | None]:
    """The run folder: a new one, or the one --resume names (refused when today's configs compose
    differently or the trainable's source changed), and on --resume today's code identity, which it
    was checked against."""
    redactor = Redactor.for_run(contract.frozen(), *configs.values())
    if resume is None:
        store = RunStore.create(runs_dir, contract.name)
        store.redactor = redactor
        return store, None
    store = RunStore.open(resumable_run_dir(resume, contract))
    store.redactor = redactor
    _check_logged_configs(store.root, configs)  # configs are recorded exactly (never scrubbed)
    return store, _check_trainable_unchanged(store.root, contract, contract_dir)


def _check_trainable_unchanged(run_dir: Path, contract, contract_dir: Path) -> dict[str, Any]:
    """A resumed run runs the code it logged; refuse when the trainable's source, or a local module
    it imports, changed since (a new run). Today's code identity, as it was compared."""
    logged = (RunFolder(run_dir).identity() or {}).get("code", {})
    was = logged.get("trainable_source_sha256") if isinstance(logged, dict) else None
    now_code = run_identity(contract, contract_dir, trainable_search_path(contract_dir))["code"]
    now = now_code.get("trainable_source_sha256")
    if was != now:
        where = now_code.get("trainable_file") or now_code.get("trainable")
        then_text, now_text = (str(h)[:12] if h else "none recorded" for h in (was, now))
        raise RunError(
            f"the trainable's source {where} changed since {shown_path(run_dir)} started (sha256 "
            f"{then_text} then, {now_text} now): changed code is a new run; start it without "
            f"--resume"
        )
    then_local = logged.get("local_sources") if isinstance(logged, dict) else None
    if isinstance(
        then_local, dict
    ):  # a run folder from before local modules were recorded has none to compare
        now_local = now_code.get("local_sources") or {}
        changed = sorted(
            name
            for name in set(then_local) | set(now_local)
            if then_local.get(name) != now_local.get(name)
        )
        if changed:
            shown = ", ".join(changed[:3]) + (
                f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            )
            raise RunError(
                f"a local module the trainable imports changed since {shown_path(run_dir)} started "
                f"({shown}): the trials before and after would have run different code as one "
                f"recipe; "
                "changed code is a new run, start it without --resume"
            )
    # after the code, which says it in its own words: a config file, a configurator, a data file
    refusal = files_read_refusal(run_dir, contract.command_dir(contract_dir), shown_path(run_dir))
    if refusal is not None:
        raise RunError(refusal)
    return now_code


def _check_logged_configs(run_dir: Path, configs: dict[str, dict]) -> None:
    """A resumed run uses the configs it logged; refuse when today's config files compose
    differently."""
    for arm, config in configs.items():
        path = run_dir / "configs" / f"{arm}.yaml"
        logged = read_yaml(path, root=run_dir)
        if logged is None:
            raise RunError(f"{path} is missing; cannot resume this run")
        diff = config_diff(logged, config)
        if diff:
            key, was, now = diff[0]
            raise RunError(
                f"arm {arm!r} composes differently from the run's {path.name} ({key}: "
                f"{yaml_value(was)} "
                f"then, {yaml_value(now)} now): the config files changed, which makes a new run; "
                f"start it "
                "without --resume"
            )


def create_folder(
    store: RunStore,
    contract,
    contract_path,
    contract_dir: Path,
    configs: dict[str, dict],
    plan: Plan,
    raw_configs: dict[str, dict],
    lineage: ProjectLineage,
) -> None:
    """Freeze the contract, the configs, the plan and the identity in the new (locked) run
    folder."""
    store.write_frozen(
        contract, str(contract_path), configs, plan.as_dict(), VERSION, raw_configs=raw_configs
    )
    store.write_identity(run_identity(contract, contract_dir, trainable_search_path(contract_dir)))
    store.event("run_started", run_id=store.run_id, planned=plan.planned_count, pid=os.getpid())
    # the project ledger (docs/lineage.md): refused before any trial when it cannot be written
    lineage_record.run_started(
        store.root, contract, configs, lineage.resolved.source if lineage.resolved else None
    )


def resume_folder(
    store: RunStore,
    took_over: dict | None,
    contract,
    configs: dict[str, dict],
    now_code: dict[str, Any] | None,
    *,
    storage: str | None = None,
) -> float:
    """Heal the (locked) run folder and log the resume; the wall time the run had used before.
    `now_code`: today's code identity, which `_check_trainable_unchanged` compared with the logged
    one; `storage`: the trials' storage of this session (refused when it is not the run's)."""
    refuse_in_place(
        store.root, REWRITTEN
    )  # a folder where a file is replaced: refused before anything runs
    cut = heal_files(store.root)
    _check_same_storage(store, storage)
    state = read_state(store.root)
    previous_wall = float(state.get("budget", {}).get("wall_time_s", 0.0))
    logged_code = (RunFolder(store.root).identity() or {}).get("code", {})
    logged_code = logged_code if isinstance(logged_code, dict) else {}
    now_code = now_code or {}
    changed = logged_code.get("trainable_source_sha256") != now_code.get("trainable_source_sha256")
    store.event(
        "run_resumed",
        pid=os.getpid(),
        previous_state=state.get("state"),
        trainable_source_sha256=now_code.get("trainable_source_sha256"),
        trainable_changed=changed,
    )
    if took_over is not None:
        store.event(
            "stale_lock_taken_over",
            pid=took_over.get("pid"),
            host=took_over.get("host"),
            started=took_over.get("started"),
            reason=took_over.get("reason"),
        )
    for name, size in cut.items():
        store.event("torn_record_dropped", file=name, bytes=size)
    if storage is not None:
        store.event("storage_chosen", storage=storage)
    lineage_record.run_started(store.root, contract, configs, None, resumed=True)
    return previous_wall


def read_state(run_dir: str | os.PathLike) -> dict[str, Any]:
    return RunFolder(Path(run_dir)).state() or {}


def run_storage(run_dir: Path) -> str | None:
    """The trials' storage the run's last session used (its last `storage_chosen` event), or None:
    where its trials' checkpoints are."""
    chosen = [e for e in RunFolder(run_dir).events().records if e["event"] == "storage_chosen"]
    return chosen[-1].get("storage") if chosen else None


def _check_same_storage(store: RunStore, storage: str | None) -> None:
    """A --resume keeps the storage its run used: another one (or none) would leave the checkpoints
    of the trials cut short behind, so it is refused (UsageError, exit 2). A run that had none may
    take one: nothing was kept in a storage that could be lost. The run folder holds the URI as its
    redactor wrote it (a part that is the value of a secret variable cut out)."""
    before = run_storage(store.root)
    if before is None or storage is not None and before in (storage, store.redactor_said(storage)):
        return
    now = f"--storage {storage}" if storage is not None else "no storage"
    raise UsageError(
        f"this run keeps its trials' files in the storage {before}; resume it with the same "
        f"storage (--storage {before}, or the contract's `storage:`): with {now} the checkpoints "
        "of the trials cut short would not be found"
    )


def rerun_cut_short(store: RunStore, plan: Plan, runner: Runner) -> dict[str, int]:
    """On --resume: the trials an earlier driver started and never recorded. One that had ended as
    that driver stopped is recorded from the record its worker kept; the others are logged and run
    again, a tuning trial with the tuned values it first started with. The counts."""
    started = unfinished(store, runner.records)
    recovered = {trial_id for trial_id in started if runner.recover(trial_id)}
    again = [trial_id for trial_id in started if trial_id not in recovered]
    for trial_id in again:
        params = started[trial_id]
        if params is not None:
            runner.dispatch.started_params.setdefault(trial_id, params)
    if again:
        store.event(
            "trials_rerun",
            trial_ids=again,
            reason="started under a driver that stopped before they ended",
        )
    return {**resume_counts(plan, runner.records, again), "recovered": len(recovered)}


def resume_counts(plan: Plan, records: dict[str, dict], again: list[str]) -> dict[str, int]:
    """On --resume: the planned trials whose records are kept, those cut short that run again, the
    rest."""
    planned = {t.trial_id for t in plan.trials}
    kept = len(planned & set(records))
    rerun = len(planned & set(again))
    return {"kept": kept, "rerun": rerun, "not_started": len(planned) - kept - rerun}


def resumed_said(counts: dict[str, int]) -> str:
    def trials(n: int) -> str:
        return f"{n} trial{'s' if n != 1 else ''}"

    recovered = counts.get("recovered", 0)
    kept = (
        f" ({recovered} of them ended as the run stopped: recorded now from their trial folders)"
        if recovered
        else ""
    )
    return (
        f"resumed: {trials(counts['kept'])} kept{kept}, {trials(counts['rerun'])} run again (cut "
        f"short when the "
        f"run stopped), {trials(counts['not_started'])} not started yet"
    )
