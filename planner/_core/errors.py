"""One exception tree for the whole planner.

    PlannerError                 every error the planner raises on purpose
     +-- UsageError              bad command line, unreadable file (exit 2)
     +-- ContractError           the contract is invalid; carries Diagnostics (exit 1)
     +-- RunError                a run cannot start or go on (lock held, hash changed, ...)
     |    +-- RunLockedError     another `plan run` holds the run folder
     |    +-- NoUsableValueError an arm ended with no usable confirmation value (exit 4)
     +-- TrialProtocolError      a trainable broke the reporting protocol (fails that trial)

The CLI prints `str(error)` for any PlannerError and never a traceback;
anything else is an internal bug and gets a short message plus how to see the trace.
"""

from __future__ import annotations


class PlannerError(Exception):
    """Root of every error the planner raises on purpose."""

    exit_code: int = 1


class UsageError(PlannerError):
    """The command line is wrong or a named file cannot be read."""

    exit_code = 2


class ContractError(PlannerError):
    """The contract is invalid. `diagnostics` lists every problem found."""

    exit_code = 1

    def __init__(self, diagnostics):  # list[Diagnostic]
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.format() for d in self.diagnostics))


class RunError(PlannerError):
    """A run cannot start or continue."""

    exit_code = 3


class NoUsableValueError(RunError):
    """A run ended with an arm that has no usable confirmation value: nothing can be decided (exit 4)."""

    exit_code = 4


class RunLockedError(RunError):
    """Another process holds the run folder's lock."""


class TrialProtocolError(PlannerError):
    """A trainable broke the reporting protocol: the trial fails, it is not retried."""
