"""The attempt ledger: what happened to each attempt of a trial, kept in trial.dir.

`trial.dir/.planner-attempts.json` (replaced atomically) lists the attempts of
the trial: the driver session that ran it, when it started, and how it ended
(`raised`, `protocol_error`, `diverged`, `completed`, `oom`, `timeout`,
`early_stopped`, ...) with its error and the last step it reported (`step`). `early_stopped`: Ray
Tune stopped the attempt at one of its reports (the sweep's early-stopping rule; the phase's time
budget stops a trial the same way, and that trial, left without a record, runs again on --resume
and may continue). An attempt with no end was cut short by a process that died: a
Ray worker killed mid-trial (counted against `failures.retries`, logged as
`WorkerDied`), or the whole driver killed (then the attempt belongs to an
earlier session: the trial is *resumed*, and that does not use a retry).

The worker reads it before each attempt (how many retries are left, whether
the trainable should look for its checkpoint), the driver reads it when a
worker died under a trial (to tell a watchdog's kill for `oom`/`timeout` from
a crash, and to find the record of a trial that had ended).

`trial.dir/.planner-record.json` (replaced atomically) holds the record the
worker made of the attempt that ended the trial (`keep`), written before the
worker returns it: a worker that dies after its trial ended (in its teardown,
killed before Ray delivered the result) leaves the trial's result, and the
driver records it as it is (`kept`) instead of counting a death.

On a cluster (the spec's `extra["keeper"]` names the driver's TrialFiles actor,
planner._dispatch.keeper) the worker writes and reads both files through Ray, on
the driver's node: the driver decides from them whether or not the nodes share
its disk, and an attempt on another node counts the attempts before it. The
trial's output log is shipped the same way when an attempt ends (`ship`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._core.errors import RunError
from planner._core.status import TrialStatus
from planner._core.text import utc_now
from planner._store.files import LINE_CAP, read_inside, write_atomic
from planner._trial.checkpoints import KEPT_RECORD

LEDGER = ".planner-attempts.json"
KEPT = (
    KEPT_RECORD  # the record of the attempt that ended the trial, kept before the worker returns it
)
TERMINAL = (
    TrialStatus.OOM,
    TrialStatus.TIMEOUT,
)  # ends a watchdog may reach by killing the process: never retried
# an attempt's end that is no trial status: the trainable raised, and the attempt is retried
RAISED = "raised"
# how an attempt ended when it did not end the trial: no end (cut short), a raise (retried), a stop
# at a report
NOT_ENDED = (None, RAISED, TrialStatus.EARLY_STOPPED)


SHIP_WAIT_S = 60.0  # how long a worker waits on the driver's node for a file to be written or read
_HANDLES: dict[
    str, Any
] = {}  # keeper name -> the actor's handle, looked up once per worker process


def _keeper(name: str | None) -> Any:
    """The driver's TrialFiles actor named `name`, from inside Ray; None without one."""
    ray = sys.modules.get("ray")  # never imported here: a worker that has a keeper runs in Ray
    if not name or ray is None or not ray.is_initialized():
        return None
    if name not in _HANDLES:
        try:
            _HANDLES[name] = ray.get_actor(name)
        except Exception:  # no such actor (a driver that started none): the local disk then
            return None
    return _HANDLES[name]


def shipped(keeper: str | None, trial_dir: str | os.PathLike, name: str, data: bytes) -> bool:
    """`data` written as `name` of `trial_dir` on the driver's node (planner._dispatch.keeper);
    False when there is no keeper or it could not be reached (the caller then writes to this node's
    disk)."""
    handle = _keeper(keeper)
    if handle is None:
        return False
    try:
        ray = sys.modules["ray"]
        return bool(ray.get(handle.put.remote(str(trial_dir), name, data), timeout=SHIP_WAIT_S))
    except Exception:  # the driver's node is gone or slow: this node's disk, as without a keeper
        return False


def fetched(keeper: str | None, trial_dir: str | os.PathLike, name: str) -> bytes | None:
    """The bytes of `name` of `trial_dir` on the driver's node, or None (no keeper, no file)."""
    handle = _keeper(keeper)
    if handle is None:
        return None
    try:
        ray = sys.modules["ray"]
        return ray.get(handle.get.remote(str(trial_dir), name), timeout=SHIP_WAIT_S)
    except Exception:
        return None


def _read(trial_dir: Path, name: str, cap: int, keeper: str | None) -> bytes | None:
    """`name` of the trial's folder: from the driver's node with a keeper, else from this disk."""
    if _keeper(keeper) is not None:
        return fetched(keeper, trial_dir, name)
    path = trial_dir / name
    try:
        return read_inside(path.parent, path, cap=cap)  # no link followed
    except (OSError, RunError):
        return None


@dataclass
class Ledger:
    dir: Path
    session: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    keeper: str | None = None  # the driver's TrialFiles actor (a cluster run), or None

    @classmethod
    def load(cls, trial_dir: str | os.PathLike, session: str, keeper: str | None = None) -> Ledger:
        try:
            data = json.loads(_read(Path(trial_dir), LEDGER, 16 << 20, keeper) or b"{}")
            attempts = [a for a in data.get("attempts", []) if isinstance(a, dict)]
        except (ValueError, AttributeError):
            attempts = []
        return cls(Path(trial_dir), session, attempts, keeper)

    @classmethod
    def of(cls, spec: Any) -> Ledger:
        """The ledger of the trial `spec` (a TrialSpec: its dir, its driver session, its keeper)."""
        extra = spec.extra or {}
        return cls.load(spec.dir, str(extra.get("session", "")), extra.get("keeper"))

    # -- what the ledger says ------------------------------------------------
    def mine(self) -> list[dict[str, Any]]:
        """This session's attempts."""
        return [a for a in self.attempts if a.get("session") == self.session]

    @property
    def used(self) -> int:
        """Attempts this session has started (each uses a retry after the first)."""
        return len(self.mine())

    def cut_short_before(self) -> bool:
        """True when the attempt before the latest one was cut short (its process died, its driver
        was killed, it raised, or Tune stopped it at a report and it runs again, so with no record:
        the phase's time budget) and ran the same tuned values: the trainable may continue from its
        checkpoint. An earlier attempt that ran to an end (its record lost with a torn line), or
        ran other values (a ledger written before attempts named theirs), is not continued: the
        trial starts over."""
        if len(self.attempts) < 2:
            return False
        before, latest = self.attempts[-2], self.attempts[-1]
        return before.get("ended") in NOT_ENDED and (before.get("params") or {}) == (
            latest.get("params") or {}
        )

    def terminal(self) -> dict[str, Any] | None:
        """This session's last attempt when it ended as oom/timeout (a watchdog kill), else None."""
        mine = self.mine()
        if mine and mine[-1].get("ended") in TERMINAL:
            return mine[-1]
        return None

    def reached(self) -> int:
        """The furthest step an attempt of this session reported (0 when none did): the exposure a
        trial spent, also when its last attempt was killed or raised before its first report."""
        steps = [a.get("step") for a in self.mine()]
        return max((s for s in steps if isinstance(s, int) and not isinstance(s, bool)), default=0)

    def errors(self, died_message: str | None = None) -> list[dict[str, Any]]:
        """One error per failed attempt of this session; an attempt with no end died with its
        worker."""
        out = []
        for a in self.mine():
            if a.get("error"):
                out.append(a["error"])
            elif a.get("ended") is None:
                out.append(
                    {
                        "attempt": a["attempt"],
                        "type": "WorkerDied",
                        "message": died_message
                        or f"the worker process (pid {a.get('pid')}) died during "
                        f"attempt {a['attempt']} (killed by a signal, or out of memory)",
                        "traceback": "",
                    }
                )
        return out

    def kept(self) -> dict[str, Any] | None:
        """The record this session's last attempt made as it ended the trial (`keep`), or None:
        when that attempt did not end (cut short), raised, was stopped at a report, or kept no
        record (its worker died before it could, or the record is on another node's disk), or the
        kept record is not of it."""
        mine = self.mine()
        return self._kept_by(mine[-1]) if mine else None

    def kept_before(self) -> dict[str, Any] | None:
        """The record an earlier driver session's attempt kept as it ended the trial, when that
        attempt is the trial's last and the ledger says it ended so: the trial ended as that driver
        stopped, before the driver wrote its record (`plan run --resume` records it instead of
        running the trial again). None otherwise. The record is as the worker wrote it: the reader
        checks it before it is used."""
        if not self.attempts or self.attempts[-1].get("session") == self.session:
            return None
        return self._kept_by(self.attempts[-1])

    def _kept_by(self, attempt: dict[str, Any]) -> dict[str, Any] | None:
        """The kept record when `attempt` ended the trial and the kept file is that attempt's
        record, else None (another session's, another attempt's, or not what the ledger says it
        ended as)."""
        if attempt.get("ended") in NOT_ENDED:
            return None
        try:
            data = json.loads(_read(self.dir, KEPT, LINE_CAP, self.keeper) or b"{}")
        except ValueError:
            return None
        record = data.get("record") if isinstance(data, dict) else None
        if (
            not isinstance(record, dict)
            or data.get("session") != attempt.get("session")
            or data.get("attempt") != attempt.get("attempt")
            or record.get("status") != attempt["ended"]
        ):
            return None
        return record

    # -- writing -------------------------------------------------------------
    def start(self, attempt: int, params: dict[str, Any] | None = None) -> None:
        """`attempt` begins, running the tuned values `params` (the trial's; {} outside tuning)."""
        self.attempts.append(
            {
                "session": self.session,
                "attempt": attempt,
                "pid": os.getpid(),
                "started": utc_now(),
                "started_epoch": time.time(),
                "ended": None,
                "params": dict(params or {}),
            }
        )
        self._save()

    def end(
        self,
        attempt: int,
        how: TrialStatus | str,
        error: dict[str, Any] | None = None,
        step: int | None = None,
    ) -> None:
        """Close `attempt`: how it ended, its error, the last step it reported (None: no report)."""
        for a in reversed(self.attempts):
            if a.get("session") == self.session and a.get("attempt") == attempt:
                if a.get("ended") is None:  # the first end wins (a watchdog's, before the kill)
                    a["ended"], a["error"], a["step"] = how, error, step
                    a["ended_at"] = utc_now()
                break
        self._save()

    def keep(self, attempt: int, record: dict[str, Any]) -> bool:
        """Keep `record`, the one `attempt` ended the trial with, beside the ledger (replaced
        atomically, before the worker returns it: it must outlive the worker's death, which it does
        once renamed into place). False when it could not be written: the trial's result then
        travels only with the worker's reply."""
        try:
            text = json.dumps(
                {"session": self.session, "attempt": attempt, "record": record}, default=str
            )
            if shipped(self.keeper, self.dir, KEPT, text.encode()):
                return True
            write_atomic(self.dir / KEPT, text, durable=False)
        except (OSError, TypeError, ValueError, RunError):
            return False
        return True

    def ship(self, name: str, cap: int) -> None:
        """The trial's file `name` (its output log), as this node has it, copied to the driver's
        node: a cluster run's folder holds it whether or not the nodes share the driver's disk."""
        if self.keeper is None:
            return
        path = self.dir / name
        try:
            data = read_inside(path.parent, path, cap=cap)
        except (OSError, RunError):
            return
        if data is not None:
            shipped(self.keeper, self.dir, name, data)

    def _save(self) -> None:
        text = json.dumps({"attempts": self.attempts}, default=str)
        if shipped(self.keeper, self.dir, LEDGER, text.encode()):
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            # not fsync'd: it must outlive a worker's or the driver's death, which it does once
            # renamed into place
            write_atomic(self.dir / LEDGER, text, durable=False)
        except OSError:
            pass  # a ledger that cannot be written costs only the retry count across a worker death
