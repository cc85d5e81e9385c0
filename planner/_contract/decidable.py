"""Contracts whose decision is void before any compute is spent (docs/contract.md, P414 and P904).

    P414 (error)    failures.diverged_value is not a finite number (.inf, -.inf, .nan): a diverged
                    seed would give the decision an infinite or undefined mean.
    P415 (error)    acceptance.rule margin with confirmation.looks > 1: the sequential looks stop and
                    decide by the estimate rule, so the margin would not be what decided.
    P904 (warning)  the bootstrap (permutation) test cannot accept with this many seeds at the level
                    its comparison gets (alpha, or alpha / m for the first arm under holm or
                    bonferroni): every arm would end inconclusive after the compute is spent.
                    `plan validate --strict` makes it an error.
"""

from __future__ import annotations

import math

from planner._contract.load import LoadedYaml
from planner._contract.rules import _Report
from planner._core.diagnostics import Diagnostic
from planner._stats.attainable import fewest_seeds_to_accept, smallest_p_value


def check_decidable(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """P414, P415 and P904."""
    report = _Report(loaded)
    value = contract.failures.diverged_value
    if value is not None and not math.isfinite(value):
        report.add("P414", ("failures", "diverged_value"),
                   f"failures.diverged_value is {value}: a diverged seed would enter the decision as a "
                   "non-finite value, and the mean of the arm would be undefined",
                   "Give the worst finite value of the metric (for accuracy 0.0; for a loss, a large loss "
                   "such as 10.0), or remove diverged_value to make a diverged seed leave the arm incomplete.")
    a = contract.acceptance
    if a.rule == "margin" and contract.confirmation.looks > 1:
        report.add("P415", ("acceptance", "rule"),
                   f"acceptance.rule margin with confirmation.looks {contract.confirmation.looks}: sequential "
                   "looks stop and decide by the estimate rule (CI above 0, estimate >= min_effect), so the "
                   "margin would not be what decides",
                   "Use rule: estimate with looks, or remove confirmation.looks to decide on all seeds by the margin.")
    m = len(contract.arms)
    level = a.alpha if a.correction == "none" or m <= 1 else a.alpha / m
    n = len(contract.seeds)
    if a.test == "bootstrap" and contract.confirmation.looks <= 1 and n >= 2 and smallest_p_value(n, n) > level:
        need = fewest_seeds_to_accept(level)
        under = "" if level == a.alpha else f" ({a.alpha:g} / {m} arms under {a.correction})"
        report.add("P904", ("acceptance", "test"),
                   f"the bootstrap test cannot accept with {n} seeds per arm at alpha {level:.4g}{under}: its "
                   f"smallest p is {smallest_p_value(n, n):.3g}, so every arm would end inconclusive with an "
                   "unbounded CI after the compute is spent",
                   f"Use at least {need} seeds per arm, or test: welch.", severity="warning")
    return report.items
