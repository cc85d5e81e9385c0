"""The Optuna boundary of a run: an arm's sampler, and the finished trials a resumed study is told.

The space and its Optuna form (`to_optuna`) are planner._plan.space's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import warnings
from pathlib import Path
from typing import Any

from planner._core.lazy import lazy_import
from planner._core.records import final_value, finite_final_value
from planner._core.status import TrialStatus

optuna = lazy_import("optuna")  # imported when a run builds its first study


def run_studies(path: str | Path | None) -> Any:
    """The Optuna storage of a run's tuning studies (`path`: its journal file), or None (in memory).

    Optuna's journal file, as its file backend writes and reads it, without the backend's lock and
    fsync per operation: the driver is the studies' one writer (it holds the run folder's lock), a
    process that dies leaves what it wrote in the file, and the fsync of every operation (six a
    trial) was nearly all of a trial's cost in the driver. A reader (optuna-dashboard) opens it
    with the file backend."""
    if path is None:
        return None
    file = str(path)
    file_backend: Any = optuna.storages.journal.JournalFileBackend

    class RunJournal(file_backend):
        # The storage reads the journal back after each of its own writes: the lines this
        # process wrote since that read are handed back as the file would give them (each line
        # decoded again), without opening and reading the file for every operation.
        def __init__(self, path: str):
            super().__init__(path)
            self._own: list[dict[str, Any]] = []
            self._read_to: int | None = None  # where the storage's last read ended

        def read_logs(self, log_number_from: int) -> list[dict[str, Any]]:
            if log_number_from == self._read_to:
                logs = self._own
            else:
                logs = list(super().read_logs(log_number_from))
            self._own, self._read_to = [], log_number_from + len(logs)
            return logs

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            lines = [json.dumps(log, separators=(",", ":")) for log in logs]
            with open(file, "ab") as f:  # one write of whole lines: a reader never sees half of one
                f.write("".join(line + "\n" for line in lines).encode("utf-8"))
            if self._read_to is not None:
                self._own.extend(json.loads(line) for line in lines)

    return optuna.storages.JournalStorage(RunJournal(file))


def study_name(arm: str, seed: int, several_seeds: bool) -> str:
    """A sweep's study: named after its arm, and its tuning seed when the arm has several."""
    return f"{arm}-s{seed}" if several_seeds else arm


def index_seed(seed: int, index: int) -> int:
    """The sampler seed of the draw at tuning index `index`: a function of (declared seed, index)
    alone, so the draw at an index is the same in a resumed run, and the same for every arm of the
    run."""
    digest = hashlib.sha256(f"planner-sweep:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def grid_points(seed: int, space: dict[str, Any]) -> list[dict[str, Any]]:
    """The grid in the seeded order its tuning indices take it (index i: point i, over again past
    the end): the same for every arm whose grid is the same."""
    names = sorted(space)  # `space`: Optuna distributions, all categorical for a grid
    points = list(itertools.product(*(space[name].choices for name in names)))
    random.Random(seed).shuffle(points)
    return [dict(zip(names, point, strict=True)) for point in points]


class SweepStudy:
    """One sweep's Optuna study (an arm at a tuning seed), asked and told by tuning index.

    The draw at index i comes from a sampler seeded by (declared seed, i): by construction for
    random and grid, whatever ran before; TPE's draw also reads the finished trials the study holds
    when it is asked, and a resumed study is given them again, in index order, before it is asked
    anything."""

    def __init__(
        self,
        storage: Any,
        name: str,
        sampler: Any,
        space: dict[str, Any],
        mode: str,
        metric: str | None = None,
    ):
        self.sampler, self.space = sampler, dict(sorted(space.items()))  # one order of draws
        self.grid = grid_points(sampler.seed, self.space) if sampler.name == "grid" else []
        if storage is not None and name in {s.study_name for s in storage.get_all_studies()}:
            optuna.delete_study(study_name=name, storage=storage)  # rebuilt from the run's records
        self.study = optuna.create_study(
            storage=storage,
            study_name=name,
            direction="maximize" if mode == "max" else "minimize",
            sampler=optuna.samplers.RandomSampler(seed=sampler.seed),
        )
        self.study.set_user_attr("sampler", {"name": sampler.name, "seed": sampler.seed})
        if metric is not None:  # optuna-dashboard names the objective after it
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.set_metric_names([metric])
        self.running: dict[int, Any] = {}  # trial number -> the Optuna trial asked, until told
        self.reported: dict[int, set[int]] = {}  # trial number -> the steps its trial was given

    def replay(self, records: list[dict[str, Any]], metric: str, resumed_at: str | None) -> None:
        """A resumed sweep: its finished trials (their records), told in index order; `resumed_at`:
        when."""
        told = [
            trial
            for record in sorted(records, key=lambda r: r.get("index", 0))
            if (trial := finished_trial(record, metric, self.space, with_index=True)) is not None
        ]
        self.study.add_trials(told)
        if resumed_at is not None:
            self.study.set_user_attr("resumed", {"at": resumed_at, "trials_before": len(told)})

    def ask(self, index: int, trial_id: str, values: dict[str, Any] | None = None):
        """(study trial number, params) of tuning index `index`; `values`: the values it runs
        again."""
        attrs = {"index": index, "trial_id": trial_id}
        if values is None and self.sampler.name == "grid":
            values = self.grid[index % len(self.grid)]
        if values is not None:
            self.study.enqueue_trial(values, user_attrs=attrs)
        elif self.sampler.name == "tpe":
            self.study.sampler = optuna.samplers.TPESampler(
                seed=index_seed(self.sampler.seed, index)
            )
        else:
            self.study.sampler = optuna.samplers.RandomSampler(
                seed=index_seed(self.sampler.seed, index)
            )
        trial = self.study.ask(self.space)
        self.running[trial.number] = trial
        if values is None:
            for key, value in attrs.items():
                trial.set_user_attr(key, value)
        return trial.number, trial.params

    def report(self, number: int, steps: dict[int, float]) -> None:
        """A running trial's metric by step, as its study trial's intermediate values (a live curve
        in optuna-dashboard); a step it was given already is not written again."""
        trial, seen = self.running.get(number), self.reported.setdefault(number, set())
        if trial is None:
            return
        for step, at in sorted(steps.items()):
            if step not in seen:
                trial.report(at, step)
                seen.add(step)

    def tell(
        self, number: int, value: float | None, pruned: bool, steps: dict[int, float] | None = None
    ) -> None:
        """A trial's end: its final value, or stopped early (pruned), or failed; `steps`: the
        values of the metric it reported by step (those not given while it ran are given now)."""
        state = optuna.trial.TrialState
        self.report(number, steps or {})
        self.running.pop(number, None)
        self.reported.pop(number, None)
        if value is not None:
            self.study.tell(number, value, skip_if_finished=True)
        else:
            self.study.tell(
                number, state=state.PRUNED if pruned else state.FAIL, skip_if_finished=True
            )


def metric_steps(reports: list[dict[str, Any]], metric: str) -> dict[int, float]:
    """The finite values of `metric` in a trial's reports, by step: its study trial's intermediate
    values."""
    steps = {}
    for report in reports:
        step, at = report.get("step"), final_value({"reports": [report]}, metric)
        if isinstance(step, int) and at is not None and math.isfinite(at):
            steps[step] = at
    return steps


def finished_trial(
    record: dict[str, Any], metric: str, space: dict[str, Any], *, with_index: bool = False
) -> Any:
    """A finished trial of a resumed sweep (its record) as its rebuilt study takes it
    (`study.add_trial`).

    Every status is told, as a running study was told it: `completed` with its final value
    (COMPLETE), `early_stopped` as PRUNED, any other end (failed, diverged, ...) as FAIL; the
    values of `metric` its record holds by step go with it. None when its params do not fit `space`
    (the study goes without it)."""
    state = optuna.trial.TrialState
    value = (
        finite_final_value(record, metric)
        if record.get("status") == TrialStatus.COMPLETED
        else None
    )
    how = (
        state.COMPLETE
        if value is not None
        else state.PRUNED
        if record.get("status") == TrialStatus.EARLY_STOPPED
        else state.FAIL
    )
    steps = metric_steps(record.get("reports") or [], metric)
    try:
        return optuna.trial.create_trial(
            state=how,
            value=value,
            params=dict(record.get("params") or {}),
            distributions=space,
            intermediate_values=steps or None,
            user_attrs={"index": record.get("index"), "trial_id": record.get("trial_id")}
            if with_index
            else None,
        )
    except (ValueError, TypeError):
        return None
