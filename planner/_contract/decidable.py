"""Contracts whose decision is void or wrong before any compute is spent (docs/contract.md,
P414-P417, P904, P935).

P414 (error)    failures.diverged_value is not a finite number (.inf, -.inf, .nan): a diverged
                seed would give the decision an infinite or undefined mean.
P415 (error)    acceptance.rule margin with confirmation.looks > 1: the sequential looks stop and
                decide by the estimate rule, so the margin would not be what decided.
P416 (error)    metric.heldout_mode without metric.heldout: it directs nothing.
P417 (error)    metric.heldout reads as a metric of the other direction than metric.mode (tune on
                val_loss, min; decide on test_acc), and no metric.heldout_mode says how to read
                it: the decision would read it in mode's direction and call the better arm worse.
P935 (warning)  metric.name (or metric.heldout under metric.heldout_mode) reads as a metric of the
                other direction than its mode (val_acc with mode min): the tuning would select, or
                the decision favour, the worst.
P904 (warning)  the bootstrap (permutation) test cannot accept with this many seeds at the level
                its comparison gets (alpha, or alpha / m for the first arm under holm or
                bonferroni): every arm would end inconclusive after the compute is spent.
                `plan validate --strict` makes it an error.
"""

from __future__ import annotations

import math
import re

from planner._contract.load import LoadedYaml
from planner._contract.rules import _Report
from planner._core.diagnostics import Diagnostic
from planner._stats.attainable import fewest_seeds_to_accept, smallest_p_value

# Words that say which way a metric is better, as names spell them (`val_loss`, `test/acc`,
# `eval_f1`, `valPerplexity`).
_LOWER_IS_BETTER = frozenset(
    {
        "loss",
        "error",
        "err",
        "mse",
        "mae",
        "rmse",
        "nll",
        "perplexity",
        "ppl",
        "wer",
        "cer",
        "regret",
        "latency",
    }
)
_HIGHER_IS_BETTER = frozenset(
    {
        "acc",
        "accuracy",
        "f1",
        "auc",
        "auroc",
        "auprc",
        "precision",
        "recall",
        "bleu",
        "rouge",
        "iou",
        "miou",
        "dice",
        "r2",
        "top1",
        "top5",
        "reward",
        "map",
    }
)


def direction_of(name: str) -> str | None:
    """`min` or `max` when the metric's name says which way it is better (one kind of word in it),
    else None."""
    words = set(re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()))
    lower, higher = bool(words & _LOWER_IS_BETTER), bool(words & _HIGHER_IS_BETTER)
    return None if lower == higher else ("min" if lower else "max")


def _check_directions(report: _Report, metric) -> None:
    """P416, P417 and P935: the directions the tuning and the decision read their metrics in."""
    if metric.heldout_mode is not None and not metric.heldout:
        report.add(
            "P416",
            ("metric", "heldout_mode"),
            "metric.heldout_mode is given without metric.heldout: it directs nothing (the "
            "decision reads "
            "metric.name in metric.mode's direction)",
            "Remove heldout_mode, or name the held-out metric the decision uses in metric.heldout.",
        )
    said = direction_of(metric.name)
    if said is not None and said != metric.mode:
        report.add(
            "P935",
            ("metric", "mode"),
            f"metric.name {metric.name!r} reads as a metric to {_VERB[said]}, but metric.mode is "
            f"{metric.mode}: the tuning would select the worst config",
            f"Check the direction: mode: {said} if a {'lower' if said == 'min' else 'higher'} "
            f"{metric.name} is better.",
            severity="warning",
        )
    if not metric.heldout or metric.heldout == metric.name:
        return
    held = direction_of(metric.heldout)
    if metric.heldout_mode is None and held is not None and held != metric.mode:
        report.add(
            "P417",
            ("metric", "heldout"),
            f"metric.heldout {metric.heldout!r} reads as a metric to {_VERB[held]}, but the "
            f"decision would "
            f"read it in metric.mode's direction ({metric.mode}, set for {metric.name!r}): it "
            f"would call "
            "the better arm worse",
            f"Say how the held-out metric is read: heldout_mode: {held} (and mode: {metric.mode} "
            f"stays "
            f"the tuning's), or choose a held-out metric that moves like {metric.name}.",
        )
    elif metric.heldout_mode is not None and held is not None and held != metric.heldout_mode:
        report.add(
            "P935",
            ("metric", "heldout_mode"),
            f"metric.heldout {metric.heldout!r} reads as a metric to {_VERB[held]}, but "
            f"metric.heldout_mode "
            f"is {metric.heldout_mode}: the decision would favour the worse arm",
            f"Check the direction: heldout_mode: {held} if a "
            f"{'lower' if held == 'min' else 'higher'} "
            f"{metric.heldout} is better.",
            severity="warning",
        )


_VERB = {"min": "minimize", "max": "maximize"}


def check_decidable(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """P414, P415, P416, P417, P904 and P935."""
    report = _Report(loaded)
    _check_directions(report, contract.metric)
    value = contract.failures.diverged_value
    if value is not None and not math.isfinite(value):
        report.add(
            "P414",
            ("failures", "diverged_value"),
            f"failures.diverged_value is {value}: a diverged seed would enter the decision as a "
            "non-finite value, and the mean of the arm would be undefined",
            "Give the worst finite value of the metric (for accuracy 0.0; for a loss, a large loss "
            "such as 10.0), or remove diverged_value to make a diverged seed leave the arm "
            "incomplete.",
        )
    a = contract.acceptance
    if a.rule == "margin" and contract.confirmation.looks > 1:
        report.add(
            "P415",
            ("acceptance", "rule"),
            f"acceptance.rule margin with confirmation.looks {contract.confirmation.looks}: "
            f"sequential "
            "looks stop and decide by the estimate rule (CI above 0, estimate >= min_effect), so "
            "the "
            "margin would not be what decides",
            "Use rule: estimate with looks, or remove confirmation.looks to decide on all seeds "
            "by the margin.",
        )
    m = len(contract.arms)
    level = a.alpha if a.correction == "none" or m <= 1 else a.alpha / m
    n = len(contract.seeds)
    if (
        a.test == "bootstrap"
        and contract.confirmation.looks <= 1
        and n >= 2
        and smallest_p_value(n, n) > level
    ):
        need = fewest_seeds_to_accept(level)
        under = "" if level == a.alpha else f" ({a.alpha:g} / {m} arms under {a.correction})"
        report.add(
            "P904",
            ("acceptance", "test"),
            f"the bootstrap test cannot accept with {n} seeds per arm at alpha "
            f"{level:.4g}{under}: its "
            f"smallest p is {smallest_p_value(n, n):.3g}, so every arm would end inconclusive "
            f"with an "
            "unbounded CI after the compute is spent",
            f"Use at least {need} seeds per arm, or test: welch.",
            severity="warning",
        )
    return report.items
