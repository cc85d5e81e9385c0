"""planner: plan and run controlled ML training experiments.

What users may rely on is exactly what `__all__` names (docs/api.md documents
each name), plus the `planner.stats` module. Everything under a `planner._x`
folder is private and may change. Heavy modules (Ray, pandas, Lightning) load
only when the name that needs them is first used, so `import planner` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from planner._core.errors import (
    ContractError,
    PlannerError,
    RunError,
    RunLockedError,
    TrialProtocolError,
    UsageError,
)
from planner._core.version import VERSION as __version__

# name -> (module, attribute): imported on first use.
_LAZY = {
    # a contract
    "load_contract": (
        "planner._lineage.resolve",
        "load_contract",
    ),  # a baseline may come from a run
    "validate": ("planner._lineage.resolve", "validate"),
    "planned_trials": ("planner._contract.validate", "planned_trials"),
    "LoadedContract": ("planner._contract.validate", "LoadedContract"),
    "ValidationResult": ("planner._contract.validate", "ValidationResult"),
    "Diagnostic": ("planner._core.diagnostics", "Diagnostic"),
    # a run
    "run": ("planner._dispatch.driver", "run"),
    "RunResult": ("planner._dispatch.run_end", "RunResult"),
    # reading a run
    "load_run": ("planner._results.tables", "load_run"),
    "RunResults": ("planner._results.tables", "RunResults"),
    # re-evaluating an arm
    "reeval": ("planner._reeval.rerun", "reeval"),
    "prepare_reeval": ("planner._reeval.prepare", "prepare"),
    "run_reeval": ("planner._reeval.rerun", "run_reeval"),
    "ReevalPlan": ("planner._reeval.prepare", "ReevalPlan"),
    "ReevalResult": ("planner._reeval.comparison", "ReevalResult"),
    # MLflow
    "log_run_to_mlflow": ("planner._results.mlflow", "log_run_to_mlflow"),
    "MlflowLogSummary": ("planner._results.mlflow", "MlflowLogSummary"),
    "MlflowTrackingError": ("planner._results.mlflow", "MlflowTrackingError"),
    # trainables that are commands
    "report": ("planner._trial.script_report", "report"),
    "log_split": ("planner._trial.script_report", "log_split"),
    "CommandTrainable": ("planner._trial.command", "CommandTrainable"),
    "command_trainable": ("planner._trial.command", "command_trainable"),
    # Lightning inside a function trainable (imports lightning on first use)
    "LightningCallback": ("planner._trial.lightning", "LightningCallback"),
}

__all__ = [  # every name but the errors and the version loads lazily (_LAZY, `stats`)
    "ContractError",
    "PlannerError",
    "RunError",
    "RunLockedError",
    "TrialProtocolError",
    "UsageError",
    "__version__",
    "stats",
    "CommandTrainable",
    "Diagnostic",
    "LightningCallback",
    "LoadedContract",
    "MlflowLogSummary",
    "MlflowTrackingError",
    "ReevalPlan",
    "ReevalResult",
    "RunResult",
    "RunResults",
    "ValidationResult",
    "command_trainable",
    "load_contract",
    "load_run",
    "log_run_to_mlflow",
    "log_split",
    "planned_trials",
    "prepare_reeval",
    "reeval",
    "report",
    "run",
    "run_reeval",
    "validate",
]

for _error in (
    ContractError,
    PlannerError,
    RunError,
    RunLockedError,
    TrialProtocolError,
    UsageError,
):
    _error.__module__ = "planner"
del _error

if TYPE_CHECKING:  # pragma: no cover
    from planner import stats
    from planner._contract.validate import LoadedContract, ValidationResult, planned_trials
    from planner._core.diagnostics import Diagnostic
    from planner._dispatch.driver import run
    from planner._dispatch.run_end import RunResult
    from planner._lineage.resolve import load_contract, validate
    from planner._reeval.comparison import ReevalResult
    from planner._reeval.prepare import ReevalPlan
    from planner._reeval.prepare import prepare as prepare_reeval
    from planner._reeval.rerun import reeval, run_reeval
    from planner._results.mlflow import MlflowLogSummary, MlflowTrackingError, log_run_to_mlflow
    from planner._results.tables import RunResults, load_run
    from planner._trial.command import CommandTrainable, command_trainable
    from planner._trial.lightning import LightningCallback
    from planner._trial.script_report import log_split, report


def __getattr__(name: str) -> Any:
    if name == "stats":
        return importlib.import_module("planner.stats")
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        if name != "prepare_reeval":  # an alias: its own name stays `prepare`
            try:
                value.__module__ = "planner"
            except (
                AttributeError,
                TypeError,
            ):  # pragma: no cover - every public name takes it today
                pass
        globals()[name] = value
        return value
    raise AttributeError(f"module 'planner' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
