"""The run folder (docs/run-folder.md): the one place a run's facts are kept.

Files are append-only JSON lines (flushed and fsync'd per line) or replaced atomically
(planner._store.files.write_atomic: a temporary file, fsync, rename, fsync of the folder). No file
is opened through a link (planner._store.files). Only the driver writes here; trial records come
back from the workers as values, so a run on a cluster lands in the driver's folder too.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from planner._core.errors import RunError
from planner._core.text import utc_now
from planner._store.files import write_atomic
from planner._store.jsonl import append_line, open_for_append
from planner._store.lock import RunLock, acquire
from planner._store.read import read_json
from planner._store.read import read_jsonl as read
from planner._store.schema import check_written

if TYPE_CHECKING:
    from planner._core.redact import Redactor


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def write_json(path: Path, value: Any, root: Path | None = None) -> None:
    write_atomic(
        path,
        json.dumps(value, indent=2, sort_keys=False, allow_nan=False, default=str) + "\n",
        root=root,
    )


def read_jsonl(path: Path) -> list[dict]:
    """Every record of a JSON-lines file of a run, by the one policy
    (planner._store.read.iter_jsonl)."""
    return read(Path(path)).records


class RunStore:
    """One run folder, opened for writing by the driver."""

    _lock: RunLock | None  # set by lock(), cleared by unlock()

    def __init__(self, root: Path):
        self.root = Path(root)
        self._handles: dict[str, Any] = {}
        # scrubs the free text of records, events and state
        self.redactor: Redactor | None = None

    # -- creating -----------------------------------------------------------
    @classmethod
    def create(cls, runs_dir: str | os.PathLike, name: str) -> RunStore:
        base = Path(runs_dir) / name
        base.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            root = base / new_run_id()
            try:
                root.mkdir()
            except FileExistsError:
                continue
            (root / "configs").mkdir()
            (root / "trials").mkdir()
            return cls(root)
        raise RunError(f"could not create a new run folder under {base}")

    @classmethod
    def open(cls, root: str | os.PathLike) -> RunStore:
        root = Path(root)
        if not (root / "run.json").is_file():
            raise RunError(f"{root} is not a run folder (no run.json)")
        return cls(root)

    @property
    def run_id(self) -> str:
        return self.root.name

    # -- the lock -----------------------------------------------------------
    def lock(self, command: str = "plan run"):
        """Take the folder's lock (planner._store.lock), or raise RunLockedError naming who holds
        it (and with which command). Returns the stale lock it took over (with its `reason`), or
        None."""
        self._lock = acquire(self.root, command=command)
        return self._lock.took_over

    def unlock(self) -> None:
        held = getattr(self, "_lock", None)
        if held is not None:
            held.release()
            self._lock = None

    # -- writing ------------------------------------------------------------
    def write_frozen(
        self,
        contract,
        contract_path: str,
        configs: dict[str, dict],
        plan: dict,
        planner_version: str,
        raw_configs: dict[str, dict] | None = None,
    ) -> None:
        """The frozen contract and every arm's config, exactly as the trainable receives them
        (validation keeps credentials out of both: planner._contract.credentials), never
        scrubbed."""
        write_atomic(
            self.root / "contract.yaml",
            yaml.safe_dump(contract.frozen(), sort_keys=False),
            root=self.root,
        )
        write_json(
            self.root / "run.json",
            {
                "run_id": self.run_id,
                "name": contract.name,
                "contract_sha256": contract.sha256(),
                "created": utc_now(),
                "planner_version": planner_version,
                "contract_path": str(Path(contract_path).resolve()),
            },
            self.root,
        )
        for arm, config in configs.items():
            write_atomic(
                self.root / "configs" / f"{arm}.yaml",
                yaml.safe_dump(config, sort_keys=False),
                root=self.root,
            )
        for arm, raw in (
            raw_configs or {}
        ).items():  # with interpolations: tuned values go in before resolving
            if raw != configs.get(arm):
                (self.root / "configs" / "unresolved").mkdir(parents=True, exist_ok=True)
                write_atomic(
                    self.root / "configs" / "unresolved" / f"{arm}.yaml",
                    yaml.safe_dump(raw, sort_keys=False),
                    root=self.root,
                )
        write_json(self.root / "plan.json", plan, self.root)

    def write_identity(self, identity: dict) -> None:
        write_json(self.root / "identity.json", identity, self.root)

    def write_state(
        self,
        state: str,
        *,
        reason: str = "",
        wall_time_s: float = 0.0,
        trials_ended: int = 0,
        **extra: Any,
    ) -> None:
        write_json(
            self.root / "state.json",
            self._scrub(
                {
                    "state": state,
                    "updated": utc_now(),
                    "reason": reason,
                    "budget": {"wall_time_s": round(wall_time_s, 3), "trials_ended": trials_ended},
                    **extra,
                }
            ),
            self.root,
        )

    def append(self, name: str, record: dict, sync: bool = True) -> None:
        """Append one JSON line to `name` (trials.jsonl, events.jsonl, ...), fsync'd when `sync`.

        A torn last line left by a killed writer is cut off before the first append
        (planner._store.jsonl); a write that fails (a full disk) is rolled back to the last
        whole line before the error goes on. Unsynced lines are written with one
        os.write each: they survive a killed driver, not a power loss.
        """
        handle = self._handles.get(name)
        if handle is None:
            handle = open_for_append(self.root / name)
            self._handles[name] = handle
        if self.redactor is not None:
            record = self.redactor.scrub(record)
        line = json.dumps(record, allow_nan=False, default=str)
        check_written(name, line)
        append_line(handle, line + "\n", sync=sync)

    def record_trial(self, record: dict) -> None:
        self.append("trials.jsonl", record)

    def event(self, kind: str, sync: bool = True, **fields: Any) -> None:
        """Append an event; per-trial events pass sync=False (flushed, not fsync'd: trials.jsonl
        is the record)."""
        self.append("events.jsonl", {"event": kind, "time": utc_now(), **fields}, sync=sync)

    def write_selection(self, selection: dict) -> None:
        write_json(self.root / "selection.json", selection, self.root)

    def write_decisions(self, decisions: dict) -> None:
        write_json(self.root / "decisions.json", self._scrub(decisions), self.root)

    def _scrub(self, value):
        return value if self.redactor is None else self.redactor.scrub(value)

    def redactor_said(self, value: str) -> str:
        """`value` as this store writes it into the run folder (secrets cut out)."""
        return str(self._scrub(value))

    def trial_dir(self, trial_id: str) -> str:
        """The trial's own folder (created here); a link in its place, or as `trials/`, is
        refused (RunError)."""
        folder = self.root / "trials"
        for path in (folder, folder / trial_id):
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                raise RunError(
                    f"{path} is a link or not a folder: a trial's folder must be a plain folder "
                    "inside the run folder (planner follows no link there); remove it and resume"
                )
        return str((self.root / "trials" / trial_id).resolve())

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    # -- reading ------------------------------------------------------------
    def trials(self) -> list[dict]:
        return read_jsonl(self.root / "trials.jsonl")

    def run_info(self) -> dict:
        return read_json(self.root / "run.json") or {}
