"""planner: plan and run controlled ML training experiments.

What users may rely on is exactly what `__all__` names. Heavy modules (Ray,
pandas, matplotlib) load only when the feature that needs them is used.
"""

from __future__ import annotations

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

__all__ = [
    "ContractError",
    "PlannerError",
    "RunError",
    "RunLockedError",
    "TrialProtocolError",
    "UsageError",
    "__version__",
    "load_contract",
    "load_run",
    "log_split",
    "report",
]

# name -> (module, attribute): imported on first use, so `import planner` stays cheap.
_LAZY = {
    "load_contract": ("planner._lineage.resolve", "load_contract"),  # a baseline may come from a run
    "load_run": ("planner._results.tables", "load_run"),
    "report": ("planner._trial.script_report", "report"),
    "log_split": ("planner._trial.script_report", "log_split"),
}

if TYPE_CHECKING:  # pragma: no cover
    from planner._lineage.resolve import load_contract
    from planner._results.tables import load_run
    from planner._trial.script_report import log_split, report


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
