"""The audit's findings: pure functions of a run's `Evidence` (docs/audit.md says how each is
computed).

Each finding has a stable code, the arm it is about (or None), a kind —
`observation` (read off the log), `inference` (a reading of it that could be
wrong) or `guess` — one sentence, and its evidence (trial ids, steps, values).
A finding that a contract change could answer carries a `recipe`, which
`planner._audit.control` turns into the next control.

The noise model: an arm's completed confirmation seeds run the same config,
so they differ by seed noise only. A change of the arm's curve from step a to
step b is "more than seed noise" when the 95 % t-interval of the mean per-seed
change, y_s(b) - y_s(a) over the seeds s, excludes zero (paired by seed, so
a seed that sits high at every step does not count as noise).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from scipy import special

from planner._audit.evidence import Evidence, Trial, finite
from planner._core.errors import PlannerError
from planner._core.records import first_line, same_curve_every_seed
from planner._core.status import FAILED, TrialStatus
from planner._core.text import number
from planner._plan.explored import BOUNDARY, KeyReach, arm_reach
from planner._plan.pilot import Pilot
from planner._plan.seeds import spread_from_pilot
from planner._plan.space import frozen_space
from planner._stats.decide import no_spread, sign_rule
from planner._stats.power import detection_power, seeds_for_power
from planner._store import facts

PRACTICAL = 0.5  # still_improving and late_decline: a change of at least half min_effect
LAST_PART = 1 / 3  # still_improving looks at the last third of the reported steps
COST_RATIO = 1.20  # unequal_cost: one arm 20 % above another
COST_FLOOR_S = (
    1.0  # ... and at least this many resource-seconds per trial apart (timer and scheduler noise)
)
STEP_FLOOR_S = 0.005  # ... or this many seconds per step apart
CONFIDENCE = 0.95  # the CIs: of a curve's change over seeds, of the confirmation mean
# every seed showing the same change (no spread) is evidence when chance alone gives it at most
# this often: the one-sided level of the CIs above, so a sign rule and a CI say the same about the
# same seeds
SIGN_LEVEL = (1 - CONFIDENCE) / 2

KINDS = ("observation", "inference", "guess")
# Symptoms of the training or the measurement; the other codes are about the comparison's precision
# and cost.
SYMPTOMS = (
    "diverged",
    "diverged_region",
    "flat",
    "still_improving",
    "late_decline",
    "selected_at_boundary",
    "heldout_exposure",
    "failures",
    "seeds_identical",
    "tuned_values_identical",
    "violations",
)
CODES = SYMPTOMS + (
    "stopped_early_at_selected",
    "selection_optimism",
    "seed_spread",
    "unequal_cost",
)


@dataclass
class Finding:
    code: str
    arm: str | None
    kind: str
    summary: str
    evidence: list[dict[str, Any]]
    recipe: dict[str, Any] | None = field(
        default=None, compare=False
    )  # what the next control changes

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "arm": self.arm,
            "kind": self.kind,
            "summary": self.summary,
            "evidence": self.evidence,
        }


# None (an unbounded CI end or a missing figure) reads "none", as in plan run's sentences
_g = partial(number, none="none")


def orient(ev: Evidence, metric: str | None = None) -> float:
    """+1 when higher is better, -1 when lower is (for `metric`: the held-out metric has the
    decision's direction)."""
    return -1.0 if (ev.mode if metric is None else ev.mode_of(metric)) == "min" else 1.0


def arm_space(ev: Evidence, arm: str) -> dict[str, dict[str, Any]]:
    """The arm's tuning space as plain data: tuning.space overlaid with tuning.arm_space[arm]."""
    tuning = ev.contract.get("tuning") or {}
    space = dict(tuning.get("space") or {})
    space.update((tuning.get("arm_space") or {}).get(arm) or {})
    return space


def dimension(dim: object) -> tuple[str, Any] | None:
    """(kind, bounds) of a dimension written as plain data; None when unreadable."""
    if not isinstance(dim, dict):
        return None
    for kind in ("log_uniform", "uniform", "int", "choice"):
        if dim.get(kind) is not None:
            return kind, dim[kind]
    return None


# ---------------------------------------------------------------- curves and seed noise


@dataclass
class Curves:
    """An arm's confirmation curves of one metric on the steps every seed reported."""

    arm: str
    metric: str
    seeds: list[Any]
    trial_ids: list[str]
    steps: list[Any]
    values: list[list[float]]  # [seed][step]

    def mean(self, j: int) -> float:
        return statistics.fmean(row[j] for row in self.values)

    def sd(self, j: int) -> float:
        return (
            statistics.stdev([row[j] for row in self.values]) if len(self.values) > 1 else math.nan
        )


def confirmation_trials(ev: Evidence, arm: str) -> list[Trial]:
    """The arm's completed confirmation trials with a curve, one per seed (the contract's seed
    order)."""
    out = {
        t.seed: t
        for t in ev.of(arm=arm, phase="confirm")
        if t.status == TrialStatus.COMPLETED and t.curve
    }
    return [
        out[s]
        for s in sorted(
            out, key=lambda s: (not isinstance(s, int), s if isinstance(s, int) else 0, str(s))
        )
    ]


def curves(ev: Evidence, arm: str) -> Curves | None:
    """The decision metric's curves when every seed reports it at 2 or more common steps; else
    metric.name's."""
    trials = confirmation_trials(ev, arm)
    if len(trials) < 2:
        return None
    for metric in dict.fromkeys(m for m in (ev.decision_metric, ev.metric) if m):
        per_trial = []
        for t in trials:
            per_trial.append(
                {s: m[metric] for s, m in t.curve or [] if metric in m and math.isfinite(m[metric])}
            )
        common = set(per_trial[0])
        for p in per_trial[1:]:
            common &= set(p)
        steps = sorted(s for s in common if isinstance(s, int | float))
        if len(steps) >= 2:
            return Curves(
                arm,
                metric,
                [t.seed for t in trials],
                [t.trial_id for t in trials],
                steps,
                [[p[s] for s in steps] for p in per_trial],
            )
    return None


def identical_seeds(ev: Evidence, arm: str) -> list[Trial] | None:
    """The arm's confirmation trials when 2 or more seeds reported exactly the same curves (the
    rule the run's own `seeds_identical` finding follows); else None."""
    trials = confirmation_trials(ev, arm)
    same = same_curve_every_seed((arm, t.seed, t.curve_key) for t in trials)
    return trials if arm in same else None


def _change(c: Curves, a: int, b: int, sign: float) -> tuple[float, float, bool]:
    """(mean oriented change from step a to step b, half-width of its CI, whether the changes show
    no spread) over the seeds, paired by seed."""
    diffs = [sign * (row[b] - row[a]) for row in c.values]
    n = len(diffs)
    sd = statistics.stdev(diffs) if n > 1 else math.nan
    return (
        statistics.fmean(diffs),
        float(special.stdtrit(n - 1, 0.5 + CONFIDENCE / 2)) * sd / math.sqrt(n),
        _tied(diffs),
    )


def _sign_p(c: Curves, a: int, b: int, sign: float) -> float:
    """The one-sided p of the sign rule over seeds for changes from step a to step b that show no
    spread (decide's own rule for an exact shift)."""
    return float(sign_rule(np.asarray([[sign * (row[b] - row[a]) for row in c.values]]))[0])


def _tied(values: list[float]) -> bool:
    """No seed-to-seed spread in `values` (decide's degenerate-spread rule): a CI of width zero is
    no evidence, so nothing is inferred beyond it (a quantized metric, accuracy on few examples,
    ties)."""
    return len(values) > 1 and bool(no_spread(np.asarray([values], dtype=float))[0])


def _curve_evidence(c: Curves, steps: list[int], **extra: Any) -> dict[str, Any]:
    return {
        "metric": c.metric,
        "seeds": c.seeds,
        "trial_ids": c.trial_ids,
        "steps": [c.steps[j] for j in steps],
        "mean": [c.mean(j) for j in steps],
        "seed_sd": [c.sd(j) for j in steps],
        **extra,
    }


def curve_findings(ev: Evidence, arm: str, c: Curves) -> list[Finding]:
    """flat, still_improving and late_decline of one arm's confirmation curves."""
    sign, out = orient(ev, c.metric), []
    floor = PRACTICAL * (facts.contract_get(ev.contract, "acceptance.min_effect", 0.0) or 0.0)
    first, last = 0, len(c.steps) - 1
    change, half, _ = _change(c, first, last, sign)
    if change - half <= 0:
        out.append(
            Finding(
                "flat",
                arm,
                "observation",
                f"{arm}'s {c.metric} changes by {_g(change)} from step {c.steps[first]} to step "
                f"{c.steps[last]} (95 % CI ± {_g(half)} over {len(c.seeds)} seeds): no improvement "
                "beyond seed noise over the whole exposure.",
                [_curve_evidence(c, [first, last], change=change, ci_half_width=half)],
            )
        )
    cut = c.steps[last] - (c.steps[last] - c.steps[first]) * LAST_PART
    a = max(j for j, s in enumerate(c.steps) if s <= cut)
    if a < last:
        gain, half, tied = _change(c, a, last, sign)
        # seeds that all show the same gain have no spread for a CI: the sign rule over seeds reads
        # them
        p_sign = _sign_p(c, a, last, sign) if tied and gain > 0 else None
        if gain >= floor and (
            (not tied and gain - half > 0) or (p_sign is not None and p_sign <= SIGN_LEVEL)
        ):
            how = (
                f"every one of {len(c.seeds)} seeds gains exactly that: a sign test over seeds, "
                f"p = {p_sign:.2g}"
                if p_sign is not None
                else f"95 % CI ± {_g(half)} over {len(c.seeds)} seeds"
            )
            # with reports too sparse for a last third, the span is the whole curve: said so
            span = "the last third" if a > first else "its only reports, too few for a last third"
            out.append(
                Finding(
                    "still_improving",
                    arm,
                    "inference",
                    f"{arm}'s {c.metric} still improves by {_g(gain)} over {span} (step "
                    f"{c.steps[a]} to "
                    f"{c.steps[last]}; {how}): the comparison at this exposure "
                    "may be premature, and a slower learner's early score does not establish "
                    "inferiority.",
                    [
                        _curve_evidence(
                            c, [a, last], gain=gain, ci_half_width=half, floor=floor, p_sign=p_sign
                        )
                    ],
                    recipe={"change": "exposure"},
                )
            )
    peak = max(range(len(c.steps)), key=lambda j: (sign * c.mean(j), -j))
    if peak < last:
        drop, half, _ = _change(c, last, peak, sign)
        if drop - half > 0 and drop >= floor:
            out.append(
                Finding(
                    "late_decline",
                    arm,
                    "observation",
                    f"{arm}'s {c.metric} peaks at step {c.steps[peak]} and falls by {_g(drop)} by "
                    f"step {c.steps[last]} "
                    f"(95 % CI ± {_g(half)} over {len(c.seeds)} seeds): an early validation "
                    f"decline, which picking the "
                    "best checkpoint would hide, not answer.",
                    [_curve_evidence(c, [peak, last], drop=drop, ci_half_width=half, floor=floor)],
                )
            )
    return out


# ---------------------------------------------------------------- divergence


def diverged(ev: Evidence, arm: str) -> Finding | None:
    bad = [
        t
        for t in ev.of(arm=arm)
        if t.nonfinite_step is not None or t.status == TrialStatus.DIVERGED
    ]
    if not bad:
        return None
    total = len(ev.of(arm=arm))
    phases = {p: sum(1 for t in bad if t.phase == p) for p in ("tune", "confirm", "reeval")}
    where = ", ".join(f"{n} in {p}" for p, n in phases.items() if n)
    evidence = [
        {
            "trial_id": t.trial_id,
            "phase": t.phase,
            "seed": t.seed,
            "status": t.status,
            "step": t.nonfinite_step,
            "metric": t.nonfinite_metric,
            "params": t.params,
        }
        for t in bad
    ]
    shared = _shared_params(bad)
    if shared:
        evidence.append({"shared_params": shared})
    said = "; ".join(f"{k} {v}" for k, v in _describe_shared(shared).items())
    return Finding(
        "diverged",
        arm,
        "observation",
        f"{len(bad)} of {total} trials of {arm} diverged ({where}): a decision metric went "
        f"non-finite" + (f" (their params: {said})." if said else "."),
        evidence,
    )


def _shared_params(trials: list[Trial]) -> dict[str, Any]:
    """Per param key: the one value every trial has, or the [min, max] of numeric values."""
    keys = set().union(*(t.params for t in trials)) if trials else set()
    out: dict[str, Any] = {}
    for key in sorted(keys):
        values = [t.params.get(key) for t in trials]
        if all(v == values[0] for v in values):
            out[key] = {"value": values[0]}
        elif len(numbers := [v for v in values if finite(v)]) == len(values):
            out[key] = {"min": min(numbers), "max": max(numbers)}
    return out


def _describe_shared(shared: dict[str, Any]) -> dict[str, str]:
    return {
        k: f"= {_g(v['value'])}" if "value" in v else f"in [{_g(v['min'])}, {_g(v['max'])}]"
        for k, v in shared.items()
    }


def diverged_region(ev: Evidence, arm: str) -> list[Finding]:
    """Tuning divergence separated from the rest at one end of a tuned key's range."""
    tune = ev.of(arm=arm, phase="tune")
    bad = [t for t in tune if t.nonfinite_step is not None or t.status == TrialStatus.DIVERGED]
    if len(bad) < 2:
        return []
    first = min((t.nonfinite_step for t in bad if finite(t.nonfinite_step)), default=None)
    out = []
    for key, dim in arm_space(ev, arm).items():
        kb = dimension(dim)
        if kb is None or kb[0] == "choice":
            continue
        d = [t for t in bad if finite(t.params.get(key))]
        n = [
            t
            for t in tune
            if t not in bad
            and finite(t.params.get(key))
            and (first is None or (finite(t.exposure) and t.exposure >= first))
        ]
        if len(d) < 2 or not n:
            continue
        d_values, n_values = [t.params[key] for t in d], [t.params[key] for t in n]
        if min(d_values) > max(n_values):
            side, edge, other = "high", min(d_values), max(n_values)
        elif max(d_values) < min(n_values):
            side, edge, other = "low", max(d_values), min(n_values)
        else:
            continue
        at = "≥" if side == "high" else "≤"
        out.append(
            Finding(
                "diverged_region",
                arm,
                "inference",
                f"In tuning, every {arm} trial with {key} {at} {_g(edge)} diverged ({len(d)} "
                f"trials) and none of the "
                f"{len(n)} that reached step {first} with {key} {'≤' if side == 'high' else '≥'} "
                f"{_g(other)} did: "
                f"divergence sits at the {side} end of {key}'s range {list(kb[1])}.",
                [
                    {
                        "key": key,
                        "range": list(kb[1]),
                        "side": side,
                        "diverged_from": edge,
                        "stable_up_to": other,
                        "diverged": sorted(d_values),
                        "stable": sorted(n_values),
                        "first_step": first,
                        "trial_ids": [t.trial_id for t in d],
                    }
                ],
                recipe={"change": "narrow", "key": key, "side": side, "edge": edge},
            )
        )
    return out


# ---------------------------------------------------------------- selection


def _selected(ev: Evidence, arm: str) -> dict[str, Any]:
    return ((ev.selection or {}).get("arms") or {}).get(arm) or {}


def selected_at_boundary(ev: Evidence, arm: str) -> list[Finding]:
    """A selected value at the edge of its declared range, or at the edge of what the draws explored
    with room left beyond it (the smallest or largest value drawn, the declared range going on past
    it): either way the arm's optimum may lie where nothing was tried. Where it sits is computed
    once, by planner._plan.explored, as the decision and the report say it."""
    sel = _selected(ev, arm)
    chosen = sel.get("params") or {}
    space = frozen_space(ev.contract, arm)
    draws = [t.params or {} for t in ev.of(arm=arm, phase="tune")]
    out = []
    for k in arm_reach(
        arm, {key: space[key] for key in chosen if key in space}, draws, chosen
    ).keys:
        if k.edge_of == "explored":
            out += _explored_edge(arm, sel, k)
        elif k.edge_of == "range":
            scale = " (log scale)" if k.kind == "log_uniform" else ""
            u, bounds = k.position or 0.0, list(k.bounds)
            out.append(
                Finding(
                    "selected_at_boundary",
                    arm,
                    "observation",
                    f"{arm}'s selected {k.key} = {_g(k.selected)} lies at {100 * u:.0f} % of its "
                    f"range {bounds}{scale}, in the outer {100 * BOUNDARY:.0f} % at the {k.edge} "
                    f"end: the space may exclude {arm}'s optimum, and a tuned comparison can flip "
                    "once it does not.",
                    [_boundary_evidence(sel, k)],
                    recipe={"change": "widen", "key": k.key, "side": k.edge, "position": u},
                )
            )
    return out


def _boundary_evidence(sel: dict[str, Any], k: KeyReach, **extra: Any) -> dict[str, Any]:
    """The evidence of a selected_at_boundary finding: the selected value and where it lies."""
    return {
        "trial_id": sel.get("trial_id"),
        "key": k.key,
        "value": k.selected,
        "range": list(k.bounds),
        "kind": k.kind,
        "position": k.position,
        "side": k.edge,
        **extra,
    }


def _explored_edge(arm: str, sel: dict[str, Any], k: KeyReach) -> list[Finding]:
    """The selected value is the lowest or highest drawn, and the declared range goes on beyond it
    by more than the boundary band: a range the draws under-explored (the next control: more
    draws)."""
    scale = ", log scale" if k.kind == "log_uniform" else ""
    word = "smallest" if k.edge == "low" else "largest"
    share, beyond = k.share or 0.0, k.beyond or 0.0
    return [
        Finding(
            "selected_at_boundary",
            arm,
            "observation",
            f"{arm}'s selected {k.key} = {_g(k.selected)} is the {word} of its {k.draws} "
            f"draws, which explored {_g(k.low)}-{_g(k.high)}: {100 * share:.0f} % of the declared "
            f"range {list(k.bounds)}{scale}, {100 * beyond:.0f} % of it beyond the selected value "
            "never tried. The value sits at the edge of what was explored, so the optimum may lie "
            "beyond it; "
            "the decision's CI covers seed noise only, not this.",
            [
                _boundary_evidence(
                    sel, k, explored=[k.low, k.high], explored_share=k.share, draws=k.draws
                )
            ],
            recipe={"change": "draws", "key": k.key, "side": k.edge, "position": k.position},
        )
    ]


def selection_optimism(ev: Evidence, arm: str) -> Finding | None:
    """The selected trial's tuning score against the confirmation mean of the same metric."""
    sel = _selected(ev, arm)
    score, metric = sel.get("score"), ev.metric
    if not finite(score) or metric is None:
        return None
    values = [
        t.final[metric]
        for t in confirmation_trials(ev, arm)
        if metric in t.final and math.isfinite(t.final[metric])
    ]
    if len(values) < 2 or _tied(
        values
    ):  # seeds that tied: no spread to weigh the tuning score against
        return None
    n, mean, sd = len(values), statistics.fmean(values), statistics.stdev(values)
    half = float(special.stdtrit(n - 1, 0.5 + CONFIDENCE / 2)) * sd / math.sqrt(n)
    optimism = orient(ev) * (score - mean)
    if optimism <= half:
        return None
    return Finding(
        "selection_optimism",
        arm,
        "inference",
        f"{arm}'s selected trial scored {_g(score)} in tuning but its confirmation seeds average "
        f"{_g(mean)}: "
        f"{_g(optimism)} better in tuning, beyond the confirmation's {100 * CONFIDENCE:.0f} % CI "
        f"(± {_g(half)}): "
        "the winner's curse of picking the best of many noisy trials.",
        [
            {
                "trial_id": sel.get("trial_id"),
                "metric": metric,
                "tuning_score": score,
                "confirmation_mean": mean,
                "confirmation_sd": sd,
                "n": n,
                "ci_half_width": half,
                "optimism": optimism,
            }
        ],
    )


def _same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two tuned-params mappings hold the same values (floats to 1e-9 relative)."""
    if not a or set(a) != set(b):
        return False
    for key, value in a.items():
        other = b[key]
        if finite(value) and finite(other):
            if not math.isclose(float(value), float(other), rel_tol=1e-9, abs_tol=0.0):
                return False
        elif value != other:
            return False
    return True


def stopped_early_at_selected(ev: Evidence, arm: str) -> Finding | None:
    """The arm's tuning trial at another arm's selected values was stopped at the first rung, while
    the two arms were confirmed at different values: the arm may have lost that value to being
    judged early."""
    tuning = ev.contract.get("tuning") or {}
    early = tuning.get("early_stop") or {}
    if early.get("rule") in (None, "none"):
        return None
    grace = early.get("grace") or 1
    mine = _selected(ev, arm).get("params") or {}
    for other in ev.arms:
        theirs = _selected(ev, other).get("params") or {}
        if other == arm or not theirs or not mine or _same_values(mine, theirs):
            continue
        stopped = [
            t
            for t in ev.of(arm=arm, phase="tune")
            if _same_values(t.params, theirs)
            and t.status == TrialStatus.EARLY_STOPPED
            and finite(t.exposure)
            and t.exposure <= grace
        ]
        if not stopped:
            continue
        t = stopped[0]
        values = ", ".join(f"{k}={_g(v)}" for k, v in theirs.items())
        return Finding(
            "stopped_early_at_selected",
            arm,
            "inference",
            f"{arm}'s tuning trial {t.trial_id} at {other}'s selected {values} was stopped at the "
            f"first rung "
            f"(step {t.exposure}, early_stop.grace {grace}) while the arms were confirmed at "
            f"different values "
            f"({arm}: {', '.join(f'{k}={_g(v)}' for k, v in mine.items())}): a slower starter's "
            f"early score does not "
            f"establish that the value is worse for {arm}, so the arms may differ in how they "
            f"were judged, not only "
            "in the factor.",
            [
                {
                    "trial_id": x.trial_id,
                    "params": x.params,
                    "status": x.status,
                    "exposure": x.exposure,
                    "grace": grace,
                    "rule": early.get("rule"),
                    "other_arm": other,
                    "other_selected": _selected(ev, other).get("trial_id"),
                    "other_params": theirs,
                    "selected_params": mine,
                    "selected_trial": _selected(ev, arm).get("trial_id"),
                }
                for x in stopped
            ],
            recipe={"change": "no_early_stop"},
        )
    return None


# ---------------------------------------------------------------- the comparison


def _decision_rows(ev: Evidence) -> list[dict[str, Any]]:
    return [d for d in (ev.decisions or {}).get("decisions") or [] if isinstance(d, dict)]


def seed_spread(ev: Evidence) -> list[Finding]:
    """Decisions whose CI is wider than min_effect, with the seeds `plan power` asks for from this
    run's spread."""
    min_effect = facts.contract_get(ev.contract, "acceptance.min_effect")
    if not finite(min_effect):
        return []
    power = _power(ev)
    out = []
    for d in _decision_rows(ev):
        lo, hi = d.get("ci_low"), d.get("ci_high")
        if not (finite(lo) and finite(hi)) or hi - lo <= min_effect:
            continue
        item = {
            "decision": d.get("decision"),
            "effect": d.get("effect"),
            "ci_low": lo,
            "ci_high": hi,
            "width": hi - lo,
            "min_effect": min_effect,
            "n_baseline": d.get("n_baseline"),
            "n_arm": d.get("n_arm"),
            **power,
        }
        need = power.get("seeds_80")
        said = (
            f"; from this run's spread (sd {_g(power['sd'])}) `plan power` asks for {need} seeds "
            f"per arm for 80 % "
            f"power, {power['seeds_declared']} were declared"
            if need
            else f"; {power['why']}"
            if power.get("why")
            else ""
        )
        out.append(
            Finding(
                "seed_spread",
                d.get("arm"),
                "observation",
                f"{d.get('arm')}'s CI [{_g(lo)}, {_g(hi)}] is {_g(hi - lo)} wide, wider than "
                f"min_effect {_g(min_effect)}" + said + ".",
                [item],
                recipe={"change": "seeds", "seeds": need}
                if need and need > power["seeds_declared"] and d.get("decision") == "inconclusive"
                else None,
            )
        )
    return out


def _power(ev: Evidence) -> dict[str, Any]:
    """sd of the decision metric over the confirmation seeds and the seeds for 80 % power, as `plan
    power` has them."""

    declared = len(facts.contract_get(ev.contract, "seeds", []))
    metric = ev.decision_metric
    values: dict[str, dict[int, float]] = {}
    for t in ev.of(phase="confirm"):
        v = t.final.get(metric) if metric is not None else None
        if (
            t.status == TrialStatus.COMPLETED
            and v is not None
            and math.isfinite(v)
            and isinstance(t.seed, int)
        ):
            values.setdefault(t.arm, {})[t.seed] = v
    pilot = Pilot(ev.run_dir, str(metric), ev.baseline, ev.arms, values)
    acceptance = {
        k: facts.contract_get(ev.contract, f"acceptance.{k}")
        for k in ("test", "alpha", "min_effect", "correction")
    }
    test, alpha, min_effect = (
        acceptance["test"] or "welch",
        acceptance["alpha"] or 0.05,
        acceptance["min_effect"],
    )
    n_arms = len(ev.contract.get("arms") or []) or 1
    correction = acceptance["correction"] or "holm"
    try:
        sd, source = spread_from_pilot(pilot, test)
        need = seeds_for_power(
            sd, min_effect, alpha, 0.8, test, n_arms=n_arms, correction=correction
        )
    except (PlannerError, ValueError) as error:
        return {"seeds_declared": declared, "why": str(error)}
    return {
        "sd": sd,
        "sd_source": source,
        "seeds_declared": declared,
        "seeds_80": need,
        "power_declared": detection_power(
            declared, min_effect, sd, alpha, test, n_arms=n_arms, correction=correction
        ),
    }


def first_of_workers(ev: Evidence) -> list[Trial]:
    """The first trial each worker process ran (by start time): it paid the process's start-up
    (imports such as torch, a dataset's first read) that the worker's later trials did not. Empty
    without worker facts."""
    first: dict[str, Trial] = {}
    for t in ev.trials:
        if t.worker is None or t.started is None or t.phase == "reeval":
            continue
        if t.worker not in first or t.started < (first[t.worker].started or ""):
            first[t.worker] = t
    return list(first.values())


def _startup(ev: Evidence, firsts: list[Trial]) -> dict[str, Any] | None:
    """What the first trials of the workers paid before their first step, against the other
    trials."""
    ids = {t.trial_id for t in firsts}
    mine = [t.startup_s for t in firsts if t.startup_s is not None]
    others = [t.startup_s for t in ev.trials if t.trial_id not in ids and t.startup_s is not None]
    if not mine:
        return None
    extra = statistics.median(mine) - (statistics.median(others) if others else 0.0)
    return {
        "first_trials": sorted(ids),
        "median_startup_s": statistics.median(mine),
        "others_median_startup_s": statistics.median(others) if others else None,
        "extra_s": extra,
    }


def per_trial_cost(ev: Evidence, arm: str, excluded: set[str]) -> dict[str, Any] | None:
    """The arm's median seconds and resource-seconds per trial, over the trials that ran the full
    exposure, the first trial of each worker left out (while other trials remain)."""
    full = [
        t
        for t in ev.of(arm=arm)
        if t.phase != "reeval"
        and t.duration_s is not None
        and (ev.exposure is None or t.exposure == ev.exposure)
    ]
    kept = [t for t in full if t.trial_id not in excluded] or full
    if not kept:
        return None
    seconds = statistics.median(t.duration_s for t in kept if t.duration_s is not None)
    cpu = facts.contract_get(ev.contract, "budget.resources.cpu", 1.0) or 0.0
    gpu = facts.contract_get(ev.contract, "budget.resources.gpu", 0.0) or 0.0
    return {
        "arm": arm,
        "trials": len(kept),
        "excluded": len(full) - len(kept),
        "median_trial_s": seconds,
        "median_resource_s": seconds * (float(cpu) + float(gpu)),
    }


def unequal_cost(ev: Evidence, cost: list[dict[str, Any]]) -> Finding | None:
    """The arms' cost compared like for like: the median seconds per step, and the median per-trial
    resource-seconds of full-exposure trials without the start-up the first trial of each worker
    paid."""
    rows = [c for c in cost if c["trials"]]
    if len(rows) < 2:
        return None
    firsts = first_of_workers(ev)
    excluded = {t.trial_id for t in firsts}
    per_trial = [p for p in (per_trial_cost(ev, c["arm"], excluded) for c in rows) if p is not None]
    said = []
    for what, key, floor, have in (
        ("seconds per step", "median_s_per_step", STEP_FLOOR_S, rows),
        ("resource-seconds per trial", "median_resource_s", COST_FLOOR_S, per_trial),
    ):
        have = [c for c in have if finite(c.get(key)) and c[key] > 0]
        if len(have) < 2:
            continue
        hi, lo = max(have, key=lambda c: c[key]), min(have, key=lambda c: c[key])
        if hi[key] > COST_RATIO * lo[key] and hi[key] - lo[key] >= floor:
            said.append((what, hi, lo, key))
    if not said:
        return None
    text = "; ".join(
        f"{what}: {hi['arm']} {_g(hi[key])} vs {lo['arm']} {_g(lo[key])} ({hi[key] / lo[key]:.2f} "
        f"x)"
        for what, hi, lo, key in said
    )
    startup = _startup(ev, firsts)
    left_out = (
        ""
        if not startup or not any(p["excluded"] for p in per_trial)
        else (
            f" The first trial of each worker ({len(startup['first_trials'])}: "
            f"{', '.join(startup['first_trials'][:3])}"
            f"{' ...' if len(startup['first_trials']) > 3 else ''}) is left out of the per-trial "
            f"figure: it paid a "
            f"start-up of {_g(startup['median_startup_s'])} s before its first step (the others "
            f"{_g(startup['others_median_startup_s'])} s), the worker's imports."
        )
    )
    by_arm = {p["arm"]: p for p in per_trial}
    starts = {t.trial_id: t.startup_s for t in firsts}
    evidence = [
        {
            **{
                k: c[k]
                for k in (
                    "arm",
                    "trials",
                    "trial_seconds",
                    "median_s_per_step",
                    "cpu_seconds",
                    "gpu_seconds",
                )
            },
            **{
                k: (by_arm.get(c["arm"]) or {}).get(k)
                for k in ("median_trial_s", "median_resource_s", "excluded")
            },
            "first_trials": {
                tid: s
                for tid, s in starts.items()
                if tid in {t.trial_id for t in ev.of(arm=c["arm"])}
            },
            "startup": startup,
        }
        for c in rows
    ]
    return Finding(
        "unequal_cost",
        said[0][1]["arm"],
        "observation",
        f"The arms' cost differs by more than {100 * (COST_RATIO - 1):.0f} % ({text}): a fact "
        f"about cost, "
        "kept apart from the decision." + left_out,
        evidence,
    )


# ---------------------------------------------------------------- the protocol


def heldout_exposure(ev: Evidence, found: list[dict[str, Any]]) -> list[Finding]:
    out = []
    seen: dict[str, list[dict[str, Any]]] = {}
    for v in found:
        if v["kind"] == "heldout_in_tuning":
            seen.setdefault(v["arm"], []).append(
                {"trial_id": v["trial_id"], "step": v["step"], "source": v["source"]}
            )
    for arm, items in seen.items():
        out.append(
            Finding(
                "heldout_exposure",
                arm,
                "observation",
                f"{len(items)} tuning trial(s) of {arm} reported the held-out metric "
                f"{ev.heldout}: the test set was seen while tuning.",
                items,
            )
        )
    ledger = facts.heldout_ledger(ev.records, ev.contract)
    if ledger.get("over_cap"):
        out.append(
            Finding(
                "heldout_exposure",
                None,
                "observation",
                f"The held-out metric {ev.heldout} was evaluated {ledger['evaluations']} times, "
                f"over the "
                f"cap of {ledger['cap']}.",
                [ledger],
            )
        )
    return out


def other_violations(found: list[dict[str, Any]]) -> list[Finding]:
    """Logged or found protocol and data violations other than held-out exposure, per arm."""
    by_arm: dict[Any, list[dict[str, Any]]] = {}
    for v in found:
        if v["kind"] != "heldout_in_tuning":
            by_arm.setdefault(v["arm"], []).append(v)
    out = []
    for arm, items in by_arm.items():
        kinds: dict[str, int] = {}
        for v in items:
            kinds[v["kind"]] = kinds.get(v["kind"], 0) + 1
        out.append(
            Finding(
                "violations",
                arm,
                "observation",
                f"{len(items)} violation(s) on {arm}'s trials: "
                + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                + ".",
                [
                    {k: v[k] for k in ("trial_id", "phase", "kind", "step", "detail", "source")}
                    for v in items
                ],
            )
        )
    return out


def failures(ev: Evidence) -> list[Finding]:
    by_arm: dict[Any, list[dict[str, Any]]] = {}
    for f in facts.failures(ev.records):
        if f["status"] in FAILED:
            by_arm.setdefault(f["arm"], []).append(f)
    out = []
    for arm, items in by_arm.items():
        statuses: dict[str, int] = {}
        for f in items:
            statuses[f["status"]] = statuses.get(f["status"], 0) + 1
        phases = sorted({f["phase"] for f in items})
        out.append(
            Finding(
                "failures",
                arm,
                "observation",
                f"{len(items)} trial(s) of {arm} ended without a result ("
                + ", ".join(f"{k} {n}" for k, n in sorted(statuses.items()))
                + f"; in {', '.join(phases)}): "
                + _errors_said(items),
                [
                    {
                        **{
                            k: f[k]
                            for k in (
                                "trial_id",
                                "phase",
                                "seed",
                                "status",
                                "attempts",
                                "error_type",
                                "where",
                            )
                        },
                        "message": first_line(f["message"]),
                    }
                    for f in items
                ],
            )
        )
    return out


def _errors_said(items: list[dict[str, Any]]) -> str:
    """Each error of the failed trials on one line, grouped as `plan run` groups them; the
    tracebacks stay in trials.jsonl and the trials' logs."""
    groups = facts.failure_groups(items)
    shown = "; ".join(
        g["error"] + (f" (in {g['count']} trials, first {g['first']})" if g["count"] > 1 else "")
        for g in groups[:3]
    )
    return (
        shown.rstrip(".")
        + (f"; and {len(groups) - 3} more errors" if len(groups) > 3 else "")
        + "."
    )


def seeds_identical_finding(ev: Evidence, arm: str) -> Finding | None:
    same = identical_seeds(ev, arm)
    logged = [
        f
        for f in _logged_findings(ev)
        if f.get("code") == "seeds_identical" and f.get("arm") in (arm, None)
    ]
    if same is None and not logged:
        return None
    evidence: list[dict[str, Any]] = []
    if same is not None:
        evidence.append(
            {
                "seeds": [t.seed for t in same],
                "trial_ids": [t.trial_id for t in same],
                "steps": len(same[0].curve or []),
            }
        )
    evidence += [{"source": "decisions.json", **f} for f in logged]
    n = len(same) if same is not None else "the"
    return Finding(
        "seeds_identical",
        arm,
        "observation",
        f"{arm}'s {n} confirmation seeds reported identical curves: the seed does not reach the "
        "randomness, so the seeds are one run repeated and the CI measures nothing.",
        evidence,
    )


def tuned_values_finding(ev: Evidence, arm: str) -> Finding | None:
    """The run's decision found that the arm's tuning trials with different params reported the
    same curves (decisions.json `tuned_values_identical`): the tuned values did not reach the
    run."""
    logged = [
        f
        for f in _logged_findings(ev)
        if "tuned_values_identical" in (f.get("kind"), f.get("code")) and f.get("arm") == arm
    ]
    if not logged:
        return None
    n = logged[0].get("trials", "the")
    return Finding(
        "tuned_values_identical",
        arm,
        "observation",
        f"{arm}'s {n} tuning trials with different params reported the same curves: the tuned "
        f"values "
        "do not reach the run, so its selection is arbitrary and the arm was not tuned.",
        [{"source": "decisions.json", **f} for f in logged],
    )


def _logged_findings(ev: Evidence) -> list[dict[str, Any]]:
    """Findings the run's own decisions.json lists (top level or per decision), if it has any."""
    doc = ev.decisions or {}
    out = [f for f in doc.get("findings") or [] if isinstance(f, dict)]
    for d in _decision_rows(ev):
        out += [{"arm": d.get("arm"), **f} for f in d.get("findings") or [] if isinstance(f, dict)]
    return out


# ---------------------------------------------------------------- all of them


def find_all(ev: Evidence, cost: list[dict[str, Any]]) -> list[Finding]:
    """Every finding of the run, in a stable order: by code (CODES order), then arm order."""
    found: list[Finding] = []
    for arm in ev.arms:
        d = diverged(ev, arm)
        if d:
            found.append(d)
        found += diverged_region(ev, arm)
        same = seeds_identical_finding(ev, arm)
        if same:
            found.append(same)
        c = curves(ev, arm)
        if c is not None and identical_seeds(ev, arm) is None:
            found += curve_findings(ev, arm, c)
        found += selected_at_boundary(ev, arm)
        early = stopped_early_at_selected(ev, arm)
        if early:
            found.append(early)
        untuned = tuned_values_finding(ev, arm)
        if untuned:
            found.append(untuned)
        opt = (
            None if untuned else selection_optimism(ev, arm)
        )  # no optimism in picking among equal trials
        if opt:
            found.append(opt)
    found += seed_spread(ev)
    cost_finding = unequal_cost(ev, cost)
    if cost_finding:
        found.append(cost_finding)
    violations = facts.violations(ev.records, ev.contract)
    found += heldout_exposure(ev, violations) + failures(ev) + other_violations(violations)
    order = {c: i for i, c in enumerate(CODES)}
    arms: dict[str | None, int] = {a: i for i, a in enumerate(ev.arms)}
    found.sort(key=lambda f: (order.get(f.code, 99), arms.get(f.arm, -1 if f.arm is None else 98)))
    return found
