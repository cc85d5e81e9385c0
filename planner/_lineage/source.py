"""One arm of a finished run, read back from its folder: its effective config, decision and code
identity.

The effective config of an arm is what its confirmation trials received: the
arm's composed config (`configs/<arm>.yaml`) with the tuned values selected for
it (`selection.json`, `arms.<arm>.params`) set by their dotted keys. Nothing is
recomposed from today's config files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._contract.paths import apply_params, flatten
from planner._core.errors import LineageError, RunError, UsageError
from planner._core.redact import REDACTED
from planner._store.facts import arm_names
from planner._store.read import open_run


@dataclass
class ArmOfRun:
    """What the run folder says about one arm."""

    run_dir: Path
    arm: str
    contract: dict[str, Any]
    run_info: dict[str, Any]
    state: str | None
    decisions: dict[str, Any] | None
    config: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    identity: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str(self.run_info.get("name") or self.contract.get("name") or "?")

    @property
    def baseline_arm(self) -> str | None:
        return (self.contract.get("baseline") or {}).get("name")

    @property
    def decision(self) -> dict[str, Any] | None:
        for d in (self.decisions or {}).get("decisions") or []:
            if isinstance(d, dict) and d.get("arm") == self.arm:
                return d
        return None

    @property
    def code(self) -> dict[str, Any]:
        return dict((self.identity or {}).get("code") or {})


def read_arm(run_dir: str | os.PathLike, arm: str, *, need_config: bool = True) -> ArmOfRun:
    """The arm `arm` of the run folder `run_dir`; `LineageError` (P701-P704) when it cannot be read
    or rebuilt."""
    try:
        folder = open_run(run_dir)
        contract = folder.contract()
        info = folder.run_info()
        state = (folder.state() or {}).get("state")
        decisions = folder.decisions()
        identity = folder.identity()
    except (UsageError, RunError) as error:
        raise LineageError(
            "P701", str(error)
        ) from None  # the reader's message says what a run folder is
    arms = arm_names(contract)
    if arm not in arms:
        raise LineageError(
            "P702",
            f"run {folder.path} has no arm {arm!r}; its arms are {', '.join(arms) or 'none'}",
            "Name one of them.",
        )
    out = ArmOfRun(
        Path(run_dir).resolve(), arm, contract, info, state, decisions, identity=identity
    )
    if need_config:
        out.config, out.params = _effective_config(folder, contract, arm)
    return out


def _effective_config(
    folder, contract: dict[str, Any], arm: str
) -> tuple[dict[str, Any], dict[str, Any]]:

    try:
        stored = folder.configs().get(arm)
        selection = folder.selection()
    except RunError as error:
        raise LineageError(
            "P703", f"the logged config of arm {arm!r} cannot be read: {error}"
        ) from None
    if stored is None:
        raise LineageError(
            "P703",
            f"{folder.file('configs')}/{arm}.yaml is missing: the arm's config is not logged",
        )
    params: dict[str, Any] = {}
    if contract.get("tuning"):
        chosen = ((selection or {}).get("arms") or {}).get(arm) or {}
        if not chosen.get("trial_id"):
            why = chosen.get("reason") or (
                "the run has no selection.json"
                if selection is None
                else "selection.json does not list it"
            )
            raise LineageError(
                "P703",
                f"arm {arm!r} of run {folder.path} has no selected tuned config ({why})",
                "Start from an arm whose tuning selected a config (an arm that was confirmed).",
            )
        params = dict(chosen.get("params") or {})
    config = apply_params(stored, params)
    hidden = sorted(
        path for path, value in flatten(config, into_lists=True).items() if value == REDACTED
    )
    if hidden:
        raise LineageError(
            "P704",
            f"the logged config of arm {arm!r} has redacted values ({', '.join(hidden)}): the "
            "run folder does not hold the config that ran",
            "Keep credentials out of the config (read them from the environment in the trainable).",
        )
    return config, params
