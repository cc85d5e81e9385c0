"""The contract's `data` section against the splits trials logged (docs/data.md).

Pure functions of the stored split summaries (planner._data.splits) and the
section as plain data (`contract.data.model_dump()` or the frozen contract's
`data`). Violations are dicts, the shape docs/run-folder.md documents:

    split_overlap   one trial: two splits declared independent share units or group values
    unmatched_data  a treatment arm and the baseline at the same seed logged a split with different
    sets
                    (or only one logged it)
    split_varies    a split declared `fixed` differs from the first trial of the same arm that
    logged it

Each carries `kind`, `message` (a sentence), and the fields that locate it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from planner._core.text import noun
from planner._data.splits import UNIT, fingerprints

DATA_KINDS = ("split_overlap", "unmatched_data", "split_varies")


def _unit_word(data: Mapping[str, Any] | None) -> str:
    return str((data or {}).get("unit") or UNIT)


def _key_word(key: str, data: Mapping[str, Any] | None) -> str:
    return _unit_word(data) if key == UNIT else key


def _independent(data: Mapping[str, Any] | None) -> tuple[list[tuple[str, str]], list[str]]:
    section = (data or {}).get("independent") or {}
    pairs = [(str(p[0]), str(p[1])) for p in section.get("pairs") or []]
    return pairs, list(section.get("by") or [UNIT])


# ------------------------------------------------------------------ within one trial


def overlap_violations(
    splits: Mapping[str, Mapping[str, Any]], data: Mapping[str, Any] | None, only: str | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """(split_overlap violations, problems) of one trial's splits against `independent`.

    A pair is checked once both its splits are logged; with `only`, just the
    pairs that include that split (the one just logged). A problem is a `by`
    group one of the two splits did not log: independence by it cannot be
    checked, which the worker turns into a protocol error.
    """
    pairs, by = _independent(data)
    violations, problems = [], []
    for a, b in pairs:
        if a not in splits or b not in splits or (only is not None and only not in (a, b)):
            continue
        first, second = (
            (a, b) if a in (splits[b].get("overlap") or {}) else (b, a)
        )  # the later split holds the count
        counts = (splits[second].get("overlap") or {}).get(first) or {}
        for key in by:
            if key not in counts:
                lacking = [
                    s for s in (a, b) if key != UNIT and key not in (splits[s].get("groups") or {})
                ]
                problems.append(
                    f"data.independent.by names {key!r}, but split "
                    f"{lacking[0] if lacking else second!r} "
                    f"was logged without a {key!r} group; pass groups={{{key!r}: ...}} to log_split"
                )
                continue
            if counts[key]:
                violations.append(
                    {
                        "kind": "split_overlap",
                        "splits": [a, b],
                        "by": key,
                        "count": int(counts[key]),
                        "message": f"{noun(_key_word(key, data), int(counts[key]))} "
                        f"{'is' if counts[key] == 1 else 'are'} in both {a} and {b}",
                    }
                )
    return violations, problems


def missing_required(splits: Mapping[str, Any], data: Mapping[str, Any] | None) -> list[str]:
    """The splits of `data.require` that the trial did not log."""
    return [name for name in (data or {}).get("require") or [] if name not in splits]


# ------------------------------------------------------------------ across trials


def _first_difference(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> str | None:
    """The first key (unit, then groups in order) whose fingerprint differs between two
    summaries."""
    a, b = fingerprints(mine), fingerprints(theirs)
    for key in [UNIT, *sorted((set(a) | set(b)) - {UNIT})]:
        if a.get(key) != b.get(key):
            return key
    return None


def _describe(summary: Mapping[str, Any], key: str, data: Mapping[str, Any]) -> str:
    if key == UNIT:
        return noun("distinct " + _unit_word(data), int(summary.get("distinct", 0)))
    group = (summary.get("groups") or {}).get(key)
    return "no " + key + " group" if group is None else noun(key, int(group.get("distinct", 0)))


def _compared_with(
    record: Mapping[str, Any], other: Mapping[str, Any], baseline: str | None
) -> bool:
    """Whether `other` is a trial whose data `record`'s must match: another arm at the same seed
    and phase, and (once the baseline is known) one of the two the baseline: a treatment arm is
    matched against the baseline, never against another treatment arm."""
    if (
        other.get("arm") == record.get("arm")
        or other.get("seed") != record.get("seed")
        or other.get("phase") != record.get("phase")
    ):
        return False
    return baseline is None or baseline in (record.get("arm"), other.get("arm"))


def _unmatched(
    record: Mapping[str, Any], other: Mapping[str, Any], data: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """unmatched_data violations of `record` against `other` (another arm at the same seed): every
    split whose distinct sets differ, or that only one of them logged."""
    splits, theirs = record.get("splits") or {}, other.get("splits") or {}
    arms = [other.get("arm"), record.get("arm")]
    out = []
    for name in sorted(set(splits) | set(theirs)):
        base = {
            "kind": "unmatched_data",
            "split": name,
            "arms": arms,
            "seed": record.get("seed"),
            "trial_ids": [other.get("trial_id"), record.get("trial_id")],
        }
        if name not in splits or name not in theirs:
            has, lacks = (arms[0], arms[1]) if name in theirs else (arms[1], arms[0])
            out.append(
                {
                    **base,
                    "by": "split",
                    "message": f"arm {has} logged split {name} at seed "
                    f"{record.get('seed')} and arm {lacks} did not",
                }
            )
            continue
        key = _first_difference(theirs[name], splits[name])
        if key is not None:
            out.append(
                {
                    **base,
                    "by": key,
                    "message": (
                        f"split {name} differs between arms {arms[0]} and {arms[1]} at seed "
                        f"{record.get('seed')}: "
                        f"{_describe(theirs[name], key, data)} vs "
                        f"{_describe(splits[name], key, data)}"
                        + (
                            ", a different set"
                            if key == UNIT or key in (splits[name].get("groups") or {})
                            else ""
                        )
                    ),
                }
            )
    return out


def _varies(
    record: Mapping[str, Any], other: Mapping[str, Any], name: str, data: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A split_varies of `record`'s fixed split `name` against `other` (the same arm at another
    seed)."""
    splits = record.get("splits") or {}
    key = _first_difference(other["splits"][name], splits[name])
    if key is None:
        return []
    return [
        {
            "kind": "split_varies",
            "split": name,
            "by": key,
            "seeds": [other.get("seed"), record.get("seed")],
            "trial_ids": [other.get("trial_id"), record.get("trial_id")],
            "message": (
                f"split {name} is declared fixed but differs between seed {other.get('seed')} "
                f"({other.get('trial_id')}) and seed {record.get('seed')}: "
                f"{_describe(other['splits'][name], key, data)} vs "
                f"{_describe(splits[name], key, data)}, a different set"
            ),
        }
    ]


def cross_trial_violations(
    record: Mapping[str, Any],
    earlier: Iterable[Mapping[str, Any]],
    data: Mapping[str, Any] | None,
    *,
    baseline: str | None = None,
) -> list[dict[str, Any]]:
    """The violations `record` shows against the trials that ended before it; like is compared with
    like.

    unmatched_data (unless `data.matched` is false): a treatment arm's trial against the first
    earlier trial of the `baseline` at the same seed and phase that logged splits; the baseline's
    trial against the first such trial of every treatment arm (whichever of the two ends later
    finds the difference). Two treatment arms are never compared with each other: an arm with
    broken data does not make another arm's data unmatched. (Without `baseline`, every other arm is
    compared: a caller that does not know it.) Any split whose distinct sets differ or that only
    one of them logged is a violation. split_varies: every `data.fixed` split against the first
    earlier trial of the same arm that logged it, at another seed (an arm whose fixed split differs
    from the baseline's is an unmatched_data already).
    """
    data = data or {}
    splits = record.get("splits") or {}
    if not splits:
        return []
    out: list[dict[str, Any]] = []
    matched = data.get("matched", True) is not False
    fixed = list(data.get("fixed") or [])
    seen_arms: set[Any] = set()
    first_fixed: dict[str, Mapping[str, Any]] = {}
    for other in earlier:
        theirs = other.get("splits") or {}
        if not theirs or other.get("trial_id") == record.get("trial_id"):
            continue
        if other.get("arm") == record.get("arm") and other.get("seed") != record.get("seed"):
            for name in fixed:
                if name in theirs and name not in first_fixed:
                    first_fixed[name] = other
        if (
            matched
            and other.get("arm") not in seen_arms
            and _compared_with(record, other, baseline)
        ):
            seen_arms.add(other.get("arm"))
            out += _unmatched(record, other, data)
    for name in fixed:
        if name in splits and name in first_fixed:
            out += _varies(record, first_fixed[name], name, data)
    return out


def data_violations(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        v
        for v in record.get("violations") or []
        if isinstance(v, dict) and v.get("kind") in DATA_KINDS
    ]


def invalid_reasons(
    confirm_records: Iterable[Mapping[str, Any]], baseline: str, arms: Iterable[str]
) -> dict[str, str]:
    """Treatment arm -> why its decision is `invalid`: a data violation on its confirmation trials
    or the baseline's.

    A split_overlap or split_varies on an arm's trial touches that arm (on the
    baseline's, every arm); an unmatched_data between the baseline and an arm touches
    that arm; one between two treatment arms (only an older planner logged such) none.
    """
    arms = list(arms)
    found: dict[str, list[str]] = {arm: [] for arm in arms}
    for record in confirm_records:
        for v in data_violations(record):
            if v["kind"] == "unmatched_data":
                if baseline not in (v.get("arms") or []):
                    # two treatment arms (a run folder of an older planner): not like with like
                    continue
                touched = [a for a in v.get("arms") or [] if a in found]
                if not touched:
                    touched = arms
            else:
                touched = (
                    arms
                    if record.get("arm") == baseline
                    else [a for a in [record.get("arm")] if a in found]
                )
            for arm in touched:
                found[arm].append(
                    f"{v['kind']} in {record.get('trial_id')}: {v.get('message', '')}"
                )
    out = {}
    for arm, said in found.items():
        if said:
            more = (
                f" (and {len(said) - 1} more data violation{'s' if len(said) > 2 else ''})"
                if len(said) > 1
                else ""
            )
            out[arm] = (
                f"Invalid: {said[0]}{more}. The data the arms saw break the contract's data "
                f"section."
            )
    return out


def fingerprint_differences(
    logged: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> list[str]:
    """Sentences for each split whose sets differ between a logged trial and its re-evaluation."""
    a = (logged or {}).get("splits") or {}
    b = (new or {}).get("splits") or {}
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            out.append(
                f"split {name} was logged "
                f"{'only by the re-evaluation' if name in b else 'only by the logged trial'}"
            )
            continue
        key = _first_difference(a[name], b[name])
        if key is not None:
            out.append(
                f"split {name} differs ({key} fingerprint "
                f"{str(fingerprints(a[name]).get(key))[:12]} "
                f"then, {str(fingerprints(b[name]).get(key))[:12]} now)"
            )
    return out


# ------------------------------------------------------------------ what the run shows


def split_line(name: str, summary: Mapping[str, Any], data: Mapping[str, Any] | None) -> str:
    """'train: 12,000 presentations of 3,000 distinct images from 410 patients'."""
    text = (
        f"{name}: {noun('presentation', int(summary.get('presentations', 0)))} of "
        f"{noun('distinct ' + _unit_word(data or {}), int(summary.get('distinct', 0)))}"
    )
    groups = summary.get("groups") or {}
    if groups:
        text += " from " + ", ".join(noun(g, int(v.get("distinct", 0))) for g, v in groups.items())
    return text


def data_summary(
    records: Iterable[Mapping[str, Any]], data: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What the run's trials logged, per split: counts (the same in every trial, or a range),
    distinct sets, overlaps.

    {"splits": [{"split", "trials", "line", "sets", "seeds", "presentations": [lo, hi], "distinct":
    [lo, hi],
                 "groups": {g: [lo, hi]}, "overlap": {other: {key: max count}}}],
     "violations": {kind: count}, "trials_with_splits": n, "trials": n}
    """
    data = data or {}
    per: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    total = with_splits = 0
    kinds: dict[str, int] = {}
    for r in records:
        if r.get("phase") == "reeval":
            continue
        total += 1
        for v in data_violations(r):
            kinds[v["kind"]] = kinds.get(v["kind"], 0) + 1
        splits = r.get("splits") or {}
        if splits:
            with_splits += 1
        for name, s in splits.items():
            if name not in per:
                order.append(name)
                per[name] = {
                    "split": name,
                    "trials": 0,
                    "first": s,
                    "sets": set(),
                    "seeds": set(),
                    "cells": {},
                    "presentations": [],
                    "distinct": [],
                    "groups": {},
                    "overlap": {},
                }
            p = per[name]
            p["trials"] += 1
            fp = tuple(sorted(fingerprints(s).items()))
            p["sets"].add(fp)
            p["seeds"].add(r.get("seed"))
            p["cells"].setdefault((r.get("arm"), r.get("seed")), set()).add(fp)
            p["presentations"].append(int(s.get("presentations", 0)))
            p["distinct"].append(int(s.get("distinct", 0)))
            for g, v in (s.get("groups") or {}).items():
                p["groups"].setdefault(g, []).append(int(v.get("distinct", 0)))
            for other, counts in (s.get("overlap") or {}).items():
                slot = p["overlap"].setdefault(other, {})
                for key, n in counts.items():
                    slot[key] = max(slot.get(key, 0), int(n))
    rows = []
    for name in order:
        p = per[name]

        def span(values):
            return [min(values), max(values)]

        same = (
            len(set(p["presentations"])) == 1
            and len(set(p["distinct"])) == 1
            and all(len(set(v)) == 1 for v in p["groups"].values())
        )
        rows.append(
            {
                "split": name,
                "trials": p["trials"],
                "sets": len(p["sets"]),
                "seeds": len(p["seeds"]),
                "varies": varies_by(p["cells"]),
                "line": split_line(name, p["first"], data) if same else _range_line(name, p, data),
                "presentations": span(p["presentations"]),
                "distinct": span(p["distinct"]),
                "groups": {g: span(v) for g, v in p["groups"].items()},
                "overlap": p["overlap"],
            }
        )
    pairs, by = _independent(data)
    return {
        "splits": rows,
        "violations": kinds,
        "trials_with_splits": with_splits,
        "trials": total,
        "unit": _unit_word(data),
        "independent": {"pairs": [list(p) for p in pairs], "by": by},
    }


def varies_by(cells: Mapping[tuple[Any, Any], set]) -> list[str]:
    """What a split's set varied with, from {(arm, seed): the sets its trials logged}.

    'seed': one arm logged different sets at different seeds; 'arm': two arms
    logged different sets at the same seed; 'trial': one arm logged different
    sets at one seed (tuning and confirmation trials, say). [] when one set.
    """
    arms: dict[Any, dict[Any, frozenset]] = {}
    seeds: dict[Any, dict[Any, frozenset]] = {}
    for (arm, seed), sets in cells.items():
        arms.setdefault(arm, {})[seed] = frozenset(sets)
        seeds.setdefault(seed, {})[arm] = frozenset(sets)
    out = []
    if any(len(set(by_seed.values())) > 1 for by_seed in arms.values()):
        out.append("seed")
    if any(len(set(by_arm.values())) > 1 for by_arm in seeds.values()):
        out.append("arm")
    if any(len(sets) > 1 for sets in cells.values()):
        out.append("trial")
    return out


_VARIES = {
    "seed": "between seeds",
    "arm": "between arms at the same seed",
    "trial": "between trials of one arm at one seed",
}


def _sets_text(row: Mapping[str, Any]) -> str:
    """'the same set in every trial', or how many sets and what they varied with."""
    if row["sets"] == 1:
        return "the same set in every trial"
    varies = [_VARIES[v] for v in row.get("varies") or [] if v in _VARIES]
    if not varies:  # a summary written before `varies` was recorded
        return f"{row['sets']} different sets over {noun('seed', int(row['seeds']))}"
    return f"{row['sets']} different sets, varying {' and '.join(varies)}"


def _range_line(name: str, p: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    def r(values):
        lo, hi = min(values), max(values)
        return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"

    text = (
        f"{name}: {r(p['presentations'])} presentations of {r(p['distinct'])} distinct "
        f"{_unit_word(data)}s"
    )
    if p["groups"]:
        text += " from " + ", ".join(f"{r(v)} {g}s" for g, v in p["groups"].items())
    return text


def overlap_lines(
    row: Mapping[str, Any],
    data: Mapping[str, Any] | None,
    independent: Mapping[str, Any] | None = None,
) -> list[str]:
    """'train and test share 0 images, 37 patients (the most in one trial)' per pair a trial
    measured, saying which shared counts the contract does not check (a pair not declared, a group
    not in `by`)."""
    pairs = {frozenset(p) for p in (independent or {}).get("pairs") or []}
    by = list((independent or {}).get("by") or [UNIT])
    out = []
    for other, counts in (row.get("overlap") or {}).items():
        shown = ", ".join(noun(_key_word(k, data or {}), n) for k, n in counts.items())
        line = f"{other} and {row['split']} share {shown} (the most in one trial"
        if frozenset((other, row["split"])) not in pairs:
            line += "; not declared independent"
        else:
            broken = [_key_word(k, data or {}) for k, n in counts.items() if k in by and n]
            if broken:
                line += f"; declared independent by {', '.join(broken)}: split_overlap"
            unchecked = [k for k, n in counts.items() if k not in by and n]
            if unchecked:
                line += f"; NOT CHECKED: {', '.join(unchecked)} is not in data.independent.by"
        out.append(line + ")")
    return out


def summary_lines(summary: Mapping[str, Any], data: Mapping[str, Any] | None) -> list[str]:
    """The Data section as plain lines (the report and `plan status` print them)."""
    if not summary.get("splits"):
        return [
            f"no split logged ({summary.get('trials', 0)} trials); trial.log_split / "
            f"planner.log_split "
            "report them (docs/data.md)"
        ]
    out = []
    for row in summary["splits"]:
        out.append(f"{row['line']} ({noun('trial', int(row['trials']))}, {_sets_text(row)})")
        out += ["  " + line for line in overlap_lines(row, data, summary.get("independent"))]
    kinds = summary.get("violations") or {}
    out.append(
        "data violations: "
        + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) if kinds else "none")
    )
    return out
