"""A baseline from earlier work, as the contract stage receives it (docs/lineage.md).

`plan validate` cannot read a run folder: that is a later stage's job (the
layering rule, docs/architecture.md). A contract whose baseline is
`{from_run, arm}` or a line is validated with a `Lineage` passed in by the
caller: an object that resolves the reference to the arm's logged effective
config (`ResolvedBaseline`) and checks the contract against the project's
ledger. Its findings are Diagnostics whose `path` names the contract node they
are about; validate places them at that node's line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from planner._core.diagnostics import Diagnostic, Severity


@dataclass
class ResolvedBaseline:
    """What a baseline reference stands for: the config (None when it could not be read) and where
    it came from."""

    config: dict[str, Any] | None
    source: dict[str, Any] = field(
        default_factory=dict
    )  # run, arm, line, decision, promoted, params, ...
    findings: list[Diagnostic] = field(default_factory=list)  # errors P700-P719, warnings P930-P939


class Lineage(Protocol):
    """What validate asks of the project's history (implemented above this stage)."""

    def resolve_baseline(self, contract: Any, contract_dir: Path) -> ResolvedBaseline: ...

    def check(
        self, contract: Any, configs: dict[str, dict[str, Any]], contract_dir: Path
    ) -> list[Diagnostic]: ...


def finding(
    code: str,
    message: str,
    hint: str = "",
    *,
    path: tuple[Any, ...] = ("baseline",),
    severity: Severity = "error",
) -> Diagnostic:
    """A Diagnostic about the contract node at `path`, to be placed by validate."""
    return Diagnostic(
        code=code,
        severity=severity,
        message=message,
        hint=hint,
        path=".".join(str(p) for p in path),
    )
