"""The files a function trainable's trial reads, as its record's `inputs.files` names them (a
`command:` trial's are recorded by its bootstrap instead)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from planner._store.identity import read_facts, trainable_sources
from planner._trial.reads import Recorder
from planner._trial.spec import TrialSpec


class TrialReads:
    """What a function trainable's trial reads, all its attempts together: the recorder of its
    audit events (`recorder`) and the files as its record names them (`files`), each file looked
    at once a trial."""

    def __init__(self, spec: TrialSpec, recorder: Recorder, module_file: Path | None):
        self.spec, self.recorder, self.module_file = spec, recorder, module_file
        self.known: dict[str, Any] = {}  # absolute path -> its FileFact, as first looked at
        self.seen = -1  # how many files the recorder had noted when `last` was made
        self.last: dict[str, Any] = {}

    @classmethod
    def of(cls, spec: TrialSpec) -> TrialReads | None:
        """Below the contract's folder (`extra["reads_base"]`: "." on a cluster, where the worker
        runs in its copy) and the trainable module's, outside the run folder; None for a
        `command:` (its bootstrap records them) or a spec that does not ask for it."""
        base = spec.extra.get("reads_base")
        if "command" in spec.extra or not base:
            return None
        module_file = _module_file(spec.trainable.partition(":")[0])
        roots = [os.path.abspath(base)] + ([str(module_file.parent)] if module_file else [])
        trial_dir = os.path.abspath(spec.dir)
        parent = os.path.dirname(trial_dir)
        run_folder = os.path.dirname(parent) if os.path.basename(parent) == "trials" else trial_dir
        return cls(spec, Recorder(roots, [run_folder]), module_file)

    def files(self) -> dict[str, Any]:
        """The files read so far (`inputs.files`): what the hook saw, and the trainable's module
        and the local modules it imports, which an earlier trial in this worker may have loaded
        before this one started (no import then, no audit event)."""
        if len(self.recorder.noted) == self.seen:
            return self.last
        self.seen = len(self.recorder.noted)
        read, written = self.recorder.read()
        if self.module_file is not None:
            module_name = self.spec.trainable.partition(":")[0]
            read |= {str(path) for path in trainable_sources(self.module_file, module_name)}
        base = Path(self.recorder.roots[0])  # the first root: the folder the names start from
        self.last = dict(read_facts(read, written, base, self.known))
        return self.last


def _module_file(module_name: str) -> Path | None:
    """The file of the trainable's module as this worker imports it, or None."""
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    origin = found.origin if found is not None else None
    return Path(origin).resolve() if origin and os.path.isfile(origin) else None
