"""The rules of the contract's `data` section (docs/data.md): P600-P619 errors, P920-P924
warnings."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from planner._contract.load import LoadedYaml
from planner._contract.rules import _Report  # the one placer of diagnostics (same stage)
from planner._core.diagnostics import Diagnostic
from planner._core.text import file_kind


def check_fingerprint_files(contract, loaded: LoadedYaml, contract_dir: Path) -> list[Diagnostic]:
    """P606: every file or folder `data.fingerprint` names is there, and can be read and hashed (a
    FIFO would hang the hash, a device never end): a name that is not would record `null` as the
    data's identity of every trial, without a word."""
    report = _Report(loaded)
    for i, entry in enumerate(contract.data.fingerprint):
        path = contract_dir / entry
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            problem = (
                "is not there" if not os.path.lexists(path) else (error.strerror or str(error))
            )
        else:
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                if os.access(path, os.R_OK):
                    continue
                problem = "cannot be read (permission denied)"
            else:
                problem = f"is {file_kind(mode)}"
        report.add(
            "P606",
            ("data", "fingerprint", i),
            f"data.fingerprint names {entry!r}, which {problem} (looked for {path})",
            "Name a data file or folder that is there, relative to the contract's folder, or "
            "remove the entry.",
        )
    return report.items


def check_data(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """P600 to P605 and the warnings P920, P921 on `data`."""
    report = _Report(loaded)
    data = contract.data
    named: set[str] = set()
    if data.independent is not None:
        seen: dict[frozenset, int] = {}
        for i, (a, b) in enumerate(data.independent.pairs):
            where = ("data", "independent", "pairs", i)
            if a == b:
                report.add(
                    "P600",
                    where,
                    f"the pair [{a}, {b}] names the split {a!r} twice",
                    "A pair is two different splits that must share nothing, like [train, test].",
                )
                continue
            key = frozenset((a, b))
            if key in seen:
                report.add(
                    "P601",
                    where,
                    f"the pair [{a}, {b}] is listed twice (also at position {seen[key] + 1})",
                    "List each pair once; [a, b] and [b, a] are the same pair.",
                )
            seen.setdefault(key, i)
            named.update((a, b))
        _twice(report, data.independent.by, ("data", "independent", "by"), "P602", "group")
        if data.unit in data.independent.by and data.unit != "unit":
            report.add(
                "P605",
                ("data", "unit"),
                f"data.unit {data.unit!r} is also a name in independent.by",
                "independent.by names the ids themselves `unit`; give data.unit a noun for the "
                "report, "
                "like `image`, that is not a group name.",
            )
    _twice(report, data.fixed, ("data", "fixed"), "P603", "split")
    _twice(report, data.require, ("data", "require"), "P604", "split")
    required = set(data.require)
    for what, names, path in (
        ("independent.pairs", sorted(named), ("data", "independent", "pairs")),
        ("fixed", list(data.fixed), ("data", "fixed")),
    ):
        unchecked = [n for n in names if n not in required]
        if unchecked:
            report.add(
                "P920",
                path,
                f"data.{what} names {', '.join(unchecked)}, not in data.require: a trial that "
                f"never logs "
                f"{'it' if len(unchecked) == 1 else 'them'} passes the check unchecked",
                f"Add {', '.join(unchecked)} to data.require, so that a trial without "
                f"{'it' if len(unchecked) == 1 else 'them'} is a protocol error.",
                severity="warning",
            )
    if not data.matched:
        report.add(
            "P921",
            ("data", "matched"),
            "data.matched is false: the arms may train and test on different data at the same "
            "seed, and "
            "the comparison is then not matched",
            "Remove `matched: false` unless the factor is the data itself, and say so in the "
            "hypothesis.",
            severity="warning",
        )
    return report.items


def _twice(report: Any, names: list[str], where: tuple[Any, ...], code: str, what: str) -> None:
    first: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in first:
            report.add(
                code,
                (*where, j),
                f"the {what} {name!r} is listed twice (also at position {first[name] + 1})",
                f"List each {what} once.",
            )
        first.setdefault(name, j)
