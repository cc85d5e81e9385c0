"""The project's history as `plan validate` needs it: a baseline from earlier work, and the
ledger's warnings.

`ProjectLineage(runs_dir)` is the `Lineage` that the contract stage receives
(planner._contract.baseline): validate cannot read run folders itself, so its
caller passes this object, which reads them. It resolves `baseline: {from_run,
arm}` and `baseline: {line}` to the arm's logged effective config, and checks
the contract against the ledger of `runs_dir` (a reused name, a repeated test).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner._contract import (
    validate as contract_stage,  # looked up at each call: one validate, patchable
)
from planner._contract.baseline import ResolvedBaseline, finding
from planner._core.diagnostics import Diagnostic
from planner._core.errors import LineageError
from planner._core.lazy import lazy_import
from planner._lineage.ledger import config_sha256, read, run_key, runs_dir_of

# what reads run folders (the history of runs, an arm of a run, its claims, a run's states): loaded
# when a baseline comes from a run or a line, or the ledger has records; `plan validate` of a new
# project's contract never needs them
history = lazy_import("planner._lineage.history")
lineage_source = lazy_import("planner._lineage.source")
claims = lazy_import("planner._store.claims")
status = lazy_import("planner._core.status")

if TYPE_CHECKING:
    from planner._lineage.source import ArmOfRun


class ProjectLineage:
    """Reads run folders and the ledger of `runs_dir` for validate; remembers the last baseline it
    resolved."""

    def __init__(self, runs_dir: str | os.PathLike = "runs"):
        self.runs_dir = Path(runs_dir)
        self.resolved: ResolvedBaseline | None = None

    # -- the baseline -----------------------------------------------------------
    def resolve_baseline(self, contract: Any, contract_dir: Path) -> ResolvedBaseline:
        ref = contract.baseline
        try:
            if ref.from_run is not None:
                run_dir, arm, via = self._from_run(ref.from_run, contract_dir), ref.arm, None
            else:
                run_dir, arm, via = self._from_line(ref.line)
            source = lineage_source.read_arm(run_dir, arm)
        except LineageError as refused:
            where = ("baseline", "from_run" if ref.from_run is not None else "line")
            self.resolved = ResolvedBaseline(
                None, findings=[finding(refused.code, refused.message, refused.hint, path=where)]
            )
            return self.resolved
        self.resolved = self._describe(source, via, contract, contract_dir)
        return self.resolved

    def _from_run(self, text: str, contract_dir: Path) -> Path:
        path = Path(text)
        if path.is_absolute():
            return path
        here = Path(contract_dir) / path
        if not here.exists() and Path(text).exists():
            rel = os.path.relpath(Path(text).resolve(), Path(contract_dir).resolve())
            raise LineageError(
                "P701",
                f"{here} does not exist (from_run is relative to the contract's folder, like "
                "config.dir)",
                f"From the contract's folder that run is {rel!r}.",
            )
        return here

    def _from_line(self, line: str) -> tuple[Path, str, str]:
        ledger = read(self.runs_dir)
        promotion = ledger.in_force(line)
        if promotion is None:
            if line not in ledger.lines():
                known = ", ".join(ledger.lines()) or "none yet"
                raise LineageError(
                    "P705",
                    f"the ledger {ledger.path} has no line of work named {line!r} (lines: {known})",
                    "Name a line that `plan log` shows, or use --runs-dir to point at the "
                    "project's runs.",
                )
            raise LineageError(
                "P705",
                f"line {line!r} has no promoted baseline in force (none promoted, or every "
                "promotion withdrawn)",
                "Promote an accepted arm with `plan promote`, or start from a run with "
                "`baseline: {from_run: RUN_DIR, arm: A}`.",
            )
        run = Path(str(promotion["run"]))
        return (run if run.is_absolute() else ledger.runs_dir / run), str(promotion["arm"]), line

    def _describe(
        self, source: ArmOfRun, via: str | None, contract: Any, contract_dir: Path
    ) -> ResolvedBaseline:
        ledger = read(runs_dir_of(source.run_dir))
        key = run_key(source.run_dir, ledger.runs_dir)
        line = via or history.line_of(ledger, source.run_dir)
        findings: list[Diagnostic] = []
        where = ("baseline", "from_run") if via is None else ("baseline", "line")
        decision = source.decision
        if source.arm == source.baseline_arm:
            findings.append(
                finding(
                    "P930",
                    f"arm {source.arm!r} was the baseline of run {key}, not a tested arm: "
                    "no decision accepted it",
                    "Start from an accepted, promoted arm, or say in "
                    "the hypothesis why this baseline stays.",
                    path=where,
                    severity="warning",
                )
            )
        elif (
            decision is not None
            and decision.get("decision") == "accept"
            and claims.accepted(source.decisions, source.arm)
        ):
            findings.append(
                finding(
                    "P930",
                    f"the decision for arm {source.arm!r} in run {key} says accept, but its "
                    "own numbers (effect, CI, min_effect) do not give accept: its decisions.json "
                    "was "
                    "edited or is damaged",
                    "A baseline should be a config that earned its place: "
                    "start from an arm its own numbers accept.",
                    path=where,
                    severity="warning",
                )
            )
        elif (
            decision is None
            or decision.get("decision") != "accept"
            or source.state != status.RunState.COMPLETED
        ):
            what = decision.get("decision") if decision else "no decision"
            why = f" ({decision.get('reason')})" if decision and decision.get("reason") else ""
            state = (
                ""
                if source.state == status.RunState.COMPLETED
                else f"; the run is {source.state or 'of unknown state'}"
            )
            findings.append(
                finding(
                    "P930",
                    f"the decision for arm {source.arm!r} in run {key} was {what}{why}, "
                    f"not accept{state}",
                    "A baseline should be a config that earned its place: "
                    "start from an accepted arm of a completed run.",
                    path=where,
                    severity="warning",
                )
            )
        promotion = ledger.promotion_of(key, source.arm)
        in_force = ledger.in_force(line)
        promoted = None
        if promotion is None:
            findings.append(
                finding(
                    "P931",
                    f"arm {source.arm!r} of run {key} was never promoted (ledger {ledger.path})",
                    f"Promote it first: plan promote {source.run_dir} --arm {source.arm}",
                    path=where,
                    severity="warning",
                )
            )
        elif promotion["withdrawn"] is not None:
            w = promotion["withdrawn"]
            findings.append(
                finding(
                    "P931",
                    f"the promotion of arm {source.arm!r} of run {key} was withdrawn at "
                    f"{w.get('time')} ({w.get('note') or 'no note'})",
                    "Start from the line's baseline in force (see plan log).",
                    path=where,
                    severity="warning",
                )
            )
        else:
            promoted = promotion.get("time")
            if in_force is not None and (in_force.get("run"), in_force.get("arm")) != (
                key,
                source.arm,
            ):
                findings.append(
                    finding(
                        "P931",
                        f"arm {source.arm!r} of run {key} was promoted at {promoted}, but "
                        f"line {line!r} has moved on: its baseline in force is arm "
                        f"{in_force.get('arm')!r} of run {in_force.get('run')}",
                        "Start from the baseline in force, or say why not.",
                        path=where,
                        severity="warning",
                    )
                )
        findings += _code_findings(source, contract, contract_dir, where)
        findings += _selected_on_these_seeds(source, contract, key, where)
        params = ", ".join(f"{k}={v!r}" for k, v in source.params.items())
        description = (
            f"arm {source.arm!r} of run {key}"
            + (f" (line {line!r} in force)" if via else "")
            + f": decision {decision.get('decision') if decision else 'none'}, "
            + (f"promoted {promoted}" if promoted else "not promoted")
            + (f"; tuned values {params}" if params else "")
        )
        return ResolvedBaseline(
            source.config,
            findings=findings,
            source={
                "kind": "line" if via else "run",
                "run": key,
                "run_dir": str(source.run_dir),
                "arm": source.arm,
                "line": line,
                "name": source.name,
                "contract_sha256": source.run_info.get("contract_sha256"),
                "decision": decision.get("decision") if decision else None,
                "promoted": promoted,
                "params": source.params,
                "config_sha256": config_sha256(source.config or {}),
                "code": source.code,
                "description": description,
            },
        )

    # -- the ledger's warnings about this contract ------------------------------
    def check(
        self, contract: Any, configs: dict[str, dict[str, Any]], contract_dir: Path
    ) -> list[Diagnostic]:
        ledger = read(self.runs_dir)
        if not ledger.records:  # nothing ran yet: no earlier name or test to warn about
            return []

        out: list[Diagnostic] = []
        sha = contract.sha256()
        edited = history.edited_before(ledger, contract.name, sha)
        if edited:
            last = edited[-1]
            out.append(
                finding(
                    "P933",
                    f"contract name {contract.name!r} was used by run {last.key} "
                    f"({history.decisions_text(last)}) with a different contract (sha256 "
                    f"{str(last.started.get('contract_sha256'))[:12]} then, {sha[:12]} now)"
                    + (f", and by {len(edited) - 1} more" if len(edited) > 1 else ""),
                    "A changed recipe is a new named control: give this contract a new name.",
                    path=("name",),
                    severity="warning",
                )
            )
        baseline = configs.get(contract.baseline.name)
        if baseline is not None:
            key = (config_sha256(baseline), tuple(sorted(contract.factor.keys)))
            earlier = history.earlier_tests(
                ledger, key, trainable=history.contract_trainable(contract)
            )
            if earlier:
                rep = history.repetition(earlier, contract.acceptance.alpha, contract.factor.name)
                out.append(
                    finding(
                        "P934",
                        rep["sentence"],
                        "Report every test of it, or lower alpha so that the family-wise alpha "
                        "stays "
                        "at the level you claim.",
                        path=("factor",),
                        severity="warning",
                    )
                )
        return out


def _selected_on_these_seeds(
    source: ArmOfRun, contract: Any, key: str, where: tuple[str, ...]
) -> list[Diagnostic]:
    """P936: the baseline's tuned values were selected in its run on tuning seeds this contract
    confirms on (P402 within one run): those seeds' results chose the baseline's config, and its
    confirmation on them flatters it."""
    tuning = source.contract.get("tuning") if isinstance(source.contract, dict) else None
    seeds = tuning.get("seeds") if isinstance(tuning, dict) else None
    if not source.params or not isinstance(seeds, list):
        return []
    shared = sorted({s for s in seeds if isinstance(s, int)} & set(contract.seeds))
    if not shared:
        return []
    return [
        finding(
            "P936",
            f"the baseline's tuned values "
            f"({', '.join(f'{k}={v!r}' for k, v in source.params.items())}) "
            f"were selected in run {key} on its tuning seeds {shared}, which this contract "
            f"confirms on: "
            "those seeds' results chose the baseline's config, so its confirmation on them "
            "flatters it",
            f"Confirm on seeds the baseline was not tuned on (drop {', '.join(map(str, shared))} "
            f"from seeds).",
            path=("seeds",),
            severity="warning",
        )
    ]


def _code_findings(
    source: ArmOfRun, contract: Any, contract_dir: Path, where: tuple[str, ...]
) -> list[Diagnostic]:
    """P932: the trainable (its name, its source file's sha256) differs from the one that ran the
    arm."""

    then = source.code
    if not then:
        return [
            finding(
                "P932",
                f"run {source.run_dir} has no code identity (identity.json): it cannot be told "
                "whether today's trainable is the one that earned this baseline",
                path=where,
                severity="warning",
            )
        ]
    now_trainable = contract.trainable or f"command: {contract.command}"
    if then.get("trainable") != now_trainable:
        return [
            finding(
                "P932",
                f"the trainable differs from the one that ran arm {source.arm!r}: "
                f"{then.get('trainable')!r} then, {now_trainable!r} now",
                "The baseline's numbers came "
                "from other code: re-run the baseline, or use the same trainable.",
                path=where,
                severity="warning",
            )
        ]
    if contract.trainable is None:
        return []
    # deferred: identity brings psutil, subprocess and importlib.metadata, which `plan validate` of
    # a contract without a baseline from a run does not need, and they slow its start-up
    from planner._store.identity import code_identity, trainable_search_path

    now = code_identity(contract.trainable, trainable_search_path(Path(contract_dir)))
    a, b = then.get("trainable_source_sha256"), now.get("trainable_source_sha256")
    if a != b:
        return [
            finding(
                "P932",
                f"the trainable's code differs from the code that earned this baseline: "
                f"{now.get('trainable_file') or then.get('trainable_file')} has sha256 "
                f"{str(a)[:12]} in "
                f"run {source.run_dir.name}, {str(b)[:12]} now",
                "The baseline's numbers came from other "
                "code: re-run it (plan reeval) or say in the hypothesis what changed.",
                path=where,
                severity="warning",
            )
        ]
    return []


def validate(path: str | os.PathLike, strict: bool = False, runs_dir: str | os.PathLike = "runs"):
    """`plan validate`: the contract stage's validate, with the project's history of `runs_dir`."""
    return contract_stage.validate(path, strict=strict, lineage=ProjectLineage(runs_dir))


def load_contract(path: str | os.PathLike, runs_dir: str | os.PathLike = "runs"):
    """`planner.load_contract`: load a contract whose baseline may come from a run or a line."""
    return contract_stage.load_contract(path, lineage=ProjectLineage(runs_dir))
