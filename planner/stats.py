"""The statistics planner decides with, on plain lists of per-seed values.

The same code `plan run` decides with (docs/statistics.md explains it), usable
from a notebook on values from anywhere:

    >>> import planner.stats as ps
    >>> sgd = [0.912, 0.915, 0.909, 0.918, 0.911]
    >>> adam = [0.931, 0.928, 0.935, 0.929, 0.933]
    >>> round(ps.compare(sgd, adam).effect, 4)              # mean(adam) - mean(sgd)
    0.0182
    >>> [d.decision for d in ps.decide(sgd, {"adam": adam}, min_effect=0.01)]
    ['accept']
    >>> ps.seeds_needed(sd_of_differences=0.004, min_effect=0.005)  # seeds per arm, 80 % power
    8
    >>> design = ps.looks(12, 3)                            # 3 looks over 12 seeds
    >>> design.look_sizes
    (4, 8, 12)
    >>> ps.sequential_decision(design, 0, sgd[:4], adam[:4], min_effect=0.01).action
    'continue'

Values are the metric of one trial per seed, in the metric's units; `mode`
says whether larger (`"max"`, the default) or smaller (`"min"`) is better, and
every effect is the *improvement* of the arm over the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Literal

from planner._stats import decide as _decide
from planner._stats import power as _power
from planner._stats import sequential as _sequential
from planner._stats.decide import Comparison, Decision
from planner._stats.sequential import Design, SequentialStep

__all__ = [
    "Comparison",
    "Decision",
    "Design",
    "SequentialStep",
    "accept_probability",
    "compare",
    "decide",
    "detectable_effect",
    "looks",
    "pilot_sd",
    "pilot_sd_of_differences",
    "power",
    "seeds_needed",
    "sequential_decision",
]

Mode = Literal["max", "min"]
Test = Literal["welch", "paired", "bootstrap"]
Values = Sequence[float] | Mapping[int, float]


def compare(
    baseline: Values,
    arm: Values,
    *,
    mode: Mode = "max",
    test: Test = "welch",
    alpha: float = 0.05,
    rng_seed: int = 0,
) -> Comparison:
    """One arm against the baseline: the effect, its two-sided (1 - alpha) CI and the p-value.

    `baseline` and `arm` are lists of per-seed values, or mappings seed -> value.
    The `paired` test pairs mappings by seed (whatever their order) and lists by
    position. Values must be finite. `rng_seed` fixes the random splits of the
    `bootstrap` test when there are too many to enumerate.

        >>> c = compare([0.91, 0.92, 0.90], [0.94, 0.95, 0.93])
        >>> round(c.effect, 3), c.ci_low > 0
        (0.03, True)
    """
    base_values, base_seeds = _split(baseline, "baseline")
    arm_values, arm_seeds = _split(arm, "arm")
    if test == "paired" and (base_seeds is None) != (arm_seeds is None):
        raise ValueError(
            "the paired test pairs mappings by seed and lists by position: give both as mappings "
            "seed -> value, or both as lists"
        )
    return _decide.compare(
        base_values,
        arm_values,
        mode=mode,
        test=test,
        alpha=alpha,
        baseline_seeds=base_seeds,
        arm_seeds=arm_seeds,
        rng_seed=rng_seed,
    )


def decide(
    baseline: Values,
    arms: Mapping[str, Values],
    *,
    min_effect: float,
    mode: Mode = "max",
    test: Test = "welch",
    alpha: float = 0.05,
    correction: Literal["holm", "bonferroni", "none"] = "holm",
    rule: Literal["estimate", "margin"] = "estimate",
    diverged_value: float | None = None,
    metric: str = "the metric",
    baseline_name: str = "baseline",
    rng_seed: int = 0,
) -> list[Decision]:
    """The contract's decision rule for every arm: accept, reject, inconclusive or incomplete.

    `arms` maps each treatment arm's name to its values; `correction` spreads
    `alpha` over them (Holm by default, as in a contract). Every arm must have
    the seeds the baseline has, as a contract's confirmation does: lists of the
    same length (paired by position), or mappings with the same seeds (paired by
    seed, in any order). A NaN or infinite value is a diverged trial: it makes
    the arm `incomplete` unless `diverged_value` says what it counts as.
    `rule="estimate"` (the default) accepts when the CI is above 0 and the
    estimate reaches min_effect; `rule="margin"` only when the CI's lower end
    reaches min_effect.

        >>> [(d.arm, d.decision) for d in decide([0.91, 0.92, 0.90, 0.91],
        ...     {"adam": [0.94, 0.95, 0.93, 0.94]}, min_effect=0.01)]
        [('adam', 'accept')]
    """
    if not isinstance(arms, Mapping) or not arms:
        raise ValueError(
            "arms must map each treatment arm's name to its values, e.g. {'adam': [0.93, 0.94]}"
        )
    if baseline_name in arms:
        raise ValueError(
            f"an arm is named {baseline_name!r}, like the baseline: pass another baseline_name"
        )
    if len({isinstance(v, Mapping) for v in (baseline, *arms.values())}) > 1:
        raise ValueError(
            "give the baseline and every arm as lists (paired by position) or all as mappings "
            "seed -> value (paired by seed), not some of each"
        )
    planned = _seeds(baseline, "baseline")
    if len(planned) < 2:
        raise ValueError(
            f"the baseline needs at least 2 seeds (a spread needs two values), got {len(planned)}"
        )
    results = {baseline_name: _outcomes(baseline, "baseline")}
    for name, values in arms.items():
        seeds = _seeds(values, name)
        if sorted(seeds) != sorted(planned):
            raise ValueError(
                f"arm {name!r} has seeds {sorted(seeds)} but the baseline has {sorted(planned)}: "
                "the decision rule compares arms on the same seeds"
            )
        results[name] = _outcomes(values, name)
    acceptance = SimpleNamespace(
        min_effect=min_effect, alpha=alpha, test=test, correction=correction, rule=rule
    )
    return _decide.decide(
        acceptance,
        mode,
        results,
        baseline_name,
        planned_seeds=planned,
        arms=list(arms),
        diverged_value=diverged_value,
        metric=metric,
        rng_seed=rng_seed,
    )


def power(
    n: int,
    effect: float,
    sd: float | None = None,
    *,
    sd_of_differences: float | None = None,
    alpha: float = 0.05,
    test: Test = "paired",
    n_arms: int = 1,
    correction: str = "holm",
    rule: Literal["estimate", "margin"] = "estimate",
    min_effect: float | None = None,
) -> float:
    """The chance that `n` seeds per arm detect a true improvement `effect` (P(CI low > 0)).

    The paired test (the default, as in a contract) plans with `sd_of_differences`, the sd of the
    per-seed differences arm - baseline (`pilot_sd_of_differences`); welch and bootstrap with
    `sd`, the seed-to-seed sd of the metric within an arm (`pilot_sd`). With `n_arms` > 1 the
    level is the first step of the correction, alpha / n_arms. `rule="margin"` (give
    `min_effect`): the chance of its accept, P(CI low >= min_effect).

        >>> round(power(10, effect=0.01, sd_of_differences=0.01), 2)
        0.8
        >>> round(power(10, effect=0.01, sd=0.005, test="welch"), 2)
        0.99
    """
    _power.check_seeds(n)
    return _power.detection_power(
        n,
        effect,
        _plan_sd(test, sd, sd_of_differences),
        alpha,
        test,
        n_arms=n_arms,
        correction=correction,
        rule=rule,
        min_effect=min_effect,
    )


def seeds_needed(
    sd: float | None = None,
    min_effect: float | None = None,
    *,
    sd_of_differences: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    test: Test = "paired",
    n_arms: int = 1,
    correction: str = "holm",
    rule: Literal["estimate", "margin"] = "estimate",
    effect: float | None = None,
) -> int:
    """The fewest seeds per arm that detect `min_effect` with probability `power` (what `plan
    power` prints).

    The paired test (the default) plans with `sd_of_differences`, the sd of the per-seed
    differences; welch and bootstrap with `sd`, the per-arm seed-to-seed sd (see `power`). Given
    only `sd` for a paired plan it refuses, and its sentence says what welch would need.
    `rule="margin"`: the fewest seeds with which accept (CI low >= min_effect) has probability
    `power` at a true improvement `effect`, which must be given and above min_effect.

        >>> seeds_needed(sd_of_differences=0.004, min_effect=0.005)
        8
        >>> seeds_needed(sd=0.004, min_effect=0.005, test="welch")
        12
    """
    if min_effect is None:
        raise ValueError("give min_effect, the smallest improvement that matters")

    def welch_would_need() -> str:
        assert sd is not None  # _plan_sd asks only when sd was given
        try:
            n = _power.seeds_for_power(
                sd,
                min_effect,
                alpha,
                power,
                "welch",
                n_arms=n_arms,
                correction=correction,
                rule=rule,
                effect=effect,
            )
        except ValueError:
            return ""
        return f"; from that per-arm sd, test='welch' would need {n} seeds per arm"

    return _power.seeds_for_power(
        _plan_sd(test, sd, sd_of_differences, welch_would_need),
        min_effect,
        alpha,
        power,
        test,
        n_arms=n_arms,
        correction=correction,
        rule=rule,
        effect=effect,
    )


def detectable_effect(
    sd: float | None = None,
    n: int | None = None,
    *,
    sd_of_differences: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    test: Test = "paired",
    n_arms: int = 1,
    correction: str = "holm",
    rule: Literal["estimate", "margin"] = "estimate",
    min_effect: float | None = None,
) -> float:
    """The smallest true improvement `n` seeds per arm detect with probability `power` (inf if
    none); `rule="margin"` (give `min_effect`): accept with that probability. `sd` and
    `sd_of_differences` as in `power` (paired, the default: the sd of the per-seed differences)."""
    if n is None:
        raise ValueError("give n, the seeds per arm")
    _power.check_seeds(n)
    return _power.detectable_effect(
        _plan_sd(test, sd, sd_of_differences),
        n,
        alpha,
        power,
        test,
        n_arms=n_arms,
        correction=correction,
        rule=rule,
        min_effect=min_effect,
    )


def accept_probability(
    n: int,
    effect: float,
    sd: float | None = None,
    *,
    min_effect: float,
    sd_of_differences: float | None = None,
    alpha: float = 0.05,
    test: Test = "paired",
    rule: Literal["estimate", "margin"] = "estimate",
) -> float:
    """The chance of `accept` at a true improvement `effect`: CI low > 0 and estimated effect >=
    min_effect (rule estimate), or CI low >= min_effect (rule margin). `sd` and
    `sd_of_differences` as in `power` (paired, the default: the sd of the per-seed differences)."""
    _power.check_seeds(n)
    plan_sd = _plan_sd(test, sd, sd_of_differences)
    return _power.accept_probability(n, effect, plan_sd, alpha, min_effect, test, rule=rule)


def pilot_sd(values_by_arm: Mapping[str, Sequence[float]] | Sequence[Sequence[float]]) -> float:
    """The pooled seed-to-seed standard deviation of a pilot's arms (non-finite values ignored):
    the `sd` welch and bootstrap plan with."""
    if not isinstance(values_by_arm, Mapping):
        values_by_arm = {str(i): values for i, values in enumerate(values_by_arm)}
    return _power.pilot_sd(values_by_arm)


def pilot_sd_of_differences(baseline: Values, arm: Values) -> float:
    """The sd of a pilot's per-seed differences arm - baseline (mappings pair by seed, lists by
    position; non-finite differences ignored): the `sd_of_differences` the paired test plans
    with."""
    base_values, base_seeds = _split(baseline, "baseline")
    arm_values, arm_seeds = _split(arm, "arm")
    if (base_seeds is None) != (arm_seeds is None):
        raise ValueError(
            "pair the pilot's values alike: both as mappings seed -> value, or both as lists"
        )
    if base_seeds is None or arm_seeds is None:
        if len(base_values) != len(arm_values):
            raise ValueError("lists pair by position and need equal lengths")
        base_seeds = arm_seeds = list(range(len(base_values)))
    return _power.pilot_sd_of_differences(
        dict(zip(base_seeds, base_values, strict=True)),
        dict(zip(arm_seeds, arm_values, strict=True)),
    )


def _plan_sd(test: str, sd: float | None, sd_of_differences: float | None, other=None) -> float:
    """The sd a plan under `test` takes: paired, the sd of the per-seed differences; welch and
    bootstrap, the per-arm sd. Given the other one only, a ValueError that says which to give
    (`other()`: what welch would need from the per-arm sd, for the sentence)."""
    _decide.check_test(test)
    if test == "paired":
        if sd_of_differences is not None:
            return sd_of_differences
        if sd is None:
            raise ValueError(
                "give sd_of_differences, the sd of the per-seed differences arm - baseline that "
                "the paired test (the default) plans with (pilot_sd_of_differences)"
            )
        return _refuse_per_arm_sd(sd, other)
    if sd_of_differences is not None:
        raise ValueError(
            f"the {test} test plans with sd, the per-arm seed-to-seed sd (pilot_sd); "
            "sd_of_differences is the paired test's"
        )
    if sd is None:
        raise ValueError(f"give sd, the per-arm seed-to-seed sd the {test} test plans with")
    return sd


def _refuse_per_arm_sd(sd: float, other) -> float:
    said = other() if other is not None else ""
    raise ValueError(
        f"the paired test (the default) plans with the sd of the per-seed differences arm - "
        f"baseline, not a per-arm sd ({sd!r}): give sd_of_differences "
        f"(pilot_sd_of_differences), or test='welch' to plan with the per-arm sd{said}"
    )


def looks(
    n_seeds: int,
    looks: int,
    *,
    alpha: float = 0.05,
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming",
    futility: bool = False,
    test: Test = "welch",
) -> Design:
    """A sequential confirmation: `n_seeds` per arm in `looks` batches, with the bounds each look
    uses.

    `design.look_sizes` are the cumulative seeds per arm at each look. `alpha`
    is one comparison's two-sided level (with several arms, alpha / arms).
    The per-look thresholds are calibrated by simulation (about a second for
    welch, then cached).
    """
    return _sequential.plan_design(n_seeds, looks, alpha, spending, futility, test=test)


def sequential_decision(
    design: Design,
    look: int,
    baseline: Values,
    arm: Values,
    *,
    min_effect: float,
    mode: Mode = "max",
) -> SequentialStep:
    """What to do after look `look` (0-based) of `design`, given every value so far of both arms.

    `step.action` is `continue`, `accept`, `inconclusive`, `stop_futility` or,
    at the last look, `reject`; `step.reason` says why in a sentence.
    """
    base_values, base_seeds = _split(baseline, "baseline")
    arm_values, arm_seeds = _split(arm, "arm")
    return _sequential.sequential_decision(
        look,
        base_values,
        arm_values,
        design=design,
        mode=mode,
        min_effect=min_effect,
        baseline_seeds=base_seeds,
        arm_seeds=arm_seeds,
    )


def _split(values: Values, what: str) -> tuple[list[float], list[int] | None]:
    """(values, seeds or None): a mapping gives its seeds, a list none (paired by position)."""
    if isinstance(values, Mapping):
        try:
            return [float(v) for v in values.values()], [_seed(s) for s in values]
        except (TypeError, ValueError):
            raise ValueError(
                f"{what} as a mapping must map whole-number seeds to numbers"
            ) from None
    if isinstance(values, str | bytes):
        raise ValueError(
            f"{what} must be a list of per-seed values or a mapping seed -> value, not a string"
        )
    try:
        return [float(v) for v in values], None
    except (TypeError, ValueError):
        raise ValueError(
            f"{what} must be a list of per-seed values (numbers) or a mapping seed -> value"
        ) from None


def _seed(seed) -> int:
    if isinstance(seed, bool) or int(seed) != seed:
        raise ValueError(seed)
    return int(seed)


def _seeds(values: Values, what: str) -> list[int]:
    numbers, seeds = _split(values, what)
    return seeds if seeds is not None else list(range(len(numbers)))


def _outcomes(values: Values, what: str) -> list[tuple[int, float]]:
    numbers, seeds = _split(values, what)
    return list(zip(seeds if seeds is not None else range(len(numbers)), numbers, strict=True))


for _name in __all__:
    globals()[_name].__module__ = "planner.stats"
del _name
