"""What a trial's Python reads, recorded from its start: planner puts this folder first on the
`PYTHONPATH` of a `command:` trial, so every Python the command starts (the script, one started by a
wrapper shell script, a DataLoader's spawned worker) imports it at its start, before the script
runs.

With `PLANNER_FILES_READ` set (the attempt's `files_read.tsv`), it installs an audit hook
(`sys.addaudithook`) that appends one line per distinct file, `<kind>\\t<absolute path>`, for the
files opened (`open`: `r`, or `w` for one opened for writing), compiled or executed (`exec`,
`compile`: `x`, a configurator's `exec(open(f).read())` included) and imported (`import`: `r`),
below one of the folders in `PLANNER_FILES_ROOTS` and not below `PLANNER_FILES_SKIP` (the run
folder). The worker reads the lines after the command has ended (planner._trial.files_read). It
imports only the standard library, and then runs the `sitecustomize` it shadows, if there is one.
"""

import os
import sys

MAX_FILES = (
    10000  # distinct files recorded by one process; past it, one `+` line says more were read
)


def _install(log: str) -> None:
    roots = tuple(
        os.path.join(os.path.abspath(p), "")
        for p in os.environ.get("PLANNER_FILES_ROOTS", "").split(os.pathsep)
        if p
    )
    skip = os.environ.get("PLANNER_FILES_SKIP")
    skip = os.path.join(os.path.abspath(skip), "") if skip else None
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    seen: set = set()
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def note(kind: str, path) -> None:
        try:
            path = os.fsdecode(os.fspath(path))
        except TypeError:
            return  # a file descriptor, or no path at all
        if not path or path.startswith("<"):
            return  # `<string>`, `<frozen ...>`: no file
        path = os.path.abspath(path)
        if not path.startswith(roots) or (skip and path.startswith(skip)):
            return
        key = (kind, path)
        if key in seen:
            return
        if len(seen) >= MAX_FILES:
            if len(seen) == MAX_FILES:
                seen.add(key)
                os.write(fd, b"+\tmore\n")
            return
        seen.add(key)
        os.write(fd, f"{kind}\t{path}\n".encode("utf-8", "surrogateescape"))

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            wrote = (
                any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & writing)
            )
            note("w" if wrote else "r", path)
        elif event == "exec":
            note("x", getattr(args[0], "co_filename", None))
        elif event == "compile":
            note("x", args[1])
        elif event == "import" and args[1] is not None:
            note("r", args[1])

    def guarded(event: str, args: tuple) -> None:
        if event in ("open", "exec", "compile", "import"):
            try:
                hook(event, args)
            except Exception:  # never the script's failure: a path that cannot be noted is left out
                pass

    sys.addaudithook(guarded)


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
