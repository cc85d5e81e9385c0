"""What a trial read: the rules of the audit hook that notes each file a trial's Python opened,
executed or imported below the folders that are its identity. One implementation, used twice:

- a `command:` trial's processes load this file from their bootstrap (a `sitecustomize` on their
  `PYTHONPATH`), which writes each file noted to the attempt's log;
- a function trainable's worker installs one hook per process (`install`, idempotent: an audit
  hook can never be removed) that notes files only while a trial's `recording` is on.

It imports only the standard library, and nothing at all of planner: the bootstrap executes it
by its path inside a user's Python, which may not be able to import planner, and must not import
more than it needs before the user's script runs.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is not imported: the bootstrap runs before every script
if TYPE_CHECKING:  # the bootstrap imports no more than it needs
    from collections.abc import Callable, Sequence

MAX_FILES = 10000  # distinct files noted by one recorder; past it, one `+` mark says more were read
EVENTS = frozenset({"open", "exec", "compile", "import"})
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def installed_folders() -> tuple[str, ...]:
    """Folders whose files are never a trial's inputs: the standard library's and planner's own.
    (A file below a `site-packages` or `dist-packages` folder is left out too: the packages are
    identity.json's `packages`.)"""
    here = os.path.dirname(os.path.abspath(__file__))  # planner/_trial
    folders = (os.path.dirname(os.__file__), os.path.dirname(here))
    return tuple(os.path.join(os.path.abspath(p), "") for p in folders)


_PACKAGES = tuple(f"{os.sep}{name}{os.sep}" for name in ("site-packages", "dist-packages"))


class Recorder:
    """Notes each distinct file read (`r`), executed or compiled (`x`) or opened for writing (`w`)
    below one of `roots` and not below one of `skip`; `sink(kind, path)` is told each one once,
    in the order they were first seen, and `noted` keeps them."""

    def __init__(
        self,
        roots: Sequence[str],
        skip: Sequence[str] = (),
        sink: Callable[[str, str], None] | None = None,
    ):
        self.roots = tuple(os.path.join(os.path.abspath(p), "") for p in roots if p)
        self.skip = tuple(os.path.join(os.path.abspath(p), "") for p in skip if p)
        self.skip += installed_folders()
        self.sink = sink
        self.noted: dict[tuple[str, str], None] = {}
        self.more = False  # past MAX_FILES: more were read than were noted

    def note(self, kind: str, path: object) -> None:
        try:
            name = os.fsdecode(os.fspath(path))  # type: ignore[call-overload]
        except TypeError:
            return  # a file descriptor, or no path at all
        if not name or name.startswith("<"):
            return  # `<string>`, `<frozen ...>`: no file
        name = os.path.abspath(name)
        if not name.startswith(self.roots) or name.startswith(self.skip):
            return
        if any(part in name for part in _PACKAGES):
            return
        key = (kind, name)
        if key in self.noted:
            return
        if len(self.noted) >= MAX_FILES:
            if not self.more and self.sink is not None:
                self.sink("+", "more")
            self.more = True
            return
        self.noted[key] = None
        if self.sink is not None:
            self.sink(kind, name)

    def event(self, event: str, args: tuple) -> None:
        """An audit event: the files it names noted. Never raises (a path that cannot be noted is
        left out): the hook runs inside the trial's own calls."""
        try:
            if event == "open":
                path, mode, flags = args
                wrote = (
                    any(c in mode for c in "wax+")
                    if isinstance(mode, str)
                    else bool(flags & _WRITING)
                )
                self.note("w" if wrote else "r", path)
            elif event == "exec":
                self.note("x", getattr(args[0], "co_filename", None))
            elif event == "compile":
                self.note("x", args[1])
            elif event == "import" and args[1] is not None:
                self.note("r", args[1])
        except Exception:  # noqa: BLE001 - never the trial's failure
            pass

    def read(self) -> tuple[set[str], set[str]]:
        """(the files read or executed, the files opened for writing)."""
        read = {path for kind, path in self.noted if kind in ("r", "x")}
        written = {path for kind, path in self.noted if kind == "w"}
        return read, written


# ------------------------------------------------------------ in one process, one trial at a time

_CURRENT: list[Recorder | None] = [None]  # the recorder of the trial running in this process
_INSTALLED = [False]


def _hook(event: str, args: tuple) -> None:
    recorder = _CURRENT[0]
    if recorder is not None and event in EVENTS:
        recorder.event(event, args)


def install() -> None:
    """The audit hook of this process, installed once: it notes files only while `recording`."""
    if not _INSTALLED[0]:
        sys.addaudithook(_hook)
        _INSTALLED[0] = True


class recording:  # noqa: N801 - used as a context manager, like contextlib's
    """`with recording(recorder):` notes in `recorder` the files this process reads (any of its
    threads) until the block ends."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder
        self.was: Recorder | None = None

    def __enter__(self) -> Recorder:
        install()
        self.was, _CURRENT[0] = _CURRENT[0], self.recorder
        return self.recorder

    def __exit__(self, *exc: object) -> None:
        _CURRENT[0] = self.was
