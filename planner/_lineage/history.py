"""What the ledger says about a project: lines of work, their baselines, and the forking paths.

Pure functions of a `Ledger` (planner._lineage.ledger). A *line of work* is
named by the first contract of a chain: a run whose baseline is its contract's
own starts (or continues) the line of its contract's name; a run whose baseline
comes from a run or a line continues that run's line. Two runs test *the same
hypothesis* when their baselines have the same effective config (its sha256)
and their factors the same keys; a repeated test is a run that completed with decisions (not
incomplete or invalid) of the same trainable. Repeating a test at level alpha k times gives
at least one false accept with probability 1 - (1 - alpha)^k when nothing is
there (the family-wise alpha the repetitions imply).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from planner._core.errors import PlannerError
from planner._core.text import number
from planner._lineage.ledger import Ledger, RunEntry, read, run_key, runs_dir_of
from planner._store.read import open_run


def family_alpha(alphas: list[float]) -> float:
    """P(at least one false accept) over independent tests at these levels: 1 - prod(1 - alpha)."""
    return 1.0 - math.prod(1.0 - float(a) for a in alphas)


def hypothesis_key(started: dict[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """(baseline config sha256, sorted factor keys) of a run_started record."""
    baseline = started.get("baseline") or {}
    keys = (started.get("factor") or {}).get("keys") or []
    return baseline.get("config_sha256"), tuple(sorted(str(k) for k in keys))


TESTED = (
    "accept",
    "reject",
    "inconclusive",
)  # a decision that reports what the test found (not incomplete, invalid)


def completed_test(entry: RunEntry) -> bool:
    """True when the run completed and at least one of its decisions says what the test found: an
    incomplete, invalid or interrupted run tested nothing (it cannot be a false accept)."""
    ended = entry.ended or {}
    return ended.get("state") == "completed" and any(
        isinstance(d, dict) and d.get("decision") in TESTED for d in ended.get("decisions") or []
    )


def contract_trainable(contract: Any) -> str:
    """A contract's trainable as identity.json's `code.trainable` spells it: `module:function` or
    `command: ...`."""
    return str(contract.trainable) if contract.trainable else f"command: {contract.command_line}"


def trainable_of(ledger: Ledger, entry: RunEntry) -> str | None:
    """The trainable a run used (`module:function` or `command: ...`): from its run_started record,
    else its run folder's identity.json (a ledger written before run_started named it); None when
    neither says."""
    if entry.started.get("trainable"):
        return str(entry.started["trainable"])
    try:
        code = (open_run(ledger.runs_dir / entry.key).identity() or {}).get("code") or {}
    except PlannerError:
        return None
    return str(code["trainable"]) if code.get("trainable") else None


def earlier_tests(
    ledger: Ledger,
    key: tuple[str | None, tuple[str, ...]],
    before: int | None = None,
    *,
    trainable: str | None = None,
) -> list[RunEntry]:
    """Runs that tested the same factor against the same baseline, completed with decisions that
    say what they found (`completed_test`), in ledger order; with `trainable`, only runs of that
    trainable (a run whose trainable is not known counts: a repetition is not dropped for want of a
    record)."""
    return [
        e
        for e in sorted(ledger.runs().values(), key=lambda e: e.order)
        if e.decided
        and completed_test(e)
        and hypothesis_key(e.started) == key
        and (before is None or e.order < before)
        and (trainable is None or trainable_of(ledger, e) in (None, trainable))
    ]


RESULT_FIELDS = ("arm", "decision", "effect", "ci_low", "ci_high", "p_value")


def result_signature(entry: RunEntry) -> tuple[Any, ...] | None:
    """What makes two runs the same test repeated bit for bit: the same contract (its sha256), the
    same trainable, and every decision with the same effect, interval and p-value to the last bit.
    None when the run reported no number to compare (a run without an effect is never called a
    replication)."""
    rows = [d for d in (entry.ended or {}).get("decisions") or [] if isinstance(d, dict)]
    if not rows or all(d.get("effect") is None for d in rows):
        return None
    numbers = tuple(sorted((tuple(repr(d.get(k)) for k in RESULT_FIELDS) for d in rows), key=str))
    return entry.started.get("contract_sha256"), entry.started.get("trainable"), numbers


def split_replications(
    earlier: list[RunEntry], this: RunEntry | None = None
) -> tuple[list[RunEntry], list[RunEntry]]:
    """(distinct tests, replications) of `earlier`, in order: a run whose results repeat bit for
    bit those of a test before it, or of `this` run, adds no information and is a replication, not
    another test."""
    seen = set() if this is None or result_signature(this) is None else {result_signature(this)}
    tests: list[RunEntry] = []
    copies: list[RunEntry] = []
    for e in earlier:
        signature = result_signature(e)
        if signature is not None and signature in seen:
            copies.append(e)
            continue
        if signature is not None:
            seen.add(signature)
        tests.append(e)
    return tests, copies


def edited_before(ledger: Ledger, name: str, sha: str, before: int | None = None) -> list[RunEntry]:
    """Earlier runs of a contract of the same name but another hash that had reported decisions
    saying what a test found (accept, reject, inconclusive): a run whose every decision was
    incomplete or invalid showed no result to tune the recipe to, and mending a contract after it
    is no forking path."""
    return [
        e
        for e in sorted(ledger.runs().values(), key=lambda e: e.order)
        if e.decided
        and any(
            isinstance(d, dict) and d.get("decision") in TESTED
            for d in (e.ended or {}).get("decisions") or []
        )
        and e.started.get("name") == name
        and e.started.get("contract_sha256") != sha
        and (before is None or e.order < before)
    ]


def decisions_text(entry: RunEntry) -> str:
    """'inconclusive', or 'adamw accept, lion reject' for a run of several arms."""
    rows = (entry.ended or {}).get("decisions") or []
    if len(rows) == 1:
        return str(rows[0].get("decision"))
    return ", ".join(f"{d.get('arm')} {d.get('decision')}" for d in rows) or "no decision"


def repetition(
    earlier: list[RunEntry], alpha: float, factor: str, replications: list[RunEntry] | None = None
) -> dict[str, Any]:
    """The facts and the sentence about a test repeated after `earlier` ones (this one included);
    `replications`: earlier runs that repeated a counted one bit for bit, named and not counted."""
    alphas = [
        float((e.ended or {}).get("alpha") or e.started.get("alpha") or alpha) for e in earlier
    ] + [alpha]
    count = len(alphas)
    fwer = family_alpha(alphas)
    earlier_words = "; ".join(f"{e.key}: {decisions_text(e)}" for e in earlier)
    sentence = (
        f"factor {factor} was tested {count} times against this baseline (this test included); the "
        f"earlier {len(earlier)}: {earlier_words}. {count} tests at alpha {number(alpha, 6)} "
        f"imply a family-wise "
        f"alpha of {fwer:.3f}: the chance that at least one accepts when nothing is there"
    )
    if replications:
        sentence += (
            f" ({', '.join(e.key for e in replications)} repeated a counted run bit for bit: "
            "a replication, not another test)"
        )
    return {
        "count": count,
        "earlier": [
            {"run": e.key, "decisions": (e.ended or {}).get("decisions") or []} for e in earlier
        ],
        "alpha": alpha,
        "family_alpha": round(fwer, 6),
        "replications": [e.key for e in replications or []],
        "sentence": sentence,
    }


def line_of(ledger: Ledger, run_dir: str | os.PathLike, depth: int = 0) -> str:
    """The line of work a run belongs to: from the ledger's run_started, else from its frozen
    contract."""
    key = run_key(run_dir, ledger.runs_dir)
    entry = ledger.runs().get(key)
    if entry is not None and entry.started.get("line"):
        return str(entry.started["line"])
    folder = open_run(run_dir)
    contract = folder.contract()
    baseline = contract.get("baseline") or {}
    if baseline.get("line"):
        return str(baseline["line"])
    if baseline.get("from_run") and depth < 20:
        origin = Path(baseline["from_run"])
        if not origin.is_absolute():
            origin = Path(str(folder.run_info().get("contract_path") or ".")).parent / origin
        if origin.is_dir():
            try:
                return line_of(read(runs_dir_of(origin)), origin, depth + 1)
            except (
                PlannerError
            ):  # the origin is gone or damaged: the run starts a line of its own name
                pass
    return str(contract.get("name") or folder.run_info().get("name") or "?")
