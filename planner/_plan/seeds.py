"""`plan power` and `plan validate --pilot`: the seeds a contract needs, from a pilot's spread.

Pure functions; the CLI prints.

    spread_from_pilot(pilot, test)             -> (sd, how it was measured)
    power_summary(contract, sd, sd_source=...) -> dict
    underpowered_warning(loaded, summary)      -> Diagnostic P903 or None

"Power" is the chance that the improvement is detected, P(CI low > 0),
when the true improvement is exactly min_effect. "accept" also needs the
*estimated* effect to reach min_effect, so at a true effect of min_effect
it happens only about half the time whatever the seeds: the summary also
gives P(accept) and the true effect at which accept is 80 % likely.
Statistics: `planner._stats.power` (docs/statistics.md, docs/planning.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scipy import optimize

from planner._core.diagnostics import Diagnostic
from planner._core.errors import UsageError
from planner._plan.pilot import read_pilot
from planner._stats.power import (
    accept_probability,
    comparison_alpha,
    detectable_effect,
    detection_power,
    pilot_sd,
    seeds_for_power,
)

POWER_TARGETS = (0.8, 0.9)
UNDERPOWERED = 0.8  # validate --pilot warns below this power at min_effect


def spread_from_pilot(pilot, test: str) -> tuple[float, str]:
    """The sd to plan with: pooled within-arm sd (welch, bootstrap), or the sd of per-seed
    differences (paired)."""
    values = pilot.require_values()
    if test != "paired":
        counts = ", ".join(f"{arm} {len(v)}" for arm, v in values.items())
        try:
            sd = pilot_sd({a: list(v.values()) for a, v in values.items()})
        except ValueError as error:
            raise UsageError(f"the pilot {pilot.run_dir}: {error}") from None
        _no_spread(pilot, sd, "every seed of each arm gave the same value", counts)
        return (
            sd,
            f"pooled seed-to-seed sd of {pilot.metric} over the pilot's arms ({counts} seeds)",
        )
    base = values.get(pilot.baseline or "", {})
    squares, dof, used = 0.0, 0, []
    for arm, by_seed in values.items():
        if arm == pilot.baseline:
            continue
        diffs = [by_seed[s] - base[s] for s in base if s in by_seed]
        if len(diffs) >= 2:
            mean = sum(diffs) / len(diffs)
            squares += sum((d - mean) ** 2 for d in diffs)
            dof += len(diffs) - 1
            used.append(f"{arm} {len(diffs)}")
    if dof == 0:
        raise UsageError(
            f"the pilot {pilot.run_dir} has no arm with 2 seeds that the baseline "
            f"{pilot.baseline!r} also has: "
            "the paired test needs the sd of per-seed differences; give it with --sd"
        )
    _no_spread(
        pilot,
        math.sqrt(squares / dof),
        f"every seed gave the same difference arm - {pilot.baseline}",
        ", ".join(used),
    )
    return (
        math.sqrt(squares / dof),
        f"sd of per-seed differences arm - {pilot.baseline} in {pilot.metric} ({', '.join(used)} "
        f"seeds)",
    )


def other_test(test: str) -> str:
    """The test a plan is compared with: welch for the paired test, paired for the others (the
    design pairs the arms by seed, so the paired test is what a pilot can say the seeds would
    cost)."""
    return "welch" if test == "paired" else "paired"


def other_spread(pilot, test: str) -> tuple[str, float, str] | None:
    """(the other test, its sd, how it was measured) from the pilot, or None when the pilot cannot
    give it (no arm with 2 seeds the baseline shares, or no spread)."""
    other = other_test(test)
    try:
        sd, source = spread_from_pilot(pilot, other)
    except UsageError:
        return None
    return other, sd, source


def _no_spread(pilot, sd: float, what: str, counts: str) -> None:
    """A pilot whose seeds show no spread cannot plan seeds: say what it showed (not the --sd
    wording)."""
    if sd > 0:
        return
    raise UsageError(
        f"the pilot {pilot.run_dir} shows no seed-to-seed spread in {pilot.metric}: {what} "
        f"({counts} seeds), so "
        "there is no noise to plan seeds against. The trainable may ignore its seed (then every "
        "confirmation is "
        "the same run), or the metric is too coarse; fix that and run the pilot again, or give a "
        "spread with --sd"
    )


# The largest ratio of an effect to the seed-to-seed spread that power is figured for: beyond it
# the arithmetic overflows (an sd of 5e-324 divided into min_effect is infinite; an effect of 1e300
# gave `nan %`). A ratio as small as you like is answered: no number of seeds suffices.
MAX_EFFECT_TO_SD = 1e9


def _in_scale(sd: float, sd_source: str, effects: dict[str, float]) -> None:
    """Refuse an sd far too small beside an effect (`--sd 1e-300`, `--effect 1e300`) with a
    sentence, before power is figured from them."""
    for name, effect in effects.items():
        ratio = effect / sd
        if ratio > MAX_EFFECT_TO_SD:
            raise UsageError(
                f"the sd {sd:g} ({sd_source}) is too small beside {name} {effect:g}: their ratio "
                f"{ratio:.3g} is past {MAX_EFFECT_TO_SD:g}, where no power figure means anything. "
                "Give both in the decision metric's own units"
            )


def power_summary(
    contract,
    sd: float,
    *,
    sd_source: str = "given with --sd",
    effect: float | None = None,
    other: tuple[str, float, str] | None = None,
) -> dict[str, Any]:
    """Seeds for 80 % and 90 % power, P(accept), and the smallest effect the declared seeds detect.

    Under the default rule (`estimate`) power is P(CI low > 0) at a true effect of
    `effect` (default min_effect). Under `acceptance.rule: margin` power is P(accept) =
    P(CI low >= min_effect), which needs a true effect above min_effect to plan for:
    `effect` is required there (UsageError without it).

    contract: a `planner._contract.model.Contract`; sd: seed-to-seed sd of the
    decision metric (paired: of the per-seed differences), in metric units; other: (the other
    test, its sd, its source) from the same pilot (`other_spread`), to say what it would need.
    """
    if not (isinstance(sd, int | float) and math.isfinite(sd) and sd > 0):
        raise UsageError(f"the sd must be a positive number, got {sd}")
    a = contract.acceptance
    if effect is not None and not (
        isinstance(effect, int | float) and math.isfinite(effect) and effect > 0
    ):
        raise UsageError(f"the effect to plan for must be a positive number, got {effect}")
    if a.rule == "margin" and (effect is None or not effect > a.min_effect):
        raise UsageError(
            "under acceptance.rule margin, accept needs the CI's lower end to reach min_effect "
            f"{a.min_effect:g}, which at a true effect of min_effect happens alpha / 2 of the "
            f"time whatever the "
            "seeds: give the true effect to plan for, above min_effect (plan power --effect X)"
            + ("" if effect is None else f"; got {effect:g}")
        )
    effect = a.min_effect if effect is None else effect
    _in_scale(sd, sd_source, {"min_effect": a.min_effect, "the effect to plan for": effect})
    n_arms = len(contract.arms)
    level = comparison_alpha(a.alpha, n_arms, a.correction)
    n = len(contract.seeds)
    common = dict(n_arms=n_arms, correction=a.correction, rule=a.rule, min_effect=a.min_effect)

    def row(seeds: int | None) -> dict[str, Any]:
        if seeds is None:
            return {"seeds": None}
        return {
            "seeds": seeds,
            "trials": seeds * len(contract.all_arms),
            "power": detection_power(seeds, effect, sd, a.alpha, a.test, **common),
            "accept_probability": accept_probability(
                seeds, effect, sd, level, a.min_effect, a.test, rule=a.rule
            ),
        }

    needed = {}
    for target in POWER_TARGETS:
        try:
            needed[f"{round(100 * target)}"] = row(
                seeds_for_power(
                    sd,
                    a.min_effect,
                    a.alpha,
                    target,
                    a.test,
                    effect=effect,
                    n_arms=n_arms,
                    correction=a.correction,
                    rule=a.rule,
                )
            )
        except ValueError:
            needed[f"{round(100 * target)}"] = row(None)
    alternative = None if other is None else _other_test_seeds(contract, other, effect)
    declared = row(n)
    declared["detectable_effect_80"] = _finite(
        detectable_effect(sd, n, a.alpha, 0.8, a.test, **common)
    )
    declared["accept_80_at_effect"] = _finite(
        _effect_for_accept(n, sd, level, a.min_effect, a.test, 0.8, a.rule)
    )
    return {
        "name": contract.name,
        "metric": contract.metric.decision_metric,
        "mode": contract.metric.decision_mode,
        "test": a.test,
        "alpha": a.alpha,
        "correction": a.correction,
        "arms": n_arms,
        "comparison_alpha": level,
        "min_effect": a.min_effect,
        "rule": a.rule,
        "effect": effect,
        "sd": sd,
        "sd_source": sd_source,
        "needed": needed,
        "declared": declared,
        "underpowered": declared["power"] < UNDERPOWERED,
        "other_test": alternative,
    }


def _other_test_seeds(contract, other: tuple[str, float, str], effect: float) -> dict[str, Any]:
    """What the other test (`other_spread`) would need for 80 % power, at the same effect and
    level."""
    a, (name, sd, source) = contract.acceptance, other
    try:
        seeds = seeds_for_power(
            sd,
            a.min_effect,
            a.alpha,
            0.8,
            name,
            effect=effect,
            n_arms=len(contract.arms),
            correction=a.correction,
            rule=a.rule,
        )
    except ValueError:
        seeds = None
    return {"test": name, "sd": sd, "sd_source": source, "seeds_80": seeds}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _effect_for_accept(
    n: int,
    sd: float,
    level: float,
    min_effect: float,
    test: str,
    target: float,
    rule: str = "estimate",
) -> float:
    """The true effect at which P(accept) reaches `target` with n seeds (inf when it never does)."""

    def gap(e: float) -> float:
        return accept_probability(n, e, sd, level, min_effect, test, rule=rule) - target

    high = min_effect + sd
    for _ in range(60):
        if gap(high) > 0:
            return float(optimize.brentq(gap, 0.0, high, xtol=1e-10 * max(1.0, high)))
        high *= 2
    return math.inf


def pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def more_seeds(need: int | None) -> str:
    """What to do about too few seeds: `need` seeds per arm reach 80 % power; None: none up to
    100,000 do."""
    if need is None:
        return (
            "no number of seeds up to 100,000 per arm reaches 80 % power: the spread is too large "
            "beside "
            "min_effect (is min_effect in the metric's own units?)"
        )
    return f"use at least {need} seeds per arm"


def underpowered_warning(loaded, summary: dict[str, Any], pilot_dir: str):
    """P903: the declared seeds have less than 80 % power at min_effect (a Diagnostic at `seeds`),
    else None."""
    if not summary["underpowered"]:
        return None
    d, need = summary["declared"], summary["needed"]["80"]["seeds"]
    line, column = loaded.positions.position(("seeds",))
    more = f"For 80 % power {more_seeds(need)}" if need else more_seeds(need).capitalize()
    return Diagnostic(
        code="P903",
        severity="warning",
        path="seeds",
        file=str(loaded.path),
        line=line,
        column=column,
        message=(
            f"the {d['seeds']} declared seeds have {pct(d['power'])} power to detect min_effect "
            f"{summary['min_effect']:g} (sd {summary['sd']:.4g} from the pilot {pilot_dir}); "
            f"the smallest effect they detect with 80 % power is "
            f"{_detectable(d)}"
        ),
        hint=f"{more} (`plan power` shows the figures); or raise min_effect.",
    )


def with_pilot_power(result, pilot_dir: str, strict: bool = False):
    """`plan validate --pilot`: the ValidationResult with P903 added when the seeds are
    underpowered.

    A valid contract's summary gains "power" (the `power_summary`). With
    --strict the warning is an error, so the contract is no longer valid.
    """
    loaded = result.loaded
    if loaded is None:  # invalid or unreadable: nothing to plan with
        return result
    contract = loaded.contract
    pilot = read_pilot(pilot_dir, contract.metric.decision_metric)
    sd, source = spread_from_pilot(pilot, contract.acceptance.test)
    if (
        contract.acceptance.rule == "margin"
    ):  # planning for margin needs a true effect: plan power --effect
        result.summary = {**(result.summary or {}), "power": None}
        return result
    summary = power_summary(
        contract, sd, sd_source=source, other=other_spread(pilot, contract.acceptance.test)
    )
    result.summary = {**(result.summary or {}), "power": summary}
    warning = underpowered_warning(loaded, summary, pilot_dir)
    if warning is None:
        return result
    if strict:
        warning = replace(
            warning,
            severity="error",
            message=warning.message + " (a warning, made an error by --strict)",
        )
    result.diagnostics = sorted(
        [*result.diagnostics, warning], key=lambda d: (d.line, d.column, d.code)
    )
    if warning.severity == "error":
        result.summary, result.loaded = None, None
    else:
        loaded.warnings = [*loaded.warnings, warning]
    return result


def _detectable(d: Mapping[str, Any]) -> str:
    """The effect detectable at 80 % power, or `unbounded`."""
    found = d["detectable_effect_80"]
    return "unbounded" if found is None else format(found, ".4g")
