"""What runs in the Ray workers: the Tune function trainable, the fixed-config task, the warm-up
task.

The workers import this module (Ray pickles these functions by reference), so
it stays light: the trial protocol only, never pydantic, the contract model,
Tune's driver side or Optuna.
"""

from __future__ import annotations

import os
import sys

from planner._core.lazy import lazy_import
from planner._core.status import TrialStatus
from planner._core.text import utc_now
from planner._trial.loading import load_trainable
from planner._trial.processes import CommandLimits, trial_processes_end
from planner._trial.protocol import kept_record, run_trial
from planner._trial.spec import TrialSpec
from planner._trial.worker_process import ray_node_id

ray_tune = lazy_import("ray.tune")  # imported by the first tuning report, in the worker

# How long a reused Tune actor waits for its previous trial to end before it takes the next one
# (Ray's TUNE_FUNCTION_THREAD_TIMEOUT_S, 2 s by default, read in the worker by reset_config). A
# trial stopped early (ASHA) ends when its command's process group has gone: SIGTERM, then SIGKILL
# after CommandLimits.kill_grace_s. Ray's 2 s is shorter than many teardowns (Lightning's):
# reset_config then fails, and Tune drops the next trial with "Could not re-use actor" and no
# record. Long enough for the grace and the reaping, so a reused actor always ends its
# trial first.
REUSE_WAIT_S = int(CommandLimits.kill_grace_s) + 25

# The workers' environment (an embedded Ray's workers inherit it, a cluster's get it through
# runtime_env: planner._dispatch.ray_start). PL_DISABLE_FORK is what Ray Tune gives its own trial
# actors (ray.tune.execution.class_cache.DEFAULT_ENV_VARS: Lightning's fork-based strategies do not
# work in a Ray worker, ray-project/ray#28197); here every trial has it, tuning and confirmation
# alike, and Tune's actors need no runtime_env of their own on an embedded Ray
# (tune.trial_actors_on_inherited_environment).
WORKER_ENV = {
    "RAY_CHDIR_TO_TRIAL_DIR": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "TUNE_FUNCTION_THREAD_TIMEOUT_S": str(REUSE_WAIT_S),
    "PL_DISABLE_FORK": "1",
}


def tune_trainable(config: dict) -> dict | None:
    """The Ray Tune function trainable: run one trial, streaming each report to Tune.

    A trial that completed on its first attempt returns nothing: the driver builds
    its record from the reports it streamed (saving Tune one round trip per trial),
    unless the record holds what the reports do not (its protocol notes, the
    modules its first attempt loaded).
    Any other ending sends the worker's full record as a last result. A trial
    whose worker died after the trial had ended, and which Tune starts again,
    is not run again: the record its worker kept is sent, marked `kept`.
    """
    spec = TrialSpec(**config["planner_spec"])
    kept = kept_record(spec)
    if (
        kept is not None
    ):  # Tune runs again a trial whose worker died after it ended: the record it kept stands
        return {"planner": {"record": kept, "kept": True}}
    meta = {
        "started": utc_now(),
        "host": os.uname().nodename,
        "pid": os.getpid(),
        "node_id": ray_node_id(),
    }

    sent: dict = {}

    def forward(
        step: int,
        metrics: dict[str, float],
        elapsed: float,
        violations: list,
        splits=None,
        inputs=None,
    ) -> None:
        sent["splits"] = (
            splits or {}
        )  # the splits logged so far travel with the reports (docs/data.md)
        if inputs is not None:  # the files the trial read, sent when they change
            sent["inputs"] = inputs
        ray_tune.report(
            {
                "planner": {
                    "step": step,
                    "metrics": metrics,
                    "time_s": elapsed,
                    "meta": {
                        **meta,
                        "violations": list(violations),
                        **({"splits": splits} if splits else {}),
                        **({"inputs": inputs} if inputs is not None else {}),
                    },
                }
            }
        )

    with trial_processes_end():
        record = run_trial(spec, forward)
    if (
        record["status"] == TrialStatus.COMPLETED
        and record["attempts"] == 1
        and not record["errors"]
        and not record.get("resumed")
        and record.get("splits", {}) == sent.get("splits", {})
        and not record.get("notes")
        and not record.get("modules")
        and record.get("inputs") == sent.get("inputs")
    ):  # what the reports do not carry
        return None
    return {"planner": {"record": record}}


def confirm_task(spec: dict) -> dict:
    """One fixed-config trial (confirmation, reeval) as a plain Ray task: its record."""
    with trial_processes_end():
        return run_trial(TrialSpec(**spec))


def check_node(trainable: str, path: tuple[str, ...]) -> str | None:
    """On the node it is pinned to: import the trainable and the packages its module imports; None
    when it can, else what failed, as one line (`ModuleNotFoundError: No module named
    'sklearn'`)."""
    for folder in reversed(path):
        if folder not in sys.path and os.path.isdir(folder):
            sys.path.insert(0, folder)
    try:
        load_trainable(trainable, fresh=False)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the node's answer
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return None


def warm_task(trainable: str, path: tuple[str, ...]) -> int:
    """Start a worker process and import what a confirmation trial needs, so the first ones start
    at once."""
    for folder in reversed(path):
        if folder not in sys.path and os.path.isdir(folder):
            sys.path.insert(0, folder)
    try:
        load_trainable(trainable, fresh=False)
    except BaseException as exc:  # noqa: BLE001 - the trial itself will report it (a user's BaseException too)
        if isinstance(exc, KeyboardInterrupt):  # Ray cancelling the task
            raise
    return os.getpid()
