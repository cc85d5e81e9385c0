"""One exception tree for the whole planner, and the one table of exit codes.

    PlannerError                  every error the planner raises on purpose (exit 1)
     +-- UsageError               bad command line, unreadable file (exit 2)
     +-- ContractError            the contract is invalid; carries Diagnostics (exit 1)
     |    +-- ContractFileError   the contract file cannot be read (also a UsageError: exit 2)
     +-- RunError                 a run cannot start or go on (lock held, hash changed...) (exit 3)
     |    +-- RunLockedError      another `plan run` holds the run folder
     |    +-- LinkedFileError     a file of a run folder to be written is a link or special
     |    +-- DiskError           the disk planner writes to is full, read-only or refuses it
     +-- TrialProtocolError       a trainable broke the reporting protocol (fails that trial)
     |    +-- CommandConfigMismatchError   a script composed another config than the contract's
     +-- CommandError             a `command:` trainable did not end well (fails the attempt)
     |    +-- CommandFailedError      non-zero exit, or could not start
     |    +-- CommandTimeoutError     past its time limit (also a TimeoutError)
     |    +-- CommandMemoryError      past its memory limit (also a MemoryError)
     |    +-- CommandNoReportError    exited 0 without a report (also a TrialProtocolError)
     +-- MlflowTrackingError      MLflow missing or refusing, or a run folder it cannot read
     +-- LineageError             an unreadable baseline run, a refused promotion (P7xx, exit 1)

The CLI prints `str(error)` for any PlannerError and returns its `exit_code`,
never a traceback; anything else is an internal bug (EXIT_INTERNAL) and gets a
short message plus how to see the trace. `EXIT_CODES` is the table every
command's code comes from (docs/commands.md shows it; a test keeps them equal).
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import TypeGuard

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_NO_VALUE = 4
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success: a valid contract, a completed run whose decisions are accept, reject or "
    "inconclusive, a "
    "reeval that reproduces",
    EXIT_INVALID: "the contract is invalid; for `plan reeval`, a logged seed does not reproduce; "
    "for `plan promote`, "
    "a refused promotion",
    EXIT_USAGE: "usage error or unreadable file",
    EXIT_INCOMPLETE: "a run or reeval that ended without completing (budget exhausted, "
    "interrupted, failed, "
    "a locked run folder, a disk that is full or cannot be written)",
    EXIT_NO_VALUE: "`plan run` completed, but an arm (or the baseline) has no usable confirmation "
    "value: every "
    "trial failed, broke the protocol or was never confirmed, so nothing can be decided; or a "
    "decision is `invalid` (the data or the tuning budget broke the contract, or the seeds did not "
    "vary the run)",
    EXIT_INTERNAL: "an internal bug (the message says how to see the trace: `plan --debug ...` or "
    "`PLANNER_DEBUG=1`)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C or SIGTERM) outside a run's own handling",
}


class PlannerError(Exception):
    """Root of every error the planner raises on purpose."""

    exit_code: int = EXIT_INVALID


class UsageError(PlannerError):
    """The command line is wrong or a named file cannot be read."""

    exit_code = EXIT_USAGE


class ContractError(PlannerError):
    """The contract is invalid. `diagnostics` lists every problem found."""

    exit_code = EXIT_INVALID

    def __init__(self, diagnostics):  # list[Diagnostic]
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.format() for d in self.diagnostics))


class ContractFileError(ContractError, UsageError):
    """The contract file cannot be read as text: exit 2 (a usage problem, not an invalid
    contract)."""

    exit_code = EXIT_USAGE


class RunError(PlannerError):
    """A run cannot start or continue."""

    exit_code = EXIT_INCOMPLETE


class FailedFast(RunError):
    """The run stopped because its first trials can only fail (planner._dispatch.failfast): it ends
    `failed` (exit 3) and says so as every run's ending does (run folder, run state), not as an
    error of the command."""


class RunLockedError(RunError):
    """Another process holds the run folder's lock."""


class LinkedFileError(RunError):
    """A file planner was to write in a run folder (or the runs dir) is a link, hard or symbolic, a
    FIFO or a device: writing it would change a file outside the folder, so it is refused (exit
    3)."""


class DiskError(RunError):
    """The disk a command writes to is full, over quota, read-only or refuses it (exit 3): a fact of
    the machine, said in a sentence (`disk_error`), never an internal error."""


# What the machine says when a disk refuses planner (or a trainable) a file, and what to do about
# it: the one table of the errnos read as the machine's refusal, never as a bug of planner's.
_DISK_ERRNOS = {
    errno.ENOSPC: ("cannot write", "free space on that disk, then run the command again"),
    errno.EDQUOT: ("cannot write", "free space within your quota, then run the command again"),
    errno.EROFS: ("cannot write", "give a folder on a disk that can be written"),
    errno.EIO: ("cannot use", "check that disk (the system log says what failed), then run again"),
    errno.EACCES: ("cannot use", "give a path you may read and write, or fix its permissions"),
    errno.EPERM: ("cannot use", "give a path you may read and write, or fix its permissions"),
}
# Of those, the ones that say the disk itself failed, for whoever writes to it and wherever: full,
# over quota, read-only, failing. A permission error refuses one path to one user; these refuse
# every write, so a run whose own writes meet one stops, resumable once the disk is back.
DISK_FAILED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})
# Of those, the ones that fail a trial without being its result (it is not recorded, and runs
# again on `--resume`): no space, and a failing disk, which the machine's owner mends. Not a
# read-only disk: the run's own disk gone read-only refuses the driver's writes too (the trial keeps
# no record and runs again anyway), so a trial that met one wrote to a read-only path of its own
# choosing, and would meet it again at every resume. Not a permission error, for the same reason:
# a file the trainable may not open is its own bug, recorded as its failure.
TRIAL_RERUN = DISK_FAILED - {errno.EROFS}


def disk_error(error: OSError, where: str | None = None) -> DiskError | None:
    """A DiskError with its sentence for an OSError a disk raised (full, over quota, read-only,
    failing, not permitted), naming the file or `where`; None for any other OSError."""
    said = _DISK_ERRNOS.get(error.errno or 0)
    if said is None:
        return None
    verb, advice = said
    name = error.filename if error.filename is not None else where
    place = f" {name}" if name else ""
    return DiskError(f"{verb}{place}: {error.strerror or error}; {advice}")


def disk_failed(error: BaseException) -> TypeGuard[OSError]:
    """True for an OSError that says the disk itself failed (`DISK_FAILED`): a run that meets one
    in its own writes stops, and is resumed once the disk is back."""
    return isinstance(error, OSError) and error.errno in DISK_FAILED


class TrialProtocolError(PlannerError):
    """A trainable broke the reporting protocol: the trial fails, it is not retried."""


class CommandError(PlannerError):
    """The command did not end well. `stderr_tail` holds its last lines of stderr; `errno`, the
    errno of the OSError a Python script died of (its last line of stderr), or None."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr_tail: str = "",
        attempt_dir: str | None = None,
        errno: int | None = None,
    ):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.attempt_dir = attempt_dir
        self.errno = errno
        text = message
        if attempt_dir:
            text += f" (logs in {attempt_dir})"
        if stderr_tail.strip():
            text += f"\n--- last lines of stderr ---\n{stderr_tail.rstrip()}"
        super().__init__(text)


class CommandFailedError(CommandError):
    """The command exited with a non-zero status, or could not be started."""


class CommandTimeoutError(CommandError, TimeoutError):
    """The command ran past its time limit and was stopped (trial status `timeout`)."""


class CommandMemoryError(CommandError, MemoryError):
    """The command's processes used more memory than allowed and were stopped (status `oom`)."""


class CommandNoReportError(CommandError, TrialProtocolError):
    """The command exited 0 without a single report (trial status `protocol_error`)."""


class CommandMetricsError(CommandError, TrialProtocolError):
    """The script exited 0 but its metrics log never appeared or never held the metric
    (`protocol_error`)."""


class CommandArgumentsError(CommandFailedError, TrialProtocolError):
    """An argparse script refused its flags (exit status 2, its usage error in the message): not
    retried."""


class CommandConfigMismatchError(TrialProtocolError):
    """The script composed a different config from the one the contract composed."""


class MlflowTrackingError(PlannerError):
    """MLflow is missing, refuses the tracking URI, or the run folder cannot be read."""


class LineageError(PlannerError):
    """A lineage step refused, with its rule code (docs/contract.md): a baseline from a run that
    cannot be read (P701-P705), a promotion refused (P710-P714). `plan promote` exits 1 with it;
    validate reports it as a Diagnostic."""

    exit_code = EXIT_INVALID

    def __init__(self, code: str, message: str, hint: str = ""):
        self.code, self.message, self.hint = code, message, hint
        text = f"{code}: {message}"
        if hint:
            text += ("" if text.endswith((".", "?", "!")) else ".") + f" {hint}"
        super().__init__(text)
