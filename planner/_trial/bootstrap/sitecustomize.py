"""What a trial's Python reads, recorded from its start: planner puts this folder first on the
`PYTHONPATH` of a `command:` trial, so every Python the command starts (the script, one started by a
wrapper shell script, a DataLoader's spawned worker) imports it at its start, before the script
runs.

With `PLANNER_FILES_READ` set (the attempt's `files_read.tsv`), it installs an audit hook
(`sys.addaudithook`) that appends one line per distinct file, `<kind>\\t<absolute path>`, for the
files opened (`open`: `r`, or `w` for one opened for writing), compiled or executed (`exec`,
`compile`: `x`, a configurator's `exec(open(f).read())` included) and imported (`import`: `r`),
below one of the folders in `PLANNER_FILES_ROOTS` and not below `PLANNER_FILES_SKIP` (the run
folder), by the rules of planner/_trial/reads.py (shared with the function trainables' workers).
The worker reads the lines after the command has ended (planner._store.identity.files_read). It
imports only the standard library, and then runs the `sitecustomize` it shadows, if there is one.
"""

import os
import sys


def _install(log: str) -> None:
    """The audit hook of this process (planner/_trial/reads.py's rules, loaded by its path: this
    Python may not be able to import planner), writing each file it notes to `log`."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "_planner_reads", os.path.join(os.path.dirname(here), "reads.py")
    )
    if spec is None or spec.loader is None:
        return
    reads = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reads)
    roots = [p for p in os.environ.get("PLANNER_FILES_ROOTS", "").split(os.pathsep) if p]
    skip = [os.environ.get("PLANNER_FILES_SKIP", "")]
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)

    def sink(kind: str, path: str) -> None:
        os.write(fd, f"{kind}\t{path}\n".encode("utf-8", "surrogateescape"))

    recorder = reads.Recorder(roots, skip, sink)

    def hook(event: str, args: tuple) -> None:
        if event in reads.EVENTS:
            recorder.event(event, args)

    sys.addaudithook(hook)


def _chain() -> None:
    """Run the `sitecustomize` this module shadows (a distribution's own), as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("PLANNER_FILES_READ"):
    try:
        _install(os.environ["PLANNER_FILES_READ"])
    except OSError:
        pass  # the log cannot be opened: the trial runs, its files are not recorded
_chain()
