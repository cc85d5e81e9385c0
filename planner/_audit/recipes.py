"""What ran, from the log alone: one row per materially different recipe, and what evidence is
missing.

A recipe is an arm with its selected params (the confirmation and
re-evaluation trials of one arm that received the same params) or an arm's
tuning sweep (many sampled params, summarized by their range). The config a
row shows is the one the trials received (trial records' `config`), against
the baseline's, never today's checkout.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from planner._audit.evidence import Evidence, Trial, finite
from planner._audit.findings import Finding, curves, identical_seeds
from planner._contract.paths import MISSING, config_diff
from planner._core.errors import PlannerError
from planner._core.status import TrialStatus
from planner._store import facts
from planner._store.files import read_inside
from planner._trial.metrics_files import MAX_FILE_BYTES, csv_table, jsonl_table, trainer_state_table

_TABLES = {"csv": csv_table, "jsonl": jsonl_table, "hf_trainer_state": trainer_state_table}


def _counts(values: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items()))


def _row(
    arm: str,
    phase: str,
    trials: list[Trial],
    params: dict[str, Any],
    base: BaselineConfigs | None,
    sampled: bool,
) -> dict[str, Any]:
    exposures = [t.exposure for t in trials if finite(t.exposure)]
    slopes = [t.s_per_step for t in trials if t.s_per_step is not None]
    first = next((t for t in trials if t.config), None)
    differs = {}
    base_config = base.like(first) if base is not None and first is not None else None
    if first is not None and base is not None and base_config is not None:
        differs = {
            path: "<absent>" if value is MISSING else value
            for path, _, value in config_diff(base_config, first.config)
            if path not in params and path not in base.per_trial
        }
    return {
        "arm": arm,
        "phase": phase,
        "params": params,
        "sampled": sampled,
        "trials": len(trials),
        "seeds": sorted({t.seed for t in trials}, key=str),
        "statuses": _counts([t.status for t in trials]),
        "exposure": {"min": min(exposures), "max": max(exposures)} if exposures else None,
        "s_per_step": statistics.median(slopes) if slopes else None,
        "config_vs_baseline": differs,
    }


class BaselineConfigs:
    """The baseline's logged configs, to compare a trial's with like for like: the baseline trial
    of the same phase and seed when there is one (else its first confirmation trial, else its first
    trial), and never on the keys planner sets per trial (the command's seed_key and budget_key)."""

    def __init__(self, ev: Evidence):
        trials = [t for t in ev.trials if t.arm == ev.baseline and t.config]
        self.by_seed = {
            (t.phase, t.seed): t.config for t in reversed(trials)
        }  # the first of each wins
        fallback = next((t for t in trials if t.phase != "tune"), trials[0] if trials else None)
        self.fallback = fallback.config if fallback else None
        command = ev.contract.get("command")
        keys = (
            [command.get(k) for k in ("seed_key", "budget_key")]
            if isinstance(command, dict)
            else []
        )
        self.per_trial = {str(k) for k in keys if k}

    def like(self, trial: Trial) -> dict[str, Any] | None:
        return self.by_seed.get((trial.phase, trial.seed), self.fallback)


def what_ran(ev: Evidence) -> list[dict[str, Any]]:
    """The rows of What ran: per arm, its tuning sweep, then each recipe it confirmed or
    re-evaluated."""
    base_config = BaselineConfigs(ev)
    selection = (ev.selection or {}).get("arms") or {}
    rows = []
    for arm in ev.arms:
        tune = ev.of(arm=arm, phase="tune")
        if tune:
            keys = sorted(set().union(*(t.params for t in tune)))
            ranges = {}
            for k in keys:
                vals = [t.params[k] for t in tune if k in t.params]
                ranges[k] = (
                    {"min": min(vals), "max": max(vals)}
                    if all(finite(v) for v in vals)
                    else {"values": sorted({str(v) for v in vals})}
                )
            rows.append(_row(arm, "tune", tune, ranges, base_config, True))
        groups: dict[tuple[str, str], list[Trial]] = {}
        for t in ev.of(arm=arm):
            if t.phase != "tune":
                groups.setdefault((t.phase, repr(sorted(t.params.items()))), []).append(t)
        for (phase, _), trials in groups.items():
            params = dict(trials[0].params) or dict((selection.get(arm) or {}).get("params") or {})
            rows.append(
                _row(arm, phase, trials, params, None if arm == ev.baseline else base_config, False)
            )
    return rows


# ---------------------------------------------------------------- missing evidence

# A training loss by its name: loss, train_loss, training_loss, train/loss, loss_epoch,
# train_loss_step ..., never val_loss or test_loss (a substring "loss" is not a training loss).
TRAIN_LOSS = re.compile(
    r"^(?:train(?:ing)?[_/.\- ]?)?loss(?:[_/.\-](?:epoch|step))?$", re.IGNORECASE
)
# A gradient norm or an update size by its name: grad_norm (the Trainer's), gradient_norm,
# grad/norm, global_grad_norm, update_norm, param_update ... (a "norm" of another thing,
# layer_norm_weight, is not one).
UPDATE = re.compile(
    r"(?:^|[_/.\-])(?:grad(?:ient)?s?[_/.\-]?(?:l2[_/.\-]?)?norm|update[_/.\-]?(?:size|norm|ratio)"
    r"|param(?:eter)?[_/.\-]?update)(?:$|[_/.\-])",
    re.IGNORECASE,
)


def declared_names(ev: Evidence) -> dict[str, str]:
    """The metric names a `command:` contract declares (`command.metrics.names`: planner's name ->
    the column)."""
    command = ev.contract.get("command")
    metrics = (command or {}).get("metrics") if isinstance(command, dict) else None
    names = (metrics or {}).get("names") if isinstance(metrics, dict) else None
    return {str(k): str(v) for k, v in (names or {}).items()}


def training_loss(ev: Evidence, reported: set[str]) -> tuple[list[str], list[str]]:
    """(the training-loss names the trials reported, the ones declared but never reported).

    With `command.metrics.names`, only the declared names count: planner's name or its column is a
    training loss (`TRAIN_LOSS`). Without, the reported names that are one. `val_loss` is not a
    training loss.
    """
    declared = declared_names(ev)
    if declared:
        losses = [
            name
            for name, column in declared.items()
            if TRAIN_LOSS.match(name) or TRAIN_LOSS.match(column)
        ]
        return [n for n in losses if n in reported], [n for n in losses if n not in reported]
    return sorted(n for n in reported if TRAIN_LOSS.match(n)), []


def logged_columns(ev: Evidence) -> set[str]:
    """The columns of a `command:` script's own metrics file, as one completed confirmation trial
    left it (what the trial logged, read or not): the audit's evidence of what else the script
    measured."""
    command = ev.contract.get("command")
    spec = (command or {}).get("metrics") if isinstance(command, dict) else None
    if not isinstance(spec, dict) or spec.get("format") not in _TABLES:
        return set()
    root = Path(ev.run_dir)
    for t in reversed(ev.trials):
        if t.phase != "confirm" or t.status != TrialStatus.COMPLETED:
            continue
        attempts = sorted(
            (root / "trials" / t.trial_id).glob("attempt-*/hydra"), key=lambda p: p.parent.name
        )
        for hydra in reversed(attempts):
            files = sorted(
                hydra.glob(str(spec["file"])),
                key=lambda p: p.stat().st_mtime_ns if p.is_file() else 0,
            )
            for path in reversed(files):
                try:
                    data = read_inside(root, path, cap=MAX_FILE_BYTES)
                    return set(_TABLES[spec["format"]](data or b"", final=True).columns)
                except (PlannerError, OSError, ValueError):
                    continue
        return set()
    return set()


def missing_evidence(ev: Evidence, findings: list[Finding]) -> list[dict[str, str]]:
    """What the run lacks to tell the plausible mechanisms apart: each {what, why}."""
    out = []
    names: set[str] = set().union(*(t.metric_names for t in ev.trials)) if ev.trials else set()
    decided = {m for m in (ev.metric, ev.heldout) if m}
    others = names - decided
    if not ev.trials:
        return [
            {
                "what": "no trial ended",
                "why": "there is nothing to audit yet: every finding needs trial records",
            }
        ]
    losses, unread = training_loss(ev, others)
    if not losses:
        out.append(
            {
                "what": "no training-loss metric",
                "why": (
                    "a flat or declining validation curve cannot be told apart as a failure to "
                    "optimize or "
                    "to generalize without the training loss beside it"
                )
                + (
                    f"; command.metrics.names declares {', '.join(unread)}, but no trial reported "
                    f"it"
                    if unread
                    else ""
                ),
            }
        )
    if not any(UPDATE.search(n) for n in names | logged_columns(ev)):
        out.append(
            {
                "what": "no gradient-norm or update-size metric",
                "why": "exploding updates cannot be told from a learning rate that is merely too "
                "high, nor "
                "divergence from a bad batch",
            }
        )
    if not ev.heldout:
        out.append(
            {
                "what": "no held-out metric (metric.heldout)",
                "why": "the decision is taken on the metric the configs were selected on, so it "
                "carries the "
                "selection's optimism",
            }
        )
    code = (ev.identity or {}).get("code") or {}
    if ev.identity is None:
        out.append(
            {"what": "no identity.json", "why": "which code, packages and host ran is not recorded"}
        )
    elif not code.get("commit"):
        out.append(
            {
                "what": "no commit in the identity",
                "why": "the code that ran cannot be checked out again; only the trainable's "
                "source hash is known",
            }
        )
    elif code.get("dirty"):
        out.append(
            {
                "what": "uncommitted changes in the identity",
                "why": f"the commit {str(code.get('commit'))[:12]} is not the code that ran; only "
                f"a hash of the "
                "diff is recorded",
            }
        )
    if not facts.contract_get(ev.contract, "data.fingerprint") and not any(
        r.get("splits") for r in ev.records
    ):
        out.append(
            {
                "what": "no data fingerprint (data.fingerprint)",
                "why": "whether every trial read the same data is not recorded",
            }
        )
    for arm in ev.arms:
        trials = [t for t in ev.of(arm=arm, phase="confirm") if t.status == TrialStatus.COMPLETED]
        if len(trials) < 2:
            out.append(
                {
                    "what": f"fewer than 2 completed confirmation seeds of {arm}",
                    "why": "its seed noise is unknown, so flat, still_improving and late_decline "
                    "are not computed",
                }
            )
        elif identical_seeds(ev, arm) is not None:
            out.append(
                {
                    "what": f"the seed noise of {arm}",
                    "why": "its seeds gave identical curves (seeds_identical): curve findings are "
                    "not computed",
                }
            )
        elif curves(ev, arm) is None:
            out.append(
                {
                    "what": f"a curve of {arm}'s confirmation",
                    "why": "its seeds do not report the decision metric or the tuning metric at 2 "
                    "or more "
                    "common steps",
                }
            )
    return out
