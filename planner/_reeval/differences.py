"""What differs between a run's logged identity and today's: code, python, packages, data, and the
files the run's trials read. `plan reeval` shows these before it re-runs an arm, and names them when
a logged seed does not reproduce."""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner._store.identity import (
    changed_files,
    code_identity,
    command_code_identity,
    data_fingerprints,
    describe_fact,
    logged_files_read,
    packages,
)

CODE_KEYS = ("commit", "dirty", "diff_sha256", "trainable_source_sha256", "trainable_file")


@dataclass(frozen=True)
class Difference:
    """One identity fact that is not today what the log says (None: absent on that side)."""

    what: (
        str  # dotted: code.commit, code.trainable_source_sha256, packages.ray, python, data.<path>
    )
    logged: Any
    current: Any

    def __str__(self) -> str:
        return f"{self.what}: {_short(self.logged)} (logged) -> {_short(self.current)} (today)"


def compare_identity(logged: dict[str, Any] | None, current: dict[str, Any]) -> list[Difference]:
    """What differs between the logged run identity and today's: code, python, packages, data.

    Code: the git commit, the dirty flag, the hash of the uncommitted diff, the
    digest of the trainable module's source and the file it was found in.
    A fact missing from the log is reported only when today's value is known.
    """
    logged = logged or {}
    out: list[Difference] = []
    logged_code, current_code = logged.get("code") or {}, current.get("code") or {}
    for key in CODE_KEYS:
        if key not in logged_code and key not in current_code:
            continue
        a, b = logged_code.get(key), current_code.get(key)
        if a != b:
            out.append(Difference(f"code.{key}", a, b))
    if logged.get("python") != current.get("python") and current.get("python") is not None:
        out.append(Difference("python", logged.get("python"), current.get("python")))
    a_map, b_map = logged_code.get("local_sources"), current_code.get("local_sources") or {}
    if isinstance(a_map, dict):  # the local modules imported
        for name in sorted(set(a_map) | set(b_map)):
            if a_map.get(name) != b_map.get(name):
                out.append(
                    Difference(f"code.local_sources.{name}", a_map.get(name), b_map.get(name))
                )
    for section in ("packages", "data"):
        a_map, b_map = logged.get(section) or {}, current.get(section) or {}
        for name in sorted(set(a_map) | set(b_map)):
            if a_map.get(name) != b_map.get(name):
                out.append(Difference(f"{section}.{name}", a_map.get(name), b_map.get(name)))
    return out


def current_identity(
    trainable: str,
    search_path: list[str],
    data_paths: list[str],
    contract_dir: Path,
    module: bool = True,
    *,
    command_dir: Path | None = None,
    package_names: Iterable[str] = (),
) -> dict:
    """Today's code, python, packages and data fingerprints, as identity.json records them.

    A `command:` trainable (module=False, trainable "command: <line>") is identified by its command
    line and the script it names in the folder it runs in (`command_dir`: `Contract.command_dir`),
    when it names one. `package_names`: the packages whose versions are compared besides planner's
    own (the logged run's and the ones the trainable uses today), so a changed, added or removed
    lightning is named.
    """
    code = (
        code_identity(trainable, search_path)
        if module
        else command_code_identity(trainable.removeprefix("command: "), command_dir or contract_dir)
    )
    return {
        "code": code,
        "python": platform.python_version(),
        "packages": packages(package_names),
        "data": data_fingerprints(data_paths, contract_dir),
    }


def files_read_differences(
    run_dir: Path, base: Path, logged: dict[str, Any] | None = None
) -> list[Difference]:
    """The files the run's trials read (identity.json's `files_read`, the records' `inputs.files`;
    `logged`: those, already read) that are not today what was logged, each named once; a file
    that did not change is never named."""
    logged = logged_files_read(run_dir) if logged is None else logged
    return [
        Difference(f"files_read.{name}", describe_fact(then), describe_fact(now))
        for name, then, now in changed_files(logged, base)
    ]


def _short(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40,64}", value):
        return value[:12]
    return "<absent>" if value is None else str(value)
