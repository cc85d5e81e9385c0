"""Two readings of a contract that the stages below and above the contract model share: which
`budget.unit` spellings count epochs, and which direction the decision reads its metric in.

A leaf that imports nothing, so the contract model (`plan validate`) reads them without loading
the record types and msgspec (planner._core.records), and the run side reads the same ones.
"""

from __future__ import annotations

# the budget.unit spellings of a budget in epochs (what LightningCallback counts)
EPOCH_UNITS = ("epoch", "epochs")


def decision_mode(mode: str, heldout: str | None, heldout_mode: str | None) -> str:
    """The direction the decision reads its metric in (a contract's `metric`): a held-out metric's
    own `heldout_mode` when it has one, else `mode`, which also directs the tuning."""
    return (heldout_mode or mode) if heldout else mode
