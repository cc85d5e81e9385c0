"""Which tuned parameters mattered, per arm: Optuna's importance over the arm's tuning trials.

The trials an arm's tuning completed are told, with their params and final value, to an in-memory
Optuna study (`optuna.trial.create_trial`, `Study.add_trials`), whose parameter importance
`optuna.importance.get_param_importances` computes with PED-ANOVA (fANOVA, Optuna's default, takes
minutes on thousands of trials). The distributions are the contract's space (`frozen_space`), so
the importance is over the range that was searched.

`optuna.importance` imports scikit-learn (and SciPy's stats) when its package loads, for the fANOVA
evaluator, though PED-ANOVA needs neither: `_importance_api` loads it with scikit-learn held back
for that one import, which spares the report over a second of CPU. fANOVA then stays unusable in
that process (the report, the CLI command that renders it, never uses it).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner._core.lazy import lazy_import
from planner._core.status import TrialStatus
from planner._plan.space import FrozenDimension, to_optuna

optuna = lazy_import("optuna")

MIN_TRIALS = (
    30  # completed tuning trials an arm needs: PED-ANOVA compares the best tenth with the rest
)
# trials told to the study at most: past it, an even spread of them (PED-ANOVA's ranking of a
# few parameters settles well before; its cost grows with the trials)
MAX_TRIALS = 200


@dataclass(frozen=True)
class Importance:
    """One arm's importances (parameter -> share, summing to 1), or why there are none."""

    arm: str
    completed: int  # trials that completed with a finite value and params in the space
    used: int  # of them, told to the study
    values: dict[str, float] = field(default_factory=dict)
    reason: str | None = None


def arm_importance(
    tune: pd.DataFrame, arm: str, space: Mapping[str, FrozenDimension], metric: str, mode: str
) -> Importance:
    """The importance of `space`'s parameters over `tune`'s completed trials of `arm`."""
    keys = [k for k in space if f"param.{k}" in tune.columns]
    column = f"final.{metric}"
    if len(keys) < 2 or column not in tune.columns:
        return Importance(arm, 0, 0, reason="fewer than two parameters were tuned: nothing to rank")
    sub = tune.loc[
        (tune["arm"].astype(str) == arm).to_numpy()
        & (tune["status"].astype(str) == str(TrialStatus.COMPLETED)).to_numpy()
        & np.isfinite(tune[column].to_numpy(dtype=float))
        & tune[[f"param.{k}" for k in keys]].notna().all(axis=1).to_numpy()
    ]
    if len(sub) < MIN_TRIALS:
        return Importance(
            arm,
            len(sub),
            0,
            reason=f"{len(sub)} completed tuning trial(s); the importance needs {MIN_TRIALS}",
        )
    completed = len(sub)
    if completed > MAX_TRIALS:
        sub = sub.iloc[np.unique(np.linspace(0, completed - 1, MAX_TRIALS).round().astype(int))]
    distributions = to_optuna({k: space[k] for k in keys})
    columns = {k: sub[f"param.{k}"].tolist() for k in keys}
    trials = []
    for i, value in enumerate(sub[column].to_numpy(dtype=float).tolist()):
        try:
            params = {k: _param(columns[k][i], space[k]) for k in keys}
            trials.append(
                optuna.trial.create_trial(params=params, distributions=distributions, value=value)
            )
        except (TypeError, ValueError):  # a value outside the searched space (a damaged record)
            continue
    if len(trials) < MIN_TRIALS:
        why = (
            f"{len(trials)} completed tuning trial(s) in the searched space; it needs {MIN_TRIALS}"
        )
        return Importance(arm, completed, len(trials), reason=why)
    return Importance(arm, completed, len(trials), _importances(trials, mode))


def _param(value: Any, dim: FrozenDimension) -> Any:
    """A trial's value in the form its distribution takes (a choice that is not a number is text in
    the trials frame: the option it names)."""
    if dim.kind == "choice":
        return next((c for c in dim.bounds if c == value or str(c) == str(value)), value)
    return int(value) if dim.kind == "int" else float(value)


def _importance_api() -> Any:
    """`optuna.importance`, loaded without scikit-learn when neither is loaded yet: a module set to
    None in `sys.modules` fails its import (the import system's documented rule), which Optuna's
    fANOVA module catches (it then says scikit-learn is missing if used); PED-ANOVA needs only
    numpy.
    """
    if "optuna.importance" in sys.modules or "sklearn" in sys.modules:
        return optuna.importance
    sys.modules["sklearn"] = None  # type: ignore[assignment]
    try:
        import optuna.importance as api
    finally:
        del sys.modules["sklearn"]
    return api


def _importances(trials: list[Any], mode: str) -> dict[str, float]:
    """PED-ANOVA importances over `trials`, told to an in-memory study (Optuna's log kept quiet)."""
    api = _importance_api()
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(direction="minimize" if mode == "min" else "maximize")
        study.add_trials(trials)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            found = api.get_param_importances(study, evaluator=api.PedAnovaImportanceEvaluator())
    finally:
        optuna.logging.set_verbosity(verbosity)
    return {str(k): float(v) for k, v in found.items()}
