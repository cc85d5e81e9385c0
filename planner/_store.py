"""The run folder (docs/run-folder.md): the one place a run's facts are kept.

Files are append-only JSON lines (flushed and fsync'd per line) or replaced
atomically (a temporary file, then `os.replace`). Only the driver writes here;
trial records come back from the workers as values, so a run on a cluster
lands in the driver's folder too.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from planner._errors import RunError, RunLockedError


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=2, sort_keys=False, allow_nan=False, default=str) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    """Every whole line of a JSON-lines file; a torn last line is skipped."""
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


class RunStore:
    """One run folder, opened for writing by the driver."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._handles: dict[str, Any] = {}

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
    def lock(self, command: str = "plan run") -> None:
        """Take the folder's lock, or raise RunLockedError naming who holds it (and with which command)."""
        path = self.root / "lock"
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": utc_now(), "command": command}
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                held = _read_json(path) or {}
                if held.get("host") == socket.gethostname() and not _alive(held.get("pid")):
                    path.unlink(missing_ok=True)  # a stale lock of a dead process on this host
                    continue
                raise RunLockedError(
                    f"{self.root} is in use by `{held.get('command', 'plan run')}` (pid {held.get('pid', '?')} on host "
                    f"{held.get('host', '?')}, since {held.get('started', '?')}); wait for it to end, "
                    f"or remove {path} if that process is gone") from None
            with os.fdopen(fd, "w") as handle:
                json.dump(info, handle)
            return
        raise RunLockedError(f"could not take the lock {path}")

    def unlock(self) -> None:
        held = _read_json(self.root / "lock") or {}
        if held.get("pid") == os.getpid():
            (self.root / "lock").unlink(missing_ok=True)

    # -- writing ------------------------------------------------------------
    def write_frozen(self, contract, contract_path: str, configs: dict[str, dict], plan: dict,
                     planner_version: str) -> None:
        write_atomic(self.root / "contract.yaml", yaml.safe_dump(contract.frozen(), sort_keys=False))
        write_json(self.root / "run.json", {
            "run_id": self.run_id, "name": contract.name, "contract_sha256": contract.sha256(),
            "created": utc_now(), "planner_version": planner_version,
            "contract_path": str(Path(contract_path).resolve())})
        for arm, config in configs.items():
            write_atomic(self.root / "configs" / f"{arm}.yaml", yaml.safe_dump(config, sort_keys=False))
        write_json(self.root / "plan.json", plan)

    def write_identity(self, identity: dict) -> None:
        write_json(self.root / "identity.json", identity)

    def write_state(self, state: str, *, reason: str = "", wall_time_s: float = 0.0, trials_ended: int = 0,
                    **extra: Any) -> None:
        write_json(self.root / "state.json", {
            "state": state, "updated": utc_now(), "reason": reason,
            "budget": {"wall_time_s": round(wall_time_s, 3), "trials_ended": trials_ended}, **extra})

    def append(self, name: str, record: dict, sync: bool = True) -> None:
        """Append one JSON line to `name` (trials.jsonl, events.jsonl, ...), flushed, and fsync'd when `sync`."""
        handle = self._handles.get(name)
        if handle is None:
            handle = open(self.root / name, "a", encoding="utf-8")
            self._handles[name] = handle
        handle.write(json.dumps(record, allow_nan=False, default=str) + "\n")
        handle.flush()
        if sync:
            os.fsync(handle.fileno())

    def record_trial(self, record: dict) -> None:
        self.append("trials.jsonl", record)

    def event(self, kind: str, sync: bool = True, **fields: Any) -> None:
        """Append an event; per-trial events pass sync=False (flushed, not fsync'd: trials.jsonl is the record)."""
        self.append("events.jsonl", {"event": kind, "time": utc_now(), **fields}, sync=sync)

    def write_selection(self, selection: dict) -> None:
        write_json(self.root / "selection.json", selection)

    def write_decisions(self, decisions: dict) -> None:
        write_json(self.root / "decisions.json", decisions)

    def trial_dir(self, trial_id: str) -> str:
        return str((self.root / "trials" / trial_id).resolve())

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    # -- reading ------------------------------------------------------------
    def trials(self) -> list[dict]:
        return read_jsonl(self.root / "trials.jsonl")

    def run_info(self) -> dict:
        return _read_json(self.root / "run.json") or {}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def elapsed_since(t0: float) -> float:
    return time.monotonic() - t0
