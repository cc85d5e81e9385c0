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
from planner._core.errors import RunError, TrialProtocolError
from planner._core.lazy import lazy_import
from planner._core.status import StopReason, TrialStatus
from planner._core.text import utc_now, without_colours
from planner._dispatch.cluster import resources_for, task_options
from planner._dispatch.hooks import CANCELLED, Hooks, Outcome
from planner._dispatch.nodes import NodeGuard, short_node
from planner._dispatch.worker import confirm_task, warm_task
from planner._trial.attempts import Ledger
from planner._trial.protocol import kept_record, make_record
from planner._trial.reports import parse_report_line
from planner._trial.spec import TrialSpec

ray = lazy_import(
    "ray"
)  # imported when the first trial is sent: `plan reeval`'s refusals never load it

BACKSTOP_S = (
    10.0  # past max_trial_time + this, the driver kills a trial its worker's watchdog did not stop
)
STARTUP_S = 120.0  # what a trial whose start the driver cannot see may spend waiting for its worker
RETRY = "retry"  # after_worker_death: the trial runs again (a retry is left)


def slots_for(resources: Resources | Mapping[str, Any]) -> int:
    """How many trials of `resources` (the contract's budget.resources) the connected Ray cluster
    runs at once (at least 1)."""
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

    On one machine (an embedded Ray) a warm-up asks for no resources: it starts its worker and
    imports at once, beside the last tuning trials, and the confirmation's tasks take those workers
    (every worker of the machine serves them). On a cluster it asks for a trial's resources, so
    that it lands on a node that can run a trial: it then waits until the tuning's tail frees slots
    there."""
    options = {"num_cpus": 0} if one_machine else task_options(resources)
    task = ray.remote(warm_task).options(**options, max_retries=0)
    return [task.remote(template.trainable, template.path) for _ in range(slots_for(resources))]


def running_for(spec: TrialSpec, submitted_at: float) -> float:
    """Seconds the trial's current attempt has run: from its ledger when the driver can read it (the
    trial may wait long for a worker to start), else since it was submitted."""
    ledger = Ledger.of(spec)
    mine = ledger.mine()
    if (
        not mine
    ):  # not started yet (a worker can take long to start), or its ledger is on another node
        return time.monotonic() - submitted_at - STARTUP_S
    return time.time() - mine[-1].get("started_epoch", time.time())


def completed_reports(spec: TrialSpec) -> list[dict] | None:
    """The reports of a trial whose last attempt of this session ended `completed` in its attempt
    ledger and whose reports are on disk (a command's `attempt-<n>/reports.jsonl`) up to the full
    exposure: its result exists, whatever happened to its worker afterwards. None when not
    so. Asked only when the worker kept no record (`kept_record`): it died between the attempt's
    end and its record."""
    mine = Ledger.of(spec).mine()
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


def after_worker_death(
    spec: TrialSpec, message: str, traceback: str = "", *, sent: int = 1
) -> tuple[str, list, int]:
    """After a worker died under `spec`: (RETRY | a final status, the errors, attempts used).

    The attempt ledger (planner._trial.attempts; on a cluster written on the driver's node through
    Ray as each attempt starts and ends, whichever node ran it) says whether a watchdog killed it
    for oom/timeout (final, never retried), and how many attempts this run has used (a worker death
    uses a retry, like a raise). `sent`: how many times this driver sent the trial; an attempt the
    ledger does not hold (its worker died before it could say it started) counts all the same.
    """
    ledger = Ledger.of(spec)
    terminal = ledger.terminal()
    died = f"the worker process died: {message}"
    errors = ledger.errors(died_message=died)
    for error in errors:
        if error["type"] == "WorkerDied" and traceback and not error["traceback"]:
            error["traceback"] = traceback
    if terminal is not None:
        return terminal["ended"], errors, max(ledger.used, 1)
    used = max(ledger.used, sent, 1)
    known = {error["attempt"] for error in errors}
    if used not in known:  # the death of the attempt the ledger never heard of
        errors.append(
            {"attempt": used, "type": "WorkerDied", "message": died, "traceback": traceback}
        )
    if used < 1 + spec.retries:
        return RETRY, errors, used
    return TrialStatus.FAILED, errors, used


class _Nodes:
    """The cluster's nodes as fixed-config trials see them: the run's `NodeGuard` (each node
    checked before it takes a trial, a refused one held), and the trials of this batch on each.

    A trial is sent to one checked node (Ray's node affinity) with a slot free, the least busy
    first, and never to a node where that trial failed for a reason of the node (its worker died
    there), while another checked node can hold it."""

    def __init__(self, guard: NodeGuard):
        self.guard = guard
        self.busy: dict[str, int] = {}  # node -> trials of this batch running there

    def look(self) -> None:
        """Check the nodes that joined since the last look; the first node is worth waiting for."""
        self.guard.look(wait_s=30.0 if not self.guard.usable() and self.guard.pending else 0)

    def place(self, avoid: set[str]) -> str | None:
        """The checked, alive node with a slot free for a trial, least busy first, outside `avoid`
        when another can hold it; None when none is free now."""
        slots = self.guard.usable()
        usable = [n for n in slots if n not in avoid] or list(slots)  # avoided only while others
        free = [(self.busy.get(n, 0), n) for n in usable if self.busy.get(n, 0) < slots[n]]
        return min(free)[1] if free else None

    def gone(self, node_id: str) -> None:
        self.guard.gone(node_id)

    def none_can_run(self) -> str | None:
        return self.guard.none_can_run()


class _FixedBatch:
    """The trials of one `run_fixed` call: the queue, the running tasks, the attempts so far."""

    def __init__(
        self,
        specs: list[TrialSpec],
        *,
        resources: Resources,
        hooks: Hooks,
        max_trial_time_s: float | None,
        guard: NodeGuard | None = None,
    ):
        self.options = {**task_options(resources), "max_retries": 0, "retry_exceptions": False}
        self.task = ray.remote(confirm_task).options(**self.options)
        self.slots = slots_for(resources)
        self.queue = list(specs)
        self.hooks, self.max_trial_time_s = hooks, max_trial_time_s
        self.attempts: dict[str, int] = {}
        self.running: dict[
            Any, tuple[TrialSpec, float, str]
        ] = {}  # ref -> (spec, submitted at, started)
        self.outcome = Outcome()
        self.own_guard: NodeGuard | None = None
        if guard is None and on_cluster(specs[0]):  # a batch of its own (plan reeval)
            guard = self.own_guard = guard_for(specs[0], resources, hooks)
        self.nodes = _Nodes(guard) if guard is not None else None
        self.where: dict[Any, str] = {}  # ref -> the node it was sent to (on a cluster)
        self.avoid: dict[str, set[str]] = {}  # trial_id -> nodes where its worker died

    def submit(self) -> None:
        """Fill every free slot from the queue (on a cluster: of the checked nodes)."""
        if self.nodes is not None:
            self.nodes.look()
            if self.queue and (why := self.nodes.none_can_run()) is not None:
                raise RunError(why)
        while self.queue and (self.nodes is not None or len(self.running) < self.slots):
            node = None
            if self.nodes is not None:
                node = self.nodes.place(self.avoid.get(self.queue[0].trial_id, set()))
                if node is None:
                    return
            spec = self.queue.pop(0)
            self.attempts[spec.trial_id] = self.attempts.get(spec.trial_id, 0) + 1
            if self.attempts[spec.trial_id] == 1:
                self.hooks.trial_started(spec)
            task = self.task
            if node is not None:
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                strategy = NodeAffinitySchedulingStrategy(node, soft=False)
                task = ray.remote(confirm_task).options(
                    **self.options, scheduling_strategy=strategy
                )
            ref = task.remote(asdict(spec))
            self.running[ref] = (spec, time.monotonic(), utc_now())
            if node is not None and self.nodes is not None:
                self.where[ref] = node
                self.nodes.busy[node] = self.nodes.busy.get(node, 0) + 1

    def _left(self, ref: Any) -> str | None:
        """The node `ref` was sent to, its slot given back (None off a cluster)."""
        node = self.where.pop(ref, None)
        if node is not None and self.nodes is not None:
            self.nodes.busy[node] -= 1
        return node

    def _end(self, record: dict) -> None:
        self.outcome.ended += 1
        self.hooks.trial_ended(record)

    def collect(self, done: list) -> None:
        """The tasks that returned: their records, or a retry / a final status after a dead
        worker."""
        for ref in done:
            spec, started_at, started = self.running.pop(ref)
            node = self._left(ref)
            try:
                record = ray.get(ref)
            except (
                Exception
            ) as error:  # the worker died (crash, SIGKILL, a watchdog's kill): retried like a raise
                said = without_colours(str(error))  # Ray's colour codes are no part of its words
                message = said.splitlines()[0] if said else type(error).__name__
                if node is not None and isinstance(error, ray.exceptions.TaskUnschedulableError):
                    self.attempts[spec.trial_id] -= 1  # its node went before it started: not run
                    if self.nodes is not None:
                        self.nodes.gone(node)
                    self.queue.insert(0, spec)
                    continue
                if node is not None:  # its retry goes to another node while one can hold it
                    self.avoid.setdefault(spec.trial_id, set()).add(node)
                    if node not in {n["NodeID"] for n in ray.nodes() if n.get("Alive")}:
                        message = f"its node {short_node(node)} died ({message})"
                        if self.nodes is not None:
                            self.nodes.gone(node)
                record = kept_record(
                    spec
                )  # the trial had ended, and its worker kept the record: it stands
                if record is None and (reports := completed_reports(spec)) is not None:
                    record = make_record(
                        spec,
                        TrialStatus.COMPLETED,
                        None,
                        max(Ledger.of(spec).used, 1),
                        [],
                        started,
                        time.monotonic() - started_at,
                        reports,
                    )
                if record is not None:
                    self.hooks.trial_kept(spec, record, message)
                    self._end(record)
                    continue
                status, errors, used = after_worker_death(
                    spec, message, traceback=said, sent=self.attempts[spec.trial_id]
                )
                if status == RETRY:
                    self.queue.insert(0, spec)
                    continue
                record = make_record(
                    spec, status, None, used, errors, started, time.monotonic() - started_at
                )
                record["node_id"] = node  # where it was lost (the driver's own node is not it)
            self._end(record)

    def backstop(self) -> None:
        """Kill a trial past max_trial_time + BACKSTOP_S (the worker's watchdog stops it first)."""
        if self.max_trial_time_s is None:
            return
        for ref, (spec, started_at, started) in list(self.running.items()):
            if running_for(spec, started_at) > self.max_trial_time_s + BACKSTOP_S:
                ray.cancel(ref, force=True)
                self.running.pop(ref)
                self._left(ref)
                attempt = self.attempts[spec.trial_id]
                error = {
                    "attempt": attempt,
                    "type": "Timeout",
                    "message": f"stopped after budget.max_trial_time of {self.max_trial_time_s:g} "
                    f"s",
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
        """Cancel the running trials, once the youngest is CANCEL_SETTLE_S old."""
        if self.running:
            youngest = max(started_at for _, started_at, _ in self.running.values())
            time.sleep(max(0.0, CANCEL_SETTLE_S - (time.monotonic() - youngest)))
        for ref, (spec, _, _) in self.running.items():
            ray.cancel(ref, force=True)
            self.hooks.trial_cancelled(spec, CANCELLED)


# A task cancelled in the moment after it was submitted, before Ray's core worker has queued it,
# is failed at once, and the reply of the worker that still ran it then ends the driver (Ray's
# TaskManager: "Check failed: ... Tried to complete task that was not pending", exit 1). A Ctrl-C
# often lands just there: as a trial ends, the next is submitted. A trial is cancelled only once it
# is this old.
CANCEL_SETTLE_S = 1.0


def on_cluster(spec: TrialSpec) -> bool:
    """A cluster run of a function trainable: its nodes are checked and chosen (a command's script
    is checked by its own first trial)."""
    return bool(spec.extra.get("keeper")) and "command" not in spec.extra


def guard_for(template: TrialSpec, resources: Resources, hooks: Hooks) -> NodeGuard:
    """The NodeGuard of a cluster run whose trials are like `template`."""
    return NodeGuard(
        template.trainable, template.path, resources_for(resources), hooks.node_refused
    )


def run_fixed(
    specs: list[TrialSpec],
    *,
    resources: Resources,
    hooks: Hooks,
    max_trial_time_s: float | None,
    deadline: float | None,
    guard: NodeGuard | None = None,
) -> Outcome:
    """Run fixed-config trials as plain Ray tasks, one per free slot; a dead worker is retried like
    a raise. On a cluster they go to the nodes `guard` (the run's NodeGuard) checked; without one,
    the batch checks the nodes itself and lets the refused ones go at its end."""
    if not specs:
        return Outcome()
    batch = _FixedBatch(
        specs, resources=resources, hooks=hooks, max_trial_time_s=max_trial_time_s, guard=guard
    )
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
    if batch.own_guard is not None and batch.outcome.stopped != StopReason.INTERRUPTED:
        batch.own_guard.release()  # else the job's end does (an interrupted head may be gone)
    return batch.outcome
