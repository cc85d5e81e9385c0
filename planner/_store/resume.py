"""Resuming a run folder after its driver stopped, however it stopped.

`plan run CONTRACT --resume RUN_DIR`:

1. RUN_DIR must be a run folder (it holds run.json whose run_id is the folder's
   name) of THIS contract: the same name, and the same contract hash; a changed
   recipe is a new run.
2. The lock (planner._store.lock) is taken; a stale lock left by a dead driver on
   this host is taken over, and the takeover is logged.
3. The append-only files are healed: a torn last line (the driver died in the
   middle of writing it) is cut off and logged; that trial is simply not
   finished and runs again.
4. What ended is kept (trials.jsonl: the first record of an id wins); every
   planned trial without a record runs, from its start or from the checkpoint
   the trainable left in trial.dir (`trial.resumed` tells it to look), with the
   tuned values it first started with. A trial that had ended as the driver
   stopped, before its record was written, is recorded from the record its
   worker kept in trial.dir instead of running again.
   Tuning continues with each sweep's study rebuilt from its finished trials,
   so each sweep still ends with exactly `trials_per_arm` trials.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from planner._core.errors import TRIAL_RERUN, RunError
from planner._core.records import error_of, last_error
from planner._store.jsonl import heal
from planner._store.read import RunFolder, read_json

# the files of a run folder a resume replaces whole (write_atomic): a folder planted in place of
# one is refused up front (files.refuse_in_place), never found at the end, when the decision could
# no longer be written
REWRITTEN = ("state.json", "selection.json", "decisions.json", "identity.json", "lineage.json")


def resumable_run_dir(resume: str | os.PathLike, contract) -> Path:
    """The run folder to resume, or a RunError saying why RUN_DIR is not one this contract may
    resume."""
    path = Path(resume)
    if not path.exists():
        raise RunError(f"--resume {resume}: no such folder")
    if path.is_symlink() or not path.is_dir():
        raise RunError(
            f"--resume {resume}: not a run folder (a run folder is a plain directory, not a link "
            f"or a file)"
        )
    root = path.resolve()
    info_path = root / "run.json"
    if info_path.is_symlink() or not info_path.is_file():
        raise RunError(
            f"--resume {resume}: not a run folder (no run.json); give a folder under runs/<name>/"
        )

    info = read_json(info_path, required=True, root=root)
    if not isinstance(info, dict) or info.get("run_id") != root.name:
        raise RunError(
            f"--resume {resume}: not a run folder (its run.json names run {info.get('run_id')!r}, "
            f"the folder is {root.name!r})"
            if isinstance(info, dict)
            else f"--resume {resume}: its run.json is not a run's record"
        )
    if info.get("name") != contract.name:
        raise RunError(
            f"--resume {resume}: that folder holds a run of {info.get('name')!r}, not of "
            f"{contract.name!r}; resume it with its own contract"
        )
    if root.parent.name != contract.name:
        # the runs folder (its ledger, the next run's lineage) is two levels up: a moved run folder
        # would write them wherever it was moved to
        raise RunError(
            f"--resume {resume}: a run folder of {contract.name!r} lives at "
            f"RUNS/{contract.name}/{root.name}, and this one is in a folder named "
            f"{root.parent.name!r}; move it back under a folder named {contract.name!r} inside "
            f"your runs folder (runs/{contract.name}/{root.name}), then resume it there"
        )
    logged = info.get("contract_sha256")
    if logged != contract.sha256():
        raise RunError(
            f"{resume} was run with another contract (hash {str(logged)[:12]}, this one "
            f"{contract.sha256()[:12]}): a changed recipe is a new run; start it without --resume"
        )
    return root


def heal_files(root: Path) -> dict[str, int]:
    """Cut torn last lines off the run's JSON-lines files; {file name: bytes cut}."""
    cut = {}
    for name in ("trials.jsonl", "events.jsonl"):
        torn = heal(root / name)
        if torn:
            cut[name] = len(torn)
    return cut


def unfinished(store, records: dict[str, dict]) -> dict[str, dict | None]:
    """Trials that started under an earlier driver and have no record (they run again, or their
    worker's kept record is recorded), in the order they first started, each with the tuned values
    it first started with (its `trial_started` event's `params`; None when the event has none: a
    folder from before they were logged, or one that was altered)."""
    events = RunFolder(store.root).events().records
    out: dict[str, dict | None] = {}
    for event in events:
        trial_id = event.get("trial_id")
        if (
            event.get("event") != "trial_started"
            or not trial_id
            or trial_id in records
            or trial_id in out
        ):
            continue
        params = event.get("params")
        out[trial_id] = dict(params) if isinstance(params, dict) else None
    return out


def failed_for_the_disk(record: dict[str, Any]) -> str | None:
    """The error of a trial that failed because a disk was full, over quota or failing (a
    checkpoint written into trial.dir on the run's full disk): its last error's `errno` is one of
    `TRIAL_RERUN`. None for any other trial. Such a failure is the machine's, not the trial's
    result: the driver does not record it, it stops the run, and `--resume` runs the trial again
    once the disk is mended."""
    code = last_error(record).get("errno")
    return error_of(record) if isinstance(code, int) and code in TRIAL_RERUN else None
