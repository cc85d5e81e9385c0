"""What ran, from the log alone: one row per materially different recipe, and what evidence is missing.

A recipe is an arm with its selected params (the confirmation and
re-evaluation trials of one arm that received the same params) or an arm's
tuning sweep (many sampled params, summarized by their range). The config a
row shows is the one the trials received (trial records' `config`), against
the baseline's, never today's checkout.
"""

from __future__ import annotations

import statistics
from typing import Any

from planner._audit.evidence import Evidence, Trial, finite
from planner._audit.findings import Finding, curves, identical_seeds
from planner._contract.paths import MISSING, config_diff
from planner._core.status import TrialStatus
from planner._store import facts


def _counts(values: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items()))


def _row(arm: str, phase: str, trials: list[Trial], params: dict[str, Any], base: dict[str, Any] | None,
         sampled: bool) -> dict[str, Any]:
    exposures = [t.exposure for t in trials if finite(t.exposure)]
    slopes = [t.s_per_step for t in trials if t.s_per_step is not None]
    config = next((t.config for t in trials if t.config), None)
    differs = {}
    if config is not None and base is not None:
        differs = {path: "<absent>" if value is MISSING else value for path, _, value in config_diff(base, config)
                   if path not in params}
    return {
        "arm": arm, "phase": phase, "params": params, "sampled": sampled, "trials": len(trials),
        "seeds": sorted({t.seed for t in trials}, key=str), "statuses": _counts([t.status for t in trials]),
        "exposure": {"min": min(exposures), "max": max(exposures)} if exposures else None,
        "s_per_step": statistics.median(slopes) if slopes else None,
        "config_vs_baseline": differs,
    }


def what_ran(ev: Evidence) -> list[dict[str, Any]]:
    """The rows of What ran: per arm, its tuning sweep, then each recipe it confirmed or re-evaluated."""
    base_trial = next((t for t in ev.trials if t.arm == ev.baseline and t.config and t.phase != "tune"),
                      next((t for t in ev.trials if t.arm == ev.baseline and t.config), None))
    base_config = base_trial.config if base_trial else None
    selection = (ev.selection or {}).get("arms") or {}
    rows = []
    for arm in ev.arms:
        tune = ev.of(arm=arm, phase="tune")
        if tune:
            keys = sorted(set().union(*(t.params for t in tune)))
            ranges = {}
            for k in keys:
                vals = [t.params[k] for t in tune if k in t.params]
                ranges[k] = ({"min": min(vals), "max": max(vals)} if all(finite(v) for v in vals)
                             else {"values": sorted({str(v) for v in vals})})
            rows.append(_row(arm, "tune", tune, ranges, base_config, True))
        groups: dict[tuple[str, str], list[Trial]] = {}
        for t in ev.of(arm=arm):
            if t.phase != "tune":
                groups.setdefault((t.phase, repr(sorted(t.params.items()))), []).append(t)
        for (phase, _), trials in groups.items():
            params = dict(trials[0].params) or dict((selection.get(arm) or {}).get("params") or {})
            rows.append(_row(arm, phase, trials, params, None if arm == ev.baseline else base_config, False))
    return rows


# ---------------------------------------------------------------- missing evidence

TRAIN_WORDS = ("train", "loss")
UPDATE_WORDS = ("grad", "update", "norm")


def missing_evidence(ev: Evidence, findings: list[Finding]) -> list[dict[str, str]]:
    """What the run lacks to tell the plausible mechanisms apart: each {what, why}."""
    out = []
    names: set[str] = set().union(*(t.metric_names for t in ev.trials)) if ev.trials else set()
    decided = {m for m in (ev.metric, ev.heldout) if m}
    others = names - decided
    if not ev.trials:
        return [{"what": "no trial ended", "why": "there is nothing to audit yet: every finding needs trial records"}]
    if not any(w in n.lower() for n in others for w in TRAIN_WORDS):
        out.append({"what": "no training-loss metric",
                    "why": "a flat or declining validation curve cannot be told apart as a failure to optimize or "
                           "to generalize without the training loss beside it"})
    if not any(w in n.lower() for n in names for w in UPDATE_WORDS):
        out.append({"what": "no gradient-norm or update-size metric",
                    "why": "exploding updates cannot be told from a learning rate that is merely too high, nor "
                           "divergence from a bad batch"})
    if not ev.heldout:
        out.append({"what": "no held-out metric (metric.heldout)",
                    "why": "the decision is taken on the metric the configs were selected on, so it carries the "
                           "selection's optimism"})
    code = (ev.identity or {}).get("code") or {}
    if ev.identity is None:
        out.append({"what": "no identity.json", "why": "which code, packages and host ran is not recorded"})
    elif not code.get("commit"):
        out.append({"what": "no commit in the identity",
                    "why": "the code that ran cannot be checked out again; only the trainable's source hash is known"})
    elif code.get("dirty"):
        out.append({"what": "uncommitted changes in the identity",
                    "why": f"the commit {str(code.get('commit'))[:12]} is not the code that ran; only a hash of the "
                           "diff is recorded"})
    if not facts.contract_get(ev.contract, "data.fingerprint"):
        out.append({"what": "no data fingerprint (data.fingerprint)",
                    "why": "whether every trial read the same data is not recorded"})
    for arm in ev.arms:
        trials = [t for t in ev.of(arm=arm, phase="confirm") if t.status == TrialStatus.COMPLETED]
        if len(trials) < 2:
            out.append({"what": f"fewer than 2 completed confirmation seeds of {arm}",
                        "why": "its seed noise is unknown, so flat, still_improving and late_decline are not computed"})
        elif identical_seeds(ev, arm) is not None:
            out.append({"what": f"the seed noise of {arm}",
                        "why": "its seeds gave identical curves (seeds_identical): curve findings are not computed"})
        elif curves(ev, arm) is None:
            out.append({"what": f"a curve of {arm}'s confirmation",
                        "why": "its seeds do not report the decision metric or the tuning metric at 2 or more "
                               "common steps"})
    return out
