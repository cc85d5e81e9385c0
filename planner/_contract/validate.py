"""Validate a contract: load, schema, compose, check; and summarize the experiment it plans.

    load_yaml -> Contract (pydantic) -> compose_arms (Hydra) -> checks -> ValidationResult

`validate(path)` never raises for a bad contract: it returns every Diagnostic.
`load_contract(path)` returns the loaded contract or raises `ContractError`
(`ContractFileError`, exit 2, when the file cannot be read at all).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner._contract import rules as _check
from planner._contract.baseline import Lineage, ResolvedBaseline, finding
from planner._contract.compose import compose_arms
from planner._contract.data_rules import check_data, check_fingerprint_files
from planner._contract.decidable import check_decidable
from planner._contract.load import LoadedYaml, load_yaml
from planner._contract.model import contract_from
from planner._contract.paths import diff_rows
from planner._contract.probe import probe_trainable
from planner._contract.rules import planned_trials
from planner._contract.schema_errors import schema_diagnostics
from planner._core.diagnostics import Diagnostic, errors
from planner._core.errors import EXIT_INVALID, EXIT_OK, EXIT_USAGE, ContractError, ContractFileError
from planner._core.lazy import lazy_import

# the rules of a `command:` trainable (its keys, metrics file, checkpoints, argparse flags) and
# what they read a script's --help with: a `trainable:` contract has no command to check and never
# loads them
command_rules = lazy_import("planner._contract.command_rules")

__all__ = ["LoadedContract", "ValidationResult", "load_contract", "planned_trials", "validate"]


@dataclass
class LoadedContract:
    """A valid contract: the model, where it came from, its YAML positions and every arm's
    effective config."""

    contract: Any  # planner._contract.model.Contract
    path: Path
    positions: LoadedYaml
    configs: dict[str, dict[str, Any]]  # arm name -> composed effective config (baseline included)
    raw_configs: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # the same, interpolations unresolved
    warnings: list[Diagnostic] = field(default_factory=list)
    baseline_source: dict[str, Any] | None = (
        None  # where a baseline from earlier work came from (docs/lineage.md)
    )
    command_flags: str | None = (
        None  # `args: argparse`: how the flags' names were checked ("checked against ...")
    )
    # `args: argparse`: the script's options the check read (or None) and why, for the trainable
    # (read once)
    script_options: tuple[Any, str] | None = None

    @property
    def dir(self) -> Path:
        return self.path.parent


@dataclass
class ValidationResult:
    """Every Diagnostic about one contract file, and the summary when the contract could be read."""

    file: str
    diagnostics: list[Diagnostic]
    summary: dict[str, Any] | None = None
    unreadable: bool = False
    loaded: LoadedContract | None = None

    @property
    def valid(self) -> bool:
        return not self.unreadable and not errors(self.diagnostics)

    @property
    def exit_code(self) -> int:
        return EXIT_USAGE if self.unreadable else (EXIT_OK if self.valid else EXIT_INVALID)

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "diagnostics": [d.as_dict() for d in self.diagnostics],
            "summary": self.summary,
        }


def load_contract(path: str | os.PathLike, lineage: Lineage | None = None) -> LoadedContract:
    """Load and check a contract; raise `ContractError` listing every error (warnings are kept on
    the result).

    `lineage` resolves a baseline from earlier work (planner._contract.baseline); without it such a
    contract is refused (P700)."""
    result = validate(path, lineage=lineage)
    if result.unreadable:
        raise ContractFileError(result.diagnostics)
    if not result.valid:
        raise ContractError(errors(result.diagnostics))
    assert result.loaded is not None
    return result.loaded


def validate(
    path: str | os.PathLike, strict: bool = False, lineage: Lineage | None = None
) -> ValidationResult:
    """Every Diagnostic about the contract at `path`, and a summary of the experiment when it is
    valid.

    `lineage` (planner._contract.baseline.Lineage) resolves a baseline from a run or a line and
    checks the contract against the project's ledger; the caller passes it (this stage reads no run
    folder)."""
    file = str(path)
    try:
        loaded = load_yaml(path)
    except ContractFileError as error:
        return ValidationResult(file, error.diagnostics, unreadable=True)
    except ContractError as error:
        return ValidationResult(file, error.diagnostics)
    diagnostics, loaded_contract = _check_loaded(loaded, Path(path), lineage)
    if strict:
        diagnostics = [_as_error(d) for d in diagnostics]
    diagnostics.sort(key=lambda d: (d.line, d.column, d.code))
    result = ValidationResult(file, diagnostics)
    if loaded_contract is not None and not errors(diagnostics):
        loaded_contract.warnings = [d for d in diagnostics if d.severity == "warning"]
        result.loaded = loaded_contract
        result.summary = summarize(loaded_contract)
    return result


def _as_error(d: Diagnostic) -> Diagnostic:
    if d.severity == "error":
        return d

    return replace(
        d, severity="error", message=d.message + " (a warning, made an error by --strict)"
    )


def _check_loaded(
    loaded: LoadedYaml, path: Path, lineage: Lineage | None = None
) -> tuple[list[Diagnostic], LoadedContract | None]:

    try:
        contract = contract_from(loaded.data)
    except ValidationError as error:
        return schema_diagnostics(error.errors(include_url=False), loaded), None
    contract_dir = path.parent
    diagnostics = _check.check_names(contract, loaded) + _check.check_static(contract, loaded)
    resolved = _resolve_baseline(contract, contract_dir, lineage)
    if resolved is not None:
        diagnostics += [_placed(d, loaded) for d in resolved.findings]
    composed = None
    if resolved is not None and resolved.config is None:
        pass  # the baseline could not be read: nothing to compose against (the findings say why)
    elif not any(d.code in ("P303", "P304", "P430") for d in diagnostics):
        # arms are told apart by name, and are not too many to compose
        composed = compose_arms(
            contract, contract_dir, None if resolved is None else resolved.config
        )
        diagnostics += _check.compose_diagnostics(contract, loaded, composed.problems)
        if not composed.problems:
            diagnostics += _check.check_matching(contract, loaded, composed)
    probe = (
        None if contract.trainable is None else probe_trainable(contract.trainable, contract_dir)
    )
    diagnostics += _check.check_trainable(contract, loaded, probe)
    flags = options = None
    if contract.command is not None:
        diagnostics += command_rules.check_program(contract, loaded)
        diagnostics += command_rules.check_command(contract, loaded, composed)
        found, flags, options = command_rules.check_flags(contract, loaded, composed)
        diagnostics += found
        diagnostics += command_rules.check_outputs(contract, loaded, composed)
    from planner._contract.credentials import check_credentials, without_credentials

    diagnostics = without_credentials(
        diagnostics + check_credentials(contract, loaded, composed, contract_dir), loaded, composed
    )
    diagnostics += _check.check_warnings(contract, loaded, composed)

    diagnostics += check_data(contract, loaded)
    diagnostics += check_fingerprint_files(contract, loaded, contract_dir)
    diagnostics += check_decidable(contract, loaded)
    configs = composed.configs if composed is not None and not composed.problems else {}
    if lineage is not None and configs and not errors(diagnostics):
        diagnostics += [_placed(d, loaded) for d in lineage.check(contract, configs, contract_dir)]
    raw = composed.raw if composed is not None and not composed.problems else {}
    return diagnostics, LoadedContract(
        contract,
        path,
        loaded,
        configs,
        raw_configs=raw,
        baseline_source=None if resolved is None else resolved.source,
        command_flags=flags,
        script_options=options,
    )


def _resolve_baseline(
    contract, contract_dir: Path, lineage: Lineage | None
) -> ResolvedBaseline | None:
    """The baseline from earlier work, resolved by the caller's `lineage`; None for a baseline of
    the contract's own."""
    if not contract.baseline_from_earlier_work:
        return None
    if lineage is None:
        return ResolvedBaseline(
            None,
            findings=[
                finding(
                    "P700",
                    "the baseline comes from a run or a line, which this caller cannot read",
                    "Validate it with `plan validate` (or pass a lineage to validate()).",
                )
            ],
        )
    return lineage.resolve_baseline(contract, contract_dir)


def _placed(d: Diagnostic, loaded: LoadedYaml) -> Diagnostic:
    """A finding from the lineage, placed at its contract node (`path`, dotted) in the file."""
    path = tuple(int(p) if p.isdigit() else p for p in d.path.split(".")) if d.path else ()
    line, column = loaded.position(path)
    return replace(d, file=loaded.file, line=line, column=column)


def summarize(loaded: LoadedContract) -> dict[str, Any]:
    """The experiment the contract plans, as JSON-able data."""
    contract = loaded.contract
    base = loaded.configs[contract.baseline.name]
    arms = []
    for arm in contract.all_arms:
        diff = [] if arm is contract.baseline else diff_rows(base, loaded.configs[arm.name])
        arms.append(
            {
                "name": arm.name,
                "baseline": arm is contract.baseline,
                "overrides": list(arm.overrides),
                "diff": diff,
            }
        )
    planned = planned_trials(contract)
    budget = contract.budget
    return {
        "name": contract.name,
        "hypothesis": contract.hypothesis,
        "factor": {"name": contract.factor.name, "keys": list(contract.factor.keys)},
        "metric": {
            "name": contract.metric.name,
            "mode": contract.metric.mode,
            "decision": contract.metric.decision_metric,
            "decision_mode": contract.metric.decision_mode,
        },
        "arms": arms,
        "planned_trials": planned,
        "budget": {
            "unit": budget.unit,
            "exposure": budget.exposure,
            "max_trials": budget.max_trials,
            "planned_exposure": planned["total"] * budget.exposure,
            "max_wall_time": budget.max_wall_time,
            "max_trial_time": budget.max_trial_time,
            # the fields as they are: Resources' own serializer is never compiled for a summary
            "resources": {**dict(budget.resources), "custom": dict(budget.resources.custom)},
        },
        "seeds": list(contract.seeds),
        "tuning_seeds": list(contract.tuning.seeds) if contract.tuning else [],
        "baseline_from": loaded.baseline_source,
        "command": _command_summary(contract, loaded.command_flags),
    }


def _command_summary(contract, flags: str | None = None) -> dict[str, Any] | None:
    """How a `command:` trainable gets its seed, budget and metrics (None for a `trainable:`)."""
    spec = contract.command_spec
    if spec is None:
        return None
    metrics = spec.metrics
    return {
        "run": spec.run,
        "args": spec.args,
        "flags": flags,
        "seed_key": spec.seed_key,
        "budget_key": spec.budget_key,
        "metrics": None
        if metrics is None
        else {
            "file": metrics.file,
            "pattern": metrics.pattern,
            "stream": metrics.stream or "stdout",
            "format": metrics.format,
            "step": metrics.step,
            "step_base": 1 if metrics.step_base is None else metrics.step_base,
            "names": metrics.columns(contract.metric.name, contract.metric.heldout),
        },
        "checkpoint": None if spec.checkpoint is None else spec.checkpoint.model_dump(),
    }
