"""The driver's disk, reached by the workers through Ray: the trial files a cluster run ships home.

On a cluster the nodes need not share the driver's disk, yet the driver decides
from a trial's attempt ledger and kept record (planner._trial.attempts), and the
run folder keeps each trial's output log. `TrialFiles` is a Ray actor pinned to
the driver's own node (Ray runs a driver only beside a raylet of its machine):
a worker writes those files through it as they are made, and reads the ledger
back through it before an attempt on another node. The actor writes them into
the run folder's `trials/<id>/`, where the driver, `--resume` and `plan status`
read them as on one machine.

Only small files travel this way (the ledger, the kept record, the output log,
capped at 1 MiB); checkpoints go through a storage (planner._trial.storage).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from planner._core.errors import RunError
from planner._core.lazy import lazy_import
from planner._store.files import LINE_CAP, read_inside, write_atomic

ray = lazy_import("ray")

KEEPER_PREFIX = "planner-trial-files-"
SHIPPED_CAP = LINE_CAP  # no file past this is taken (the kept record is one JSON line at most)


def keeper_name(session: str) -> str:
    """The name of the TrialFiles actor of the driver session `session` (the workers look it up)."""
    return KEEPER_PREFIX + session


class TrialFiles:
    """Files of the run folder's trials, written and read on the driver's node for the workers."""

    def __init__(self, run_dir: str):
        self.trials = Path(run_dir).resolve() / "trials"

    def _where(self, trial_dir: str, name: str) -> Path:
        """The file `name` (relative, no `..`) of `trial_dir`, refused outside the run's trials."""
        folder = Path(trial_dir).resolve()
        relative = PurePosixPath(name)
        if (
            folder.parent != self.trials
            or relative.is_absolute()
            or not relative.parts
            or ".." in relative.parts
        ):
            raise RunError(f"{trial_dir}/{name} is not a file of this run's trials")
        return folder.joinpath(*relative.parts)

    def put(self, trial_dir: str, name: str, data: bytes) -> bool:
        """Replace `name` in `trial_dir` with `data`, atomically; False when it could not be."""
        if len(data) > SHIPPED_CAP:
            return False
        try:
            path = self._where(trial_dir, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data, root=self.trials.parent, durable=False)
        except (OSError, RunError):
            return False
        return True

    def get(self, trial_dir: str, name: str) -> bytes | None:
        """The bytes of `name` in `trial_dir`, or None when it is not there."""
        try:
            path = self._where(trial_dir, name)
            return read_inside(path.parent, path, cap=SHIPPED_CAP)
        except (OSError, RunError):
            return None

    def ping(self) -> int:
        return os.getpid()


def start_trial_files(run_dir: Path, session: str) -> object:
    """The TrialFiles actor of `session`, on the driver's node, up and answering (its handle: the
    driver holds it, so it lives as long as the driver's job)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    actor = (
        ray.remote(TrialFiles)
        .options(
            name=keeper_name(session),
            num_cpus=0,
            max_concurrency=8,  # a worker's ledger write never waits on another's output log
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        )
        .remote(str(run_dir))
    )
    ray.get(actor.ping.remote(), timeout=120)
    return actor
