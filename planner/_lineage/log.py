"""`plan log`: the lineage of every line of work in a runs dir, from its ledger.

For each line: its baselines in order (the first run's own, then each promoted
arm), the experiments run against each with their decisions, the promotions
and withdrawals, the baseline in force now, and the forking paths (the same
factor tested more than once against the same baseline; a contract edited under
the same name after an earlier run of it had reported decisions).

A run whose end is not in the ledger (killed before it could write it) is shown
with the state and decisions its run folder holds, and a note.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from planner._core.errors import PlannerError, UsageError
from planner._lineage import history
from planner._lineage.ledger import Ledger, RunEntry, ledger_path, read
from planner._store.claims import accepted
from planner._store.read import open_run


def build_log(runs_dir: str | os.PathLike) -> dict[str, Any]:
    """The lineage of `runs_dir` as JSON-able data (`plan log --json`)."""
    folder = Path(runs_dir)
    if not folder.is_dir():
        raise UsageError(
            f"{folder} does not exist: give the runs dir that holds {ledger_path('').name} "
            "(--runs-dir, default ./runs)"
        )
    ledger = read(folder)
    notes = list(ledger.notes)
    if not ledger.path.is_file():
        notes.append(
            f"{ledger.path} does not exist: no run has started in {folder} since the ledger was "
            f"added"
        )
    runs = sorted(ledger.runs().values(), key=lambda e: e.order)
    ends = {e.key: _end(ledger, e, notes) for e in runs}
    promotions = ledger.promotions()
    marks = {_key(p): _unverified(ledger, p) for p in promotions}
    lines = []
    for name in ledger.lines():
        entries = [e for e in runs if e.line == name]
        chain = [p for p in promotions if p.get("line") == name]
        baselines: list[dict[str, Any]] = []
        by_sha: dict[Any, dict[str, Any]] = {}
        for e in entries:
            base = e.started.get("baseline") or {}
            sha = base.get("config_sha256")
            if sha not in by_sha:
                by_sha[sha] = {
                    "number": len(baselines) + 1,
                    "arm": base.get("arm"),
                    "config_sha256": sha,
                    "from": base.get("from"),
                    "first_run": e.key,
                    "experiments": [],
                }
                baselines.append(by_sha[sha])
            by_sha[sha]["experiments"].append(_experiment(ledger, e, ends[e.key], chain, marks))
        in_force = ledger.in_force(name)
        lines.append(
            {
                "line": name,
                "baselines": baselines,
                "promotions": [_promotion(p, marks) for p in chain],
                "in_force": _promotion(in_force, marks)
                if in_force
                else (
                    {
                        "run": entries[0].key,
                        "arm": (entries[0].started.get("baseline") or {}).get("arm"),
                        "promoted": None,
                        "note": "nothing promoted: the contract baseline of the line's first run",
                    }
                    if entries
                    else None
                ),
                "forking": _forking(ledger, entries),
            }
        )
    return {"runs_dir": str(folder), "ledger": str(ledger.path), "lines": lines, "notes": notes}


def _end(ledger: Ledger, entry: RunEntry, notes: list[str]) -> dict[str, Any]:
    if entry.ended is not None:
        return {
            "state": entry.ended.get("state"),
            "ended": entry.ended.get("time"),
            "decisions": entry.ended.get("decisions") or [],
            "from": "ledger",
        }

    path = Path(entry.key) if Path(entry.key).is_absolute() else ledger.runs_dir / entry.key
    try:
        folder = open_run(path)
        state = (folder.state() or {}).get("state")
        doc = folder.decisions() or {}
    except PlannerError as error:
        notes.append(
            f"run {entry.key} has no end in the ledger and its folder cannot be read: {error}"
        )
        return {"state": None, "ended": None, "decisions": [], "from": "nowhere"}
    notes.append(
        f"run {entry.key} has no end in the ledger (still running, or killed): its state "
        f"({state}) is read from its folder"
    )
    return {
        "state": state,
        "ended": None,
        "decisions": [
            {
                k: d.get(k)
                for k in ("arm", "decision", "effect", "ci_low", "ci_high", "p_value", "reason")
            }
            for d in doc.get("decisions") or []
            if isinstance(d, dict)
        ],
        "from": "run folder",
    }


def _key(p: dict[str, Any]) -> tuple[str, str, str]:
    return str(p.get("run")), str(p.get("arm")), str(p.get("time"))


def _unverified(ledger: Ledger, p: dict[str, Any]) -> str | None:
    """Why the run folder does not back a ledger line's promotion (None when it shows the arm
    accepted)."""
    key, arm = str(p.get("run")), str(p.get("arm"))
    path = Path(key) if Path(key).is_absolute() else ledger.runs_dir / key
    try:
        doc = open_run(path).decisions()
    except PlannerError as error:
        return f"its run folder cannot be read ({error})"
    return accepted(doc, arm)


def _promotion(p: dict[str, Any], marks: dict[tuple[str, str, str], str | None]) -> dict[str, Any]:
    w = p.get("withdrawn")
    return {
        "run": p.get("run"),
        "arm": p.get("arm"),
        "promoted": p.get("time"),
        "note": p.get("note") or "",
        "withdrawn": None if not w else {"time": w.get("time"), "note": w.get("note") or ""},
        "unverified": marks.get(_key(p)),
    }


def _experiment(
    ledger: Ledger,
    e: RunEntry,
    end: dict[str, Any],
    chain: list[dict[str, Any]],
    marks: dict[tuple[str, str, str], str | None],
) -> dict[str, Any]:
    key = history.hypothesis_key(e.started)
    trainable = history.trainable_of(ledger, e)
    earlier, copies = history.split_replications(
        history.earlier_tests(ledger, key, before=e.order, trainable=trainable), e
    )
    edited = history.edited_before(
        ledger, str(e.started.get("name")), str(e.started.get("contract_sha256")), before=e.order
    )
    alpha = float(e.started.get("alpha") or 0.05)
    return {
        "run": e.key,
        "name": e.started.get("name"),
        "contract_sha256": e.started.get("contract_sha256"),
        "hypothesis": e.started.get("hypothesis"),
        "factor": e.started.get("factor"),
        "started": e.started.get("time"),
        "ended": end["ended"],
        "state": end["state"],
        "end_from": end["from"],
        "decisions": end["decisions"],
        "promoted": [_promotion(p, marks) for p in chain if p.get("run") == e.key],
        "repetition": history.repetition(
            earlier, alpha, str((e.started.get("factor") or {}).get("name")), copies
        )
        if earlier
        else None,
        "replicates": [x.key for x in copies if x.key != e.key],
        "edited_after_decisions": [x.key for x in edited],
    }


def _forking(ledger: Ledger, entries: list[RunEntry]) -> list[dict[str, Any]]:
    """Each (baseline, factor) tested more than once, and each name run under more than one
    contract."""
    out: list[dict[str, Any]] = []
    groups: dict[Any, list[RunEntry]] = {}
    for e in entries:
        if e.decided and history.completed_test(e):
            # a test repeated on another trainable is another experiment, not a forking path
            trainable = history.trainable_of(ledger, e)
            groups.setdefault((*history.hypothesis_key(e.started), trainable), []).append(e)
    for (sha, keys, _), runs in groups.items():
        tests, copies = history.split_replications(runs)
        if len(tests) > 1:
            alphas = [
                float((t.ended or {}).get("alpha") or t.started.get("alpha") or 0.05) for t in tests
            ]
            out.append(
                {
                    "kind": "repeated_test",
                    "baseline_config_sha256": sha,
                    "factor_keys": list(keys),
                    "count": len(tests),
                    "runs": [t.key for t in tests],
                    "decisions": [history.decisions_text(t) for t in tests],
                    "family_alpha": round(history.family_alpha(alphas), 6),
                    "replications": [c.key for c in copies],
                }
            )
    names: dict[str, list[RunEntry]] = {}
    for e in entries:
        names.setdefault(str(e.started.get("name")), []).append(e)
    for name, runs in names.items():
        hashes = []
        for e in runs:
            if e.started.get("contract_sha256") not in hashes:
                hashes.append(e.started.get("contract_sha256"))
        edited = [
            e
            for e in runs[1:]
            if history.edited_before(
                ledger, name, str(e.started.get("contract_sha256")), before=e.order
            )
        ]
        if edited:
            out.append(
                {
                    "kind": "edited_contract",
                    "name": name,
                    "hashes": hashes,
                    "runs": [e.key for e in runs],
                    "edited_runs": [e.key for e in edited],
                }
            )
    return out
