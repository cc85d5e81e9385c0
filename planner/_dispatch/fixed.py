"""Fixed-config trials (confirmation, reeval): plain Ray tasks, at most one per free slot.

They need none of Tune's machinery, so the driver knows when each started (for
`max_trial_time`, with a backstop past the worker's own watchdog) and can stop
at `max_wall_time`. A worker that died is retried like a raise, unless its
attempt ledger (planner._trial.attempts) says a watchdog stopped it for good,
or the trial had ended and its worker kept its record there (`kept_record`):
that record is the trial's.

"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from planner._contract.model import Resources
from planner._core.errors import TrialProtocolError
from planner._core.lazy import lazy_import
from planner._core.status import StopReason, TrialStatus
from planner._core.text import utc_now, without_colours
from planner._dispatch.cluster import resources_for, task_options
from planner._dispatch.hooks import Hooks, Outcome
from planner._dispatch.worker import confirm_task, warm_task
from planner._trial.attempts import Ledger
from planner._trial.protocol import TrialSpec, kept_record, make_record
from planner._trial.reports import parse_report_line

ray = lazy_import(
    "ray"
)  # imported when the first trial is sent: `plan reeval`'s refusals never load it

BACKSTOP_S = (
    10.0  # past max_trial_time + this, the driver kills a trial its worker's watchdog did not stop
)
STARTUP_S = 120.0  # what a trial whose start the driver cannot see may spend waiting for its worker
RETRY = "retry"  # after_worker_death: the trial runs again (a retry is left)


def slots_for(resources: Resources | Mapping[str, Any]) -> int:
    """How many trials of `resources` (the contract's budget.resources) the connected Ray cluster runs at once (at least 1)."""
    total = ray.cluster_resources()
    counts = []
    for name, need in resources_for(resources).items():
        if need > 0:
            counts.append(int(total.get(name, 0) // need))
    return max(1, min(counts) if counts else 1)


def prestart_workers(
    template: TrialSpec, resources: Resources, *, one_machine: bool = False
) -> list:
    """One warm-up task per slot, leaving warm idle workers for the confirmation's first trials.

    On one machine (an embedded Ray) a warm-up asks for no resources: it starts its worker and imports at
    once, beside the last tuning trials, and the confirmation's tasks take those workers (every worker of
    the machine serves them). On a cluster it asks for a trial's resources, so that it lands on a node that
    can run a trial: it then waits until the tuning's tail frees slots there."""
    options = {"num_cpus": 0} if one_machine else task_options(resources)
    task = ray.remote(warm_task).options(**options, max_retries=0)
    return [task.remote(template.trainable, template.path) for _ in range(slots_for(resources))]


def running_for(spec: TrialSpec, submitted_at: float) -> float:
    """Seconds the trial's current attempt has run: from its ledger when the driver can read it (the
    trial may wait long for a worker to start), else since it was submitted."""
    ledger = Ledger.load(spec.dir, str(spec.extra.get("session", "")))
    mine = ledger.mine()
    if (
        not mine
    ):  # not started yet (a worker can take long to start), or its ledger is on another node
        return time.monotonic() - submitted_at - STARTUP_S
    return time.time() - mine[-1].get("started_epoch", time.time())


def completed_reports(spec: TrialSpec) -> list[dict] | None:
    """The reports of a trial whose last attempt of this session ended `completed` in its attempt ledger
    and whose reports are on disk (a command's `attempt-<n>/reports.jsonl`) up to the full exposure: its
    result exists, whatever happened to its worker afterwards (#20.2). None when not so. Asked only when
    the worker kept no record (`kept_record`): it died between the attempt's end and its record."""
    mine = Ledger.load(spec.dir, str(spec.extra.get("session", ""))).mine()
    if not mine or mine[-1].get("ended") != TrialStatus.COMPLETED:
        return None
    path = Path(spec.dir) / f"attempt-{mine[-1].get('attempt')}" / "reports.jsonl"
    try:
        lines = path.read_bytes().splitlines() if path.is_file() and not path.is_symlink() else []
    except OSError:
        return None
    reports = []
    for line in lines:
        try:
            step, metrics = parse_report_line(line)
        except TrialProtocolError:
            continue  # a torn last line
        if step is not None:
            reports.append({"step": step, "metrics": metrics, "time_s": 0.0})
    return reports if reports and reports[-1]["step"] == spec.budget else None


def after_worker_death(spec: TrialSpec, message: str, traceback: str = "") -> tuple[str, list, int]:
    """After a worker died under `spec`: (RETRY | a final status, the errors, attempts used).

    The attempt ledger in trial.dir (planner._trial.attempts) says whether a watchdog
    killed it for oom/timeout (final, never retried), and how many attempts this
    run has used (a worker death uses a retry, like a raise).
    """
    ledger = Ledger.load(spec.dir, str(spec.extra.get("session", "")))
    terminal = ledger.terminal()
    errors = ledger.errors(died_message=f"the worker process died: {message}")
    for error in errors:
        if error["type"] == "WorkerDied" and traceback and not error["traceback"]:
            error["traceback"] = traceback
    used = max(ledger.used, 1)
    if terminal is not None:
        return terminal["ended"], errors, used
    if not ledger.used:  # no ledger (another node's disk): count on the driver's side
        errors = [
            {
                "attempt": 1,
                "type": "WorkerDied",
                "message": f"the worker process died: {message}",
                "traceback": traceback,
            }
        ]
    if used < 1 + spec.retries and ledger.used:
        return RETRY, errors, used
    if not errors:  # a failed record always says why (#20.2)
        errors = [
            {
                "attempt": used,
                "type": "WorkerDied",
                "message": f"the worker process died: {message}",
                "traceback": traceback,
            }
        ]
    return TrialStatus.FAILED, errors, used


class _FixedBatch:
    """The trials of one `run_fixed` call: the queue, the running tasks, the attempts so far."""

    def __init__(
        self,
        specs: list[TrialSpec],
        *,
        resources: Resources,
        hooks: Hooks,
        max_trial_time_s: float | None,
    ):
        self.task = ray.remote(confirm_task).options(
            **task_options(resources), max_retries=0, retry_exceptions=False
        )
        self.slots = slots_for(resources)
        self.queue = list(specs)
        self.hooks, self.max_trial_time_s = hooks, max_trial_time_s
        self.attempts: dict[str, int] = {}
        self.running: dict[
            Any, tuple[TrialSpec, float, str]
        ] = {}  # ref -> (spec, submitted at, started)
        self.outcome = Outcome()

    def submit(self) -> None:
        """Fill every free slot from the queue."""
        while self.queue and len(self.running) < self.slots:
            spec = self.queue.pop(0)
            self.attempts[spec.trial_id] = self.attempts.get(spec.trial_id, 0) + 1
            if self.attempts[spec.trial_id] == 1:
                self.hooks.trial_started(spec)
            self.running[self.task.remote(asdict(spec))] = (spec, time.monotonic(), utc_now())

    def _end(self, record: dict) -> None:
        self.outcome.ended += 1
        self.hooks.trial_ended(record)

    def collect(self, done: list) -> None:
        """The tasks that returned: their records, or a retry / a final status after a dead worker."""
        for ref in done:
            spec, started_at, started = self.running.pop(ref)
            try:
                record = ray.get(ref)
            except (
                Exception
            ) as error:  # the worker died (crash, SIGKILL, a watchdog's kill): retried like a raise
                said = without_colours(str(error))  # Ray's colour codes are no part of its words
                message = said.splitlines()[0] if said else type(error).__name__
                record = kept_record(
                    spec
                )  # the trial had ended, and its worker kept the record: it stands
                if record is None and (reports := completed_reports(spec)) is not None:
                    record = make_record(
                        spec,
                        TrialStatus.COMPLETED,
                        None,
                        max(Ledger.load(spec.dir, str(spec.extra.get("session", ""))).used, 1),
                        [],
                        started,
                        time.monotonic() - started_at,
                        reports,
                    )
                if record is not None:
                    self.hooks.trial_kept(spec, record, message)
                    self._end(record)
                    continue
                status, errors, used = after_worker_death(spec, message, traceback=said)
                if status == RETRY:
                    self.queue.insert(0, spec)
                    continue
                record = make_record(
                    spec, status, None, used, errors, started, time.monotonic() - started_at
                )
            self._end(record)

    def backstop(self) -> None:
        """Kill a trial past max_trial_time + BACKSTOP_S (the worker's watchdog stops it first)."""
        if self.max_trial_time_s is None:
            return
        for ref, (spec, started_at, started) in list(self.running.items()):
            if running_for(spec, started_at) > self.max_trial_time_s + BACKSTOP_S:
                ray.cancel(ref, force=True)
                self.running.pop(ref)
                attempt = self.attempts[spec.trial_id]
                error = {
                    "attempt": attempt,
                    "type": "Timeout",
                    "message": f"stopped after budget.max_trial_time of {self.max_trial_time_s:g} s",
                    "traceback": "",
                }
                self._end(
                    make_record(
                        spec,
                        TrialStatus.TIMEOUT,
                        None,
                        attempt,
                        [error],
                        started,
                        time.monotonic() - started_at,
                    )
                )

    def cancel_running(self) -> None:
        for ref, (spec, _, _) in self.running.items():
            ray.cancel(ref, force=True)
            self.hooks.trial_cancelled(spec, "stopped before it ended (budget or interruption)")


def run_fixed(
    specs: list[TrialSpec],
    *,
    resources: Resources,
    hooks: Hooks,
    max_trial_time_s: float | None,
    deadline: float | None,
) -> Outcome:
    """Run fixed-config trials as plain Ray tasks, one per free slot; a dead worker is retried like a raise."""
    if not specs:
        return Outcome()
    batch = _FixedBatch(specs, resources=resources, hooks=hooks, max_trial_time_s=max_trial_time_s)
    try:
        while batch.queue or batch.running:
            if deadline is not None and time.monotonic() >= deadline:
                batch.outcome.stopped = StopReason.BUDGET
                break
            if hooks.should_stop():  # the run fails fast: the driver says why
                break
            batch.submit()
            wait_s = 0.5
            if deadline is not None:
                wait_s = max(0.01, min(wait_s, deadline - time.monotonic()))
            done, _ = ray.wait(list(batch.running), num_returns=1, timeout=wait_s)
            batch.collect(done)
            batch.backstop()
    except KeyboardInterrupt:
        batch.outcome.stopped = StopReason.INTERRUPTED
    finally:
        batch.cancel_running()
    return batch.outcome
