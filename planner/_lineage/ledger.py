"""The project ledger: one append-only JSON-lines file beside the runs (docs/lineage.md).

`<runs dir>/ledger.jsonl` holds one event a line: `run_started`, `run_resumed`,
`run_ended`, `promoted`, `withdrawn`. Every append takes an exclusive lock and
writes the whole line at once (planner._store.jsonl.locked_append), so two
`plan run`s and a `plan promote` can write at the same time without losing a
line. The ledger is read with the run folder's tolerant JSON-lines reader: a
torn last line is skipped with a note. Every record goes through the one scrubber
(planner._core.redact) on its way in: a run's end reason or a decision's reason
is free text (an exception's message, a `--address` with a password), so no
secret of the environment and no credential's shape is written here.

A run is named in the ledger by its folder relative to the runs dir
(`<contract name>/<run id>`), or by its absolute path when it lives elsewhere.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._core.errors import RunError
from planner._core.lazy import lazy_import
from planner._core.redact import Redactor
from planner._core.text import utc_now

LEDGER = "ledger.jsonl"
EVENTS = ("run_started", "run_resumed", "run_ended", "promoted", "withdrawn")

hashlib = lazy_import(
    "hashlib"
)  # OpenSSL: `plan validate` of a contract with no lineage never hashes
# the run folder's reader (its record schema, bounds, orjson) and the locked appender (fcntl):
# `plan validate` where no ledger is yet neither reads one nor writes to it
store_read = lazy_import("planner._store.read")
jsonl = lazy_import("planner._store.jsonl")


def ledger_path(runs_dir: str | os.PathLike) -> Path:
    return Path(runs_dir) / LEDGER


def runs_dir_of(run_dir: str | os.PathLike) -> Path:
    """The runs dir a run folder belongs to: runs/<contract name>/<run id> -> runs."""
    return Path(run_dir).resolve().parent.parent


def run_key(run_dir: str | os.PathLike, runs_dir: str | os.PathLike) -> str:
    """How the ledger names a run: `<name>/<run id>` inside `runs_dir`, else the absolute path."""
    path, base = Path(run_dir).resolve(), Path(runs_dir).resolve()
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return str(path)


def config_sha256(config: dict[str, Any]) -> str:
    """Hash of an effective config: key order does not change it."""
    return hashlib.sha256(
        json.dumps(config, sort_keys=True, separators=(",", ":"), default=str).encode()
    ).hexdigest()


def append(runs_dir: str | os.PathLike, event: str, **fields: Any) -> dict[str, Any]:
    """Append one event to the ledger of `runs_dir` (created when absent); return the record
    written."""
    assert event in EVENTS, event
    record = Redactor.for_run().scrub(
        {"event": event, "time": utc_now(), **fields}
    )  # `params` kept exactly
    folder = Path(runs_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        jsonl.locked_append(ledger_path(folder), json.dumps(record, allow_nan=False, default=str))
    except OSError as error:
        raise RunError(
            f"cannot write the project ledger {ledger_path(folder)}: {error.strerror or error}"
        ) from None
    return record


@dataclass
class RunEntry:
    """One run as the ledger knows it: its start, resumes and last end."""

    key: str
    started: dict[str, Any]
    ended: dict[str, Any] | None = None
    resumed: list[dict[str, Any]] = field(default_factory=list)
    order: int = 0  # position of run_started in the ledger

    @property
    def line(self) -> str:
        return self.started.get("line") or self.started.get("name") or "?"

    @property
    def decided(self) -> bool:
        """True when the run ended and reported decisions."""
        return bool(self.ended and self.ended.get("decisions"))

    def decision(self, arm: str) -> dict[str, Any] | None:
        for d in (self.ended or {}).get("decisions") or []:
            if d.get("arm") == arm:
                return d
        return None


@dataclass
class Ledger:
    """The ledger's records, in order, and what could not be read."""

    path: Path
    records: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    @property
    def runs_dir(self) -> Path:
        return self.path.parent

    def runs(self) -> dict[str, RunEntry]:
        out: dict[str, RunEntry] = {}
        for i, r in enumerate(self.records):
            key, kind = r.get("run"), r.get("event")
            if not isinstance(key, str):
                continue
            if kind == "run_started" and key not in out:
                out[key] = RunEntry(key, r, order=i)
            elif kind == "run_resumed" and key in out:
                out[key].resumed.append(r)
            elif kind == "run_ended" and key in out:
                out[key].ended = r
        return out

    def promotions(self) -> list[dict[str, Any]]:
        """Every promotion, in order, each with `withdrawn` (the withdrawal record, or None)."""
        out: list[dict[str, Any]] = []
        for r in self.records:
            if r.get("event") == "promoted":
                out.append({**r, "withdrawn": None})
            elif r.get("event") == "withdrawn":
                for p in reversed(out):
                    if (
                        p.get("run") == r.get("run")
                        and p.get("arm") == r.get("arm")
                        and p["withdrawn"] is None
                    ):
                        p["withdrawn"] = r
                        break
        return out

    def in_force(self, line: str) -> dict[str, Any] | None:
        """The line's baseline in force: its latest promotion not withdrawn, or None."""
        live = [p for p in self.promotions() if p.get("line") == line and p["withdrawn"] is None]
        return live[-1] if live else None

    def promotion_of(self, key: str, arm: str) -> dict[str, Any] | None:
        """The latest promotion of run `key`'s arm (withdrawn or not), or None."""
        found = [p for p in self.promotions() if p.get("run") == key and p.get("arm") == arm]
        return found[-1] if found else None

    def lines(self) -> list[str]:
        names: list[str] = []
        for r in self.records:
            line = r.get("line")
            if (
                r.get("event") in ("run_started", "promoted")
                and isinstance(line, str)
                and line not in names
            ):
                names.append(line)
        return names


def read(runs_dir: str | os.PathLike) -> Ledger:
    """The ledger of `runs_dir` (empty when there is none yet)."""
    path = ledger_path(runs_dir)
    if (
        not path.exists()
    ):  # no ledger yet (the common case for validate): skip importing the run reader
        return Ledger(path, [], [])

    lines = store_read.read_jsonl(path)
    records = [r for r in lines.records if r.get("event") in EVENTS]
    notes = list(lines.notes)
    unknown = len(lines.records) - len(records)
    if unknown:
        notes.append(
            f"{unknown} line{'s' if unknown != 1 else ''} of {path.name} with no known event were "
            f"skipped"
        )
    return Ledger(path, records, notes)
