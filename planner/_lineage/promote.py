"""`plan promote`: an accepted arm of a completed run becomes the baseline of its line of work.

Promotion is its own state, kept in the project ledger (planner._lineage.ledger),
never in the run folder: the run's decisions stay what the statistics said. Only
an arm whose decision is `accept` in a run whose state is `completed` can be
promoted; everything else is refused with its rule code (P710-P714), and there
is no way to force it. A withdrawal is recorded, with a note, and the line's
baseline in force falls back to its previous promotion still in force.

A note is kept in the ledger as it is typed, so a note holding a credential (a token's shape, a
`password=...`, a credential-named environment variable's value) is refused at the door (exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from planner._core.errors import LineageError, UsageError
from planner._core.redact import Redactor, credential_in_text
from planner._core.status import RunState
from planner._lineage import history
from planner._lineage.ledger import append, config_sha256, read, run_key, runs_dir_of
from planner._lineage.source import read_arm
from planner._store.claims import accepted


def _check_note(note: str | None) -> None:
    """UsageError when the note holds a credential (what the scrubber would cut); the value is
    never printed."""
    if note and Redactor.for_run().text(note) != note:
        what = credential_in_text(note) or "the value of a credential-named environment variable"
        raise UsageError(
            f"the --note holds a credential ({what}); a note is kept in the project ledger as "
            "written, so it never holds one: say why without it"
        )


def promote(
    run_dir: str | os.PathLike,
    arm: str,
    note: str | None = None,
    runs_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Record the promotion of `arm` of `run_dir` in the ledger; `LineageError` when it may not be
    promoted."""
    _check_note(note)
    source = read_arm(run_dir, arm, need_config=False)
    where = f"run {Path(run_dir)}"
    if source.state != RunState.COMPLETED:
        raise LineageError(
            "P710",
            f"{where} is {source.state or 'of unknown state (no state.json)'}, not completed: only "
            "an accepted arm of a completed run can be promoted",
            "Finish it first (plan run --resume RUN_DIR), or promote from a completed run.",
        )
    if arm == source.baseline_arm:
        raise LineageError(
            "P712",
            f"arm {arm!r} is the baseline of {where}: it was not tested, so no decision accepted "
            f"it",
            "Promote a treatment arm that was accepted; the baseline in force stays as it is.",
        )
    decision = source.decision
    if decision is None:
        raise LineageError(
            "P712",
            f"{where} has no decision for arm {arm!r} (decisions.json is missing or does not "
            "list it)",
        )
    if decision.get("decision") != "accept":
        raise LineageError(
            "P711",
            f"the decision for arm {arm!r} in {where} was {decision.get('decision')}"
            + (f" ({decision['reason']})" if decision.get("reason") else "")
            + ": only an accepted arm can be promoted",
            "A rejected or inconclusive arm stays in the log with its decision; the baseline does "
            "not move.",
        )
    if (
        accepted(source.decisions, arm) is not None
    ):  # a forged or damaged decisions.json: its numbers say otherwise
        raise LineageError(
            "P711",
            f"the decision for arm {arm!r} in {where} says accept, but its own numbers "
            "(effect, CI, min_effect) do not give accept: decisions.json was edited or is damaged",
            "Nothing is promoted on a claim its own numbers do not support; re-run or `plan "
            "reeval` the arm.",
        )
    if (source.decisions or {}).get("run_state", "completed") != RunState.COMPLETED:
        raise LineageError(
            "P710",
            f"the decisions of {where} were made in state "
            f"{(source.decisions or {}).get('run_state')}, "
            "not completed",
        )
    source = read_arm(
        run_dir, arm
    )  # P703/P704: the promoted config must be rebuildable from the folder
    base = Path(runs_dir) if runs_dir is not None else runs_dir_of(run_dir)
    ledger = read(base)
    key = run_key(run_dir, base)
    line = history.line_of(ledger, run_dir)
    in_force = ledger.in_force(line)
    if in_force is not None and (in_force.get("run"), in_force.get("arm")) == (key, arm):
        raise LineageError(
            "P713",
            f"arm {arm!r} of {key} is already the baseline in force of line {line!r} "
            f"(promoted {in_force.get('time')})",
        )
    code = source.code
    return append(
        base,
        "promoted",
        run=key,
        arm=arm,
        line=line,
        note=note or "",
        name=source.name,
        contract_sha256=source.run_info.get("contract_sha256"),
        decision={
            k: decision.get(k) for k in ("decision", "effect", "ci_low", "ci_high", "p_value")
        },
        config_sha256=config_sha256(source.config or {}),
        params=source.params,
        code={k: code.get(k) for k in ("trainable", "trainable_source_sha256", "commit", "dirty")},
        replaces=None
        if in_force is None
        else {"run": in_force.get("run"), "arm": in_force.get("arm")},
    )


def withdraw(
    run_dir: str | os.PathLike,
    arm: str,
    note: str | None,
    runs_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Record the withdrawal of the promotion of `arm` of `run_dir`; returns it with the baseline
    now in force."""
    if not note or not note.strip():
        raise UsageError("a withdrawal needs --note: say why the promotion is withdrawn")
    _check_note(note)
    base = Path(runs_dir) if runs_dir is not None else runs_dir_of(run_dir)
    ledger = read(base)
    key = run_key(run_dir, base)
    promotion = ledger.promotion_of(key, arm)
    if promotion is None or promotion["withdrawn"] is not None:
        state = (
            "was withdrawn already"
            if promotion is not None
            else f"was never promoted (ledger {ledger.path})"
        )
        raise LineageError(
            "P714", f"arm {arm!r} of {key} {state}: there is no promotion to withdraw"
        )
    record = append(
        base, "withdrawn", run=key, arm=arm, line=promotion.get("line"), note=note.strip()
    )
    now = read(base).in_force(str(promotion.get("line")))
    return {
        **record,
        "in_force": None if now is None else {"run": now.get("run"), "arm": now.get("arm")},
    }
