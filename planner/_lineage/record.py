"""What `plan run` tells the project ledger: its start (with the line, the baseline and the forking
paths known then) and its end (state and decisions). The facts known at the start are also kept in
the run folder as `lineage.json`, which the run's report shows.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

from planner._core.errors import PlannerError
from planner._core.redact import Redactor
from planner._lineage import history
from planner._lineage.ledger import RunEntry, append, config_sha256, read, run_key, runs_dir_of
from planner._store.read import read_json
from planner._store.writer import write_json

LINEAGE_FILE = "lineage.json"


def run_started(
    run_dir: Path,
    contract: Any,
    configs: dict[str, dict[str, Any]],
    baseline_source: dict[str, Any] | None,
    *,
    resumed: bool = False,
) -> dict[str, Any] | None:
    """Append run_started (or run_resumed) to the ledger beside the run; write lineage.json (new
    runs)."""
    runs_dir = runs_dir_of(run_dir)
    key = run_key(run_dir, runs_dir)
    if resumed:  # a note: the start, with its facts, is in the ledger already
        try:
            append(runs_dir, "run_resumed", run=key, pid=os.getpid(), host=socket.gethostname())
        except PlannerError as error:
            print(f"warning: the project ledger did not get this resume ({error})", file=sys.stderr)
        return None
    ledger = read(runs_dir)
    sha = contract.sha256()
    base_sha = config_sha256(configs[contract.baseline.name])
    origin = None
    if baseline_source:
        origin = {
            "run": run_key(baseline_source["run_dir"], runs_dir),
            "arm": baseline_source["arm"],
            "via_line": baseline_source.get("kind") == "line",
            "decision": baseline_source.get("decision"),
            "promoted": baseline_source.get("promoted"),
        }
    line = baseline_source["line"] if baseline_source else contract.name
    factor = {"name": contract.factor.name, "keys": list(contract.factor.keys)}
    trainable = history.contract_trainable(contract)
    earlier = history.earlier_tests(
        ledger, (base_sha, tuple(sorted(factor["keys"]))), trainable=trainable
    )
    edited = history.edited_before(ledger, contract.name, sha)
    facts = {
        "line": line,
        "ledger": str(ledger.path),
        "baseline": {"arm": contract.baseline.name, "config_sha256": base_sha, "from": origin},
        "repetition": history.repetition(earlier, contract.acceptance.alpha, factor["name"])
        if earlier
        else None,
        "edited_after_decisions": [
            {
                "run": e.key,
                "contract_sha256": e.started.get("contract_sha256"),
                "decisions": history.decisions_text(e),
            }
            for e in edited
        ],
    }
    append(
        runs_dir,
        "run_started",
        run=key,
        run_id=Path(run_dir).name,
        name=contract.name,
        contract_sha256=sha,
        line=line,
        hypothesis=contract.hypothesis,
        factor=factor,
        baseline=facts["baseline"],
        arms=[a.name for a in contract.arms],
        alpha=contract.acceptance.alpha,
        trainable=trainable,
        pid=os.getpid(),
        host=socket.gethostname(),
    )
    write_json(
        Path(run_dir) / LINEAGE_FILE, Redactor.for_run().scrub(facts)
    )  # the ledger's free text, scrubbed
    return facts


def run_ended(
    run_dir: Path, state: str, reason: str, decisions: list[dict[str, Any]], alpha: float
) -> None:
    """Append run_ended; a ledger that cannot be written is a warning (the run folder stays the
    record)."""
    try:
        runs_dir = runs_dir_of(run_dir)
        append(
            runs_dir,
            "run_ended",
            run=run_key(run_dir, runs_dir),
            state=state,
            reason=reason,
            alpha=alpha,
            decisions=[
                {
                    k: d.get(k)
                    for k in ("arm", "decision", "effect", "ci_low", "ci_high", "p_value", "reason")
                }
                for d in decisions
            ],
        )
    except (PlannerError, OSError) as error:
        print(
            f"warning: the project ledger did not get this run's end ({error}); plan log reads it "
            f"from the "
            "run folder instead",
            file=sys.stderr,
        )
    _untested_repetition(run_dir, state, decisions)


def _untested_repetition(run_dir: Path, state: str, decisions: list[dict[str, Any]]) -> None:
    """A run that tested nothing (interrupted, failed, every decision incomplete or invalid) does
    not count itself among the repeated tests: lineage.json's repetition is rewritten to the
    earlier tests alone, and the repetition as the run started is kept beside it (`as_tested`). A
    resumed run that then tests something counts itself again: the repetition it started with comes
    back."""
    try:
        facts = read_json(Path(run_dir) / LINEAGE_FILE, root=Path(run_dir))
    except (PlannerError, OSError):
        return
    rep = (facts or {}).get("repetition")
    if not rep:
        return
    if history.completed_test(RunEntry("", {}, {"state": str(state), "decisions": decisions})):
        if rep.get("this_run_tested") is not False or not isinstance(rep.get("as_tested"), dict):
            return
        rep = {**rep["as_tested"], "this_run_tested": True}
    # untested again after a resume: the sentence names this ending's state, not the one before
    else:
        if rep.get("this_run_tested") is False and isinstance(rep.get("as_tested"), dict):
            rep = rep["as_tested"]
        earlier = rep.get("earlier") or []
        alphas = [float(rep.get("alpha") or 0.05)] * len(earlier)
        rep = {
            **rep,
            "count": len(earlier),
            "this_run_tested": False,
            "family_alpha": round(history.family_alpha(alphas), 6) if alphas else 0.0,
            "sentence": (
                f"this run tested nothing (state {state}; no decision that says what the test "
                f"found), "
                f"so it adds no test: the factor was tested {len(earlier)} "
                f"time{'s' if len(earlier) != 1 else ''} before against this baseline "
                f"({'; '.join(str(e.get('run')) for e in earlier)})"
            ),
            "as_tested": {k: v for k, v in rep.items() if k != "this_run_tested"},
        }
    try:
        write_json(Path(run_dir) / LINEAGE_FILE, {**(facts or {}), "repetition": rep})
    except (PlannerError, OSError) as error:
        print(f"warning: lineage.json was not updated ({error})", file=sys.stderr)


def lineage_lines(facts: dict[str, Any] | None) -> list[str]:
    """The run report's sentences about its place in the project (from lineage.json)."""
    if not facts:
        return []
    base = facts.get("baseline") or {}
    origin = base.get("from")
    out = [f"Line of work: {facts.get('line')}."]
    if origin:
        out.append(
            f"Baseline {base.get('arm')!r}: arm {origin.get('arm')!r} of run {origin.get('run')}"
            + (" (the line's baseline in force)" if origin.get("via_line") else "")
            + f", decision {origin.get('decision') or 'none'}, "
            + (f"promoted {origin['promoted']}." if origin.get("promoted") else "not promoted.")
        )
    else:
        out.append(f"Baseline {base.get('arm')!r}: the contract's own.")
    return out + forking_lines(facts)


def forking_lines(facts: dict[str, Any] | None) -> list[str]:
    """The forking paths a run's lineage.json records: a repeated test, an edited contract (none:
    [])."""
    out = []
    rep = (facts or {}).get("repetition")
    if rep:
        out.append(f"Forking paths: {rep['sentence']}.")
    for e in (facts or {}).get("edited_after_decisions") or []:
        out.append(
            f"Forking paths: this contract's name was run before with another contract (run "
            f"{e['run']}, "
            f"sha256 {str(e.get('contract_sha256'))[:12]}, {e['decisions']}): it was edited after "
            f"an earlier "
            "run of it had reported decisions."
        )
    return out
