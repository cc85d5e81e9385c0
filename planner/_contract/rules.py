"""The matching rules: what makes a schema-valid contract unfair or broken.

Every rule has a stable code (the list is in docs/contract.md), points at the
YAML node that is wrong, and says in one sentence how to fix it. Rules about
the arms' configs run on the composed effective configs, never on the
override text, so a config group that silently changes a second key is caught.

The functions here are pure: they take the contract, the loaded YAML (for
positions), the composed configs and what importing the trainable showed (a
`TrainableProbe`, from planner._contract.probe, which is where user code runs),
and return Diagnostics.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from planner._contract.compose import (
    ComposedArms,
    ComposeProblem,
    _to_resolve,
    calls_resolver,
    near_path,
)
from planner._contract.load import LoadedYaml, format_path
from planner._contract.paths import MISSING, config_diff, flatten, get_path
from planner._contract.probe import TrainableProbe
from planner._core.contract_terms import EPOCH_UNITS
from planner._core.diagnostics import Diagnostic, Severity, short_repr
from planner._core.lazy import lazy_import
from planner._stats.looks import look_sizes

if TYPE_CHECKING:
    from planner._contract.model import Dimension

difflib = lazy_import(
    "difflib"
)  # the did-you-mean hints: only a contract with a mistake needs them

MIN_SEEDS_WARNING = 5
TPE_STARTUP_TRIALS = (
    10  # optuna.samplers.TPESampler's n_startup_trials, which planner leaves at its default
)
# The upper bound of every count a contract gives (P430, docs/contract.md): each far above a real
# experiment, and far below what would take the machine (a typo like `trials_per_arm: 1000000000`
# would have `plan run` build a plan of two billion trials). `exposure` stops where a report's step
# stays exact in a JSON reader (2**53).
MAX_ARMS = 200
MAX_SEEDS = 1_000
MAX_TUNING_SEEDS = 100
MAX_TRIALS_PER_ARM = 100_000
MAX_GRID_POINTS = 100_000
MAX_PLANNED_TRIALS = 1_000_000
MAX_EXPOSURE = 2**53
_WARMUP_KEY = re.compile(r"warm_?up", re.IGNORECASE)
_FRACTION_KEY = re.compile(r"ratio|frac|fraction|pct|percent|proportion", re.IGNORECASE)
_BATCH_KEY = re.compile(r"batch|accum|^bs$|micro_?batch", re.IGNORECASE)

_COMPOSE_CODES = {
    "missing_dir": "P200",
    "missing_config": "P201",
    "missing_option": "P202",
    "bad_override": "P203",
    "no_such_key": "P204",
    "resolver": "P205",
    "compose_failed": "P206",
    "not_a_file": "P207",
}
_COMPOSE_HINTS = {
    "P200": "Set config.dir to a folder that exists, relative to the contract file.",
    "P201": "Set config.name to a config file (without .yaml) inside config.dir.",
    "P202": "Use one of the options the group has.",
    "P203": "Write the override in Hydra's grammar: `group=option`, `key=value`, `+key=value` or "
    "`~key`.",
    "P204": "Use a key the config has (a near one is named when there is one); add a new key with "
    "`+key=value` "
    "only when the trainable reads it.",
    "P205": "Write the value itself, or reference another key like ${model.width}.",
    "P206": "Fix the override or the config files so that Hydra can compose them.",
    "P207": "Replace it with a regular YAML file (a copy, not a FIFO or a device), or name "
    "another config.",
}


class _Report:
    """Collects Diagnostics for one contract, placing each at its YAML node."""

    def __init__(self, loaded: LoadedYaml):
        self.loaded = loaded
        self.items: list[Diagnostic] = []

    def add(
        self,
        code: str,
        path: tuple[Any, ...],
        message: str,
        hint: str,
        *,
        key: bool = False,
        severity: Severity = "error",
    ) -> None:
        line, column = self.loaded.position(path, key=key)
        self.items.append(
            Diagnostic(
                code=code,
                severity=severity,
                message=message,
                path=format_path(path),
                file=self.loaded.file,
                line=line,
                column=column,
                hint=hint,
            )
        )


# how P4xx names a held-out metric that differs from the metric only in case or spacing
SPACING = " (in another case or spacing)"


def _arm_paths(contract) -> dict[str, tuple[Any, ...]]:
    """Arm name -> its YAML path (the first arm of a name wins)."""
    paths: dict[str, tuple[Any, ...]] = {}
    for i, arm in enumerate(contract.arms):
        paths.setdefault(arm.name, ("arms", i))
    paths[contract.baseline.name] = ("baseline",)
    return paths


def check_names(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """P303 duplicate arm names, P304 an arm named like the baseline. Names are told apart
    regardless of case: each arm has files named after it (configs/<arm>.yaml), one file for both
    on macOS or Windows."""
    report = _Report(loaded)
    seen: dict[str, int] = {}
    for i, arm in enumerate(contract.arms):
        name = arm.name.casefold()
        if name == contract.baseline.name.casefold():
            same = (
                "'s name"
                if arm.name == contract.baseline.name
                else f" name {contract.baseline.name!r} in another case"
            )
            report.add(
                "P304",
                ("arms", i, "name"),
                f"arm {arm.name!r} has the baseline{same}",
                "Give the arm a name of its own (names that differ only in case share their files "
                "on macOS "
                "and Windows).",
            )
        elif name in seen:
            twice = contract.arms[seen[name]].name
            how = "used twice" if twice == arm.name else f"{twice!r} in another case"
            report.add(
                "P303",
                ("arms", i, "name"),
                f"arm name {arm.name!r} is {how} (first by arms.{seen[name]})",
                "Give every arm a unique name (names that differ only in case share their files "
                "on macOS "
                "and Windows).",
            )
        seen.setdefault(name, i)
    return report.items


def _metric_key(name: str) -> str:
    """A metric name as P411 compares it: `VAL_ACC` and ` val_acc` are no other metric than
    `val_acc`."""
    return name.strip().casefold()


def check_bounds(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """P430: every count of the contract within its bound (arms, seeds, tuning seeds, trials per
    arm, grid points, exposure, and the planned trials they make), so no plan is built past what
    a machine holds."""
    report = _Report(loaded)
    tuning = contract.tuning
    counts: list[tuple[tuple[Any, ...], str, int, int]] = [
        (("arms",), "arms (the baseline counted)", len(contract.all_arms), MAX_ARMS),
        (("seeds",), "confirmation seeds", len(contract.seeds), MAX_SEEDS),
        (("budget", "exposure"), "budget.exposure", contract.budget.exposure, MAX_EXPOSURE),
    ]
    if tuning is not None:
        counts += [
            (("tuning", "seeds"), "tuning seeds", len(tuning.seeds), MAX_TUNING_SEEDS),
            (
                ("tuning", "trials_per_arm"),
                "tuning.trials_per_arm",
                tuning.trials_per_arm,
                MAX_TRIALS_PER_ARM,
            ),
        ]
        if tuning.sampler.name == "grid":
            for arm in contract.all_arms:
                space = {**tuning.space, **tuning.arm_space.get(arm.name, {})}
                points = _grid_size(space)
                counts.append(
                    (
                        ("tuning", "space"),
                        f"grid points of arm {arm.name!r}",
                        points,
                        MAX_GRID_POINTS,
                    )
                )
    for path, what, count, bound in counts:
        if count > bound:
            report.add(
                "P430",
                path,
                f"{what} is {count:,}, above planner's bound of {bound:,}: "
                "a typo, or an experiment no machine would finish",
                f"Use at most {bound:,}; split a larger study into several contracts.",
            )
    planned = planned_trials(contract)["total"]
    if not report.items and planned > MAX_PLANNED_TRIALS:
        report.add(
            "P430",
            ("tuning", "trials_per_arm") if tuning is not None else ("seeds",),
            f"the contract plans {planned:,} trials, above planner's bound of "
            f"{MAX_PLANNED_TRIALS:,} in one run",
            "Plan fewer arms, seeds or trials_per_arm; split a larger study into several "
            "contracts.",
        )
    return report.items


def check_static(contract, loaded: LoadedYaml) -> list[Diagnostic]:
    """Rules that need the contract only: seeds, tuning, budget, metric, confirmation."""
    report = _Report(loaded)
    report.items += check_bounds(contract, loaded)
    _duplicates(report, contract.seeds, ("seeds",), "confirmation seed")
    exposure = contract.budget.exposure
    if contract.metric.heldout is not None and _metric_key(contract.metric.heldout) == _metric_key(
        contract.metric.name
    ):
        report.add(
            "P411",
            ("metric", "heldout"),
            f"metric.heldout {contract.metric.heldout!r} is the tuning metric "
            f"{contract.metric.name!r}"
            f"{'' if contract.metric.heldout == contract.metric.name else SPACING}: "
            "the held-out metric must be a different one",
            "Name a metric the trainable reports on held-out data (like test_acc), or remove "
            "`heldout`.",
        )
    cap = contract.budget.max_heldout_evaluations
    confirm_evaluations = len(contract.all_arms) * len(contract.seeds)
    if contract.metric.heldout is not None and cap is not None and confirm_evaluations > cap:
        report.add(
            "P413",
            ("budget", "max_heldout_evaluations"),
            f"confirmation alone evaluates the held-out metric {contract.metric.heldout!r} "
            f"{confirm_evaluations} "
            f"times ({len(contract.all_arms)} arms x {len(contract.seeds)} seeds) but "
            f"budget.max_heldout_evaluations is {cap}",
            f"Raise max_heldout_evaluations to at least {confirm_evaluations}, or confirm fewer "
            f"arms or seeds.",
        )
    if contract.confirmation.looks > 1:
        try:
            look_sizes(len(contract.seeds), contract.confirmation.looks)
        except ValueError as error:
            report.add(
                "P410",
                ("confirmation", "looks"),
                f"confirmation.looks: {error}",
                "Every look adds new seeds and the first look needs at least 2 per arm.",
            )
    tuning = contract.tuning
    if tuning is not None:
        _duplicates(report, tuning.seeds, ("tuning", "seeds"), "tuning seed")
        confirm = set(contract.seeds)
        for j, seed in enumerate(tuning.seeds):
            if seed in confirm:
                report.add(
                    "P402",
                    ("tuning", "seeds", j),
                    f"tuning seed {seed} is also a confirmation seed: tuning on the seeds that "
                    f"confirm the winner inflates its score",
                    "Use tuning seeds that are not in `seeds` (for example 1000, 1001, ...).",
                )
        arm_names = [arm.name for arm in contract.all_arms]
        for name, space in tuning.arm_space.items():
            if name not in arm_names:
                close = difflib.get_close_matches(name, arm_names, n=1)
                report.add(
                    "P403",
                    ("tuning", "arm_space", name),
                    f"tuning.arm_space names {name!r}, which is not an arm",
                    f"Did you mean `{close[0]}`?"
                    if close
                    else f"Use one of the arms: {', '.join(arm_names)}.",
                    key=True,
                )
            for key in space:
                if not _inside(key, contract.factor.keys):
                    report.add(
                        "P404",
                        ("tuning", "arm_space", name, key),
                        f"tuning.arm_space.{name} tunes {key!r}, which is outside factor.keys "
                        f"{contract.factor.keys}: "
                        "arms would be tuned over different spaces for something that is not the "
                        "factor",
                        "Move it to tuning.space (the same for every arm), or add it to "
                        "factor.keys.",
                        key=True,
                    )
        if tuning.sampler.name == "grid":
            spaces: list[tuple[tuple[str, ...], dict[str, Dimension]]]
            spaces = [(("tuning", "space"), tuning.space)]
            spaces += [
                (("tuning", "arm_space", name), space) for name, space in tuning.arm_space.items()
            ]
            for where, space in spaces:
                for key, dim in space.items():
                    if dim.kind != "choice":
                        report.add(
                            "P406",
                            (*where, key),
                            f"the grid sampler takes only `choice` dimensions; {key!r} is "
                            f"{dim.kind}",
                            "List the values as `choice: [...]`, or use the tpe or random sampler.",
                        )
            size = _grid_size(tuning.space)
            if tuning.arm_space == {} and size and size != tuning.trials_per_arm:
                report.add(
                    "P902",
                    ("tuning", "trials_per_arm"),
                    f"the grid has {size} points but trials_per_arm is {tuning.trials_per_arm}",
                    f"Set trials_per_arm to {size} to visit each point once.",
                    severity="warning",
                )

        spaces = [(("tuning", "space"), tuning.space)]
        spaces += [
            (("tuning", "arm_space", name), space) for name, space in tuning.arm_space.items()
        ]
        for (
            where,
            space,
        ) in spaces:  # a sampled value reaches the config (and a command's Hydra app) as it is
            for key, dim in space.items():
                for j, option in enumerate(dim.choice or []):
                    if isinstance(option, str) and calls_resolver(option, hydra=False):
                        report.add(
                            "P205",
                            (*where, key, "choice", j),
                            f"{key!r} offers {option!r}, which calls a resolver; a sampled value "
                            f"must be plain",
                            "Write the value itself.",
                        )
        if tuning.sampler.name == "tpe" and tuning.trials_per_arm < TPE_STARTUP_TRIALS:
            given = "" if ("tuning", "sampler") in loaded.positions else " (the default)"
            report.add(
                "P905",
                ("tuning", "sampler")
                if ("tuning", "sampler") in loaded.positions
                else ("tuning", "trials_per_arm"),
                f"sampler tpe{given} gets {tuning.trials_per_arm} trials per sweep "
                f"(tuning.trials_per_arm), fewer "
                f"than its {TPE_STARTUP_TRIALS} start-up trials (Optuna's n_startup_trials): "
                f"every sweep is random "
                "search, and the tuning is weaker than `tpe` says",
                f"Give each sweep at least {TPE_STARTUP_TRIALS + 10} trials for TPE to model any "
                f"of them, or say "
                "`sampler: {name: random}`.",
                severity="warning",
            )
        grace = tuning.early_stop.grace
        if grace is not None and grace >= exposure:
            given = (
                "" if ("tuning", "early_stop", "grace") in loaded.positions else " (the default)"
            )
            report.add(
                "P407",
                ("tuning", "early_stop", "grace"),
                f"early_stop.grace is {grace}{given} but budget.exposure is {exposure}: no trial "
                f"could ever be stopped early",
                f"Use a grace below {exposure}, or early_stop rule none.",
            )
        k = tuning.selection.k
        if tuning.selection.rule == "mean_last_k" and k is not None and k > exposure:
            report.add(
                "P408",
                ("tuning", "selection", "k"),
                f"selection k is {k} but a trial reports at most budget.exposure = {exposure} "
                f"times",
                f"Use 1 <= k <= {exposure}.",
            )
    planned = planned_trials(contract)
    problem = max_trials_problem(planned, contract.budget.max_trials)
    if problem:
        report.add(
            "P409",
            ("budget", "max_trials"),
            problem,
            f"Raise max_trials to at least {planned['total']}, or plan fewer arms, seeds or "
            f"trials_per_arm.",
        )
    if len(contract.seeds) < MIN_SEEDS_WARNING:
        report.add(
            "P901",
            ("seeds",),
            f"only {len(contract.seeds)} confirmation seeds: seed-to-seed spread will make small "
            f"effects inconclusive",
            f"Use at least {MIN_SEEDS_WARNING} seeds (run `plan power` on a pilot to choose).",
            severity="warning",
        )
    return report.items


def _duplicates(report: _Report, seeds: list[int], where: tuple[Any, ...], what: str) -> None:
    first: dict[int, int] = {}
    for j, seed in enumerate(seeds):
        if seed in first:
            report.add(
                "P400",
                (*where, j),
                f"{what} {seed} is listed twice (also at position {first[seed] + 1})",
                "List each seed once.",
            )
        first.setdefault(seed, j)


def _grid_size(space) -> int:
    size = 1
    for dim in space.values():
        if dim.kind != "choice":
            return 0
        size *= len(dim.choice)
    return size


def planned_trials(contract) -> dict[str, int]:
    """Planned trials per phase: tune = arms x tuning seeds x trials_per_arm; confirm = arms x
    seeds.

    "Arms" counts the baseline too. Re-evaluations are not planned. The one
    count: `plan validate`, `plan estimate`, P409 and the plan's own lists
    (`planner._plan.trials.make_plan`, which checks that it made this many)
    all use it.
    """
    arms = len(contract.all_arms)
    tune = 0
    if contract.tuning is not None:
        tune = arms * len(contract.tuning.seeds) * contract.tuning.trials_per_arm
    confirm = arms * len(contract.seeds)
    return {"tune": tune, "confirm": confirm, "total": tune + confirm}


def max_trials_problem(planned: dict[str, int], max_trials: int | None) -> str | None:
    """The `budget.max_trials` rule (P409): why `planned` (as from `planned_trials`) does not fit,
    or None."""
    if max_trials is None or planned["total"] <= max_trials:
        return None
    return (
        f"the contract plans {planned['total']} trials (tune {planned['tune']}, confirm "
        f"{planned['confirm']}) "
        f"but budget.max_trials is {max_trials}"
    )


def _inside(path: str, keys: list[str]) -> bool:
    """Is the dotted `path` one of `keys` or below one of them?"""
    return any(path == key or path.startswith(key + ".") for key in keys)


def compose_diagnostics(
    contract, loaded: LoadedYaml, problems: list[ComposeProblem]
) -> list[Diagnostic]:
    """P200-P206: the problems composition found, each at the override (or config key) at fault."""
    report = _Report(loaded)
    arm_paths = _arm_paths(contract)
    seen = set()
    for problem in problems:
        key = (problem.kind, problem.source, problem.index, problem.message)
        if key in seen:
            continue
        seen.add(key)
        code = _COMPOSE_CODES.get(problem.kind, "P206")
        path: tuple[Any, ...]
        if problem.source == "config":
            if problem.index is not None:
                path = ("config", "overrides", problem.index)
            else:
                path = {
                    "P200": ("config", "dir"),
                    "P201": ("config", "name"),
                    "P207": ("config", "name"),
                }.get(code, ("config",))
        else:
            base = arm_paths.get(problem.source, ())
            path = (*base, "overrides", problem.index) if problem.index is not None else base
        where = "" if problem.source == "config" else f"arm {problem.source!r}: "
        report.add(code, path, where + problem.message, _COMPOSE_HINTS[code])
    return report.items


def check_matching(contract, loaded: LoadedYaml, composed: ComposedArms) -> list[Diagnostic]:
    """P300-P305, P405 and P412: the arms' effective configs against the baseline's, the factor and
    the space."""
    report = _Report(loaded)
    configs = composed.configs
    base_name = contract.baseline.name
    base = configs[base_name]
    factor_keys = contract.factor.keys
    base_leaves = flatten(base)
    for i, key in enumerate(factor_keys):
        if get_path(base, key) is MISSING:
            close = difflib.get_close_matches(key, _all_paths(base_leaves), n=1)
            report.add(
                "P305",
                ("factor", "keys", i)
                if ("factor", "keys") in loaded.positions
                else ("factor", "name"),
                f"factor key {key!r} is not in the baseline's effective config",
                f"Did you mean `{close[0]}`?"
                if close
                else "Name a dotted path that the composed config has.",
            )
    seen: dict[str, str] = {}
    for i, arm in enumerate(contract.arms):
        config = configs[arm.name]
        diff = config_diff(base, config)
        if not diff:
            report.add(
                "P301",
                ("arms", i),
                f"arm {arm.name!r} has the same effective config as the baseline {base_name!r}",
                "Change the factor in the arm's overrides; an arm must differ from the baseline.",
            )
        outside = [d for d in diff if not _inside(d[0], factor_keys)]
        if outside:
            shown = "; ".join(f"{path}: {_value(a)} -> {_value(b)}" for path, a, b in outside)
            path = _culprit(contract, arm, i, outside[0][0])
            report.add(
                "P300",
                path,
                f"arm {arm.name!r} differs from the baseline {base_name!r} outside factor.keys "
                f"{factor_keys}: {shown}",
                "Change only the factor (set the other keys back with overrides, or use a "
                "key=value override "
                "instead of a config group), or add those keys to factor.keys if they are part of "
                "the factor.",
            )
        fingerprint = repr(sorted(flatten(config).items(), key=lambda kv: kv[0]))
        if diff and fingerprint in seen:
            report.add(
                "P302",
                ("arms", i),
                f"arms {seen[fingerprint]!r} and {arm.name!r} have the same effective config",
                "Make each arm a different level of the factor, or remove the repeat.",
            )
        seen.setdefault(fingerprint, arm.name)
    tuning = contract.tuning
    if tuning is not None:
        for arm in contract.arms:
            diff = config_diff(base, configs[arm.name])
            tuned = [
                key for key in tuning.space if any(_inside(path, [key]) for path, _, _ in diff)
            ]
            if (
                diff
                and all(_inside(path, list(tuning.space)) for path, _, _ in diff)
                and arm.name not in tuning.arm_space
                and base_name not in tuning.arm_space
            ):
                report.add(
                    "P412",
                    ("tuning", "space", tuned[0]),
                    f"tuning.space tunes {_names(tuned)}, everything arm {arm.name!r} changes: "
                    f"tuning overwrites the "
                    f"factor, so after tuning the arm and the baseline {base_name!r} are the same "
                    f"experiment",
                    "Tune other keys, or give the arms different ranges in tuning.arm_space.",
                    key=True,
                )
        for key in tuning.space:
            missing = [name for name, config in configs.items() if get_path(config, key) is MISSING]
            if missing:
                close = near_path(base_leaves, key)  # P204's rule
                report.add(
                    "P405",
                    ("tuning", "space", key),
                    f"tuning.space key {key!r} is not in the effective config of {_names(missing)}",
                    f"Did you mean `{close}`?"
                    if close
                    else "Tune keys every arm's config has (per-arm keys go in tuning.arm_space).",
                    key=True,
                )
        for name, space in tuning.arm_space.items():
            if name not in configs:
                continue
            for key in space:
                if get_path(configs[name], key) is MISSING:
                    report.add(
                        "P405",
                        ("tuning", "arm_space", name, key),
                        f"tuning.arm_space.{name} key {key!r} is not in arm {name!r}'s effective "
                        f"config",
                        "Tune a key the arm's config has.",
                        key=True,
                    )
        _floats_for_integers(report, tuning, configs)
        _tuned_into_the_factor(report, contract, composed)
        if tuning.arm_space:
            _factor_after_tuning(report, contract, configs)
    return report.items


def _factor_after_tuning(report: _Report, contract, configs: dict[str, dict]) -> None:
    """P412 with `tuning.arm_space`: what each arm's factor is once tuned (each factor leaf's
    value, or the dimension that tunes it; a one-value choice is that value) is the baseline's for
    some arm: the ranges are the same (`model.width: {choice: [64, 128]}` for both), or the arm's
    range holds only the baseline's value."""
    tuning, factor_keys, base_name = (
        contract.tuning,
        list(contract.factor.keys),
        contract.baseline.name,
    )

    def factor_of(arm: str) -> list[tuple[str, str]]:
        space = {
            key: dim.model_dump()
            for key, dim in tuning.space_for(arm).items()
            if _inside(key, factor_keys)
        }
        fixed = {
            key: repr(dim["choice"][0])
            for key, dim in space.items()
            if len(dim.get("choice") or ()) == 1
        }
        tuned = {key: repr(sorted(dim.items())) for key, dim in space.items() if key not in fixed}
        leaves = {
            path: repr(value)
            for path, value in flatten(configs[arm]).items()
            if _inside(path, factor_keys) and not _inside(path, list(tuned))
        }
        return sorted({**leaves, **fixed}.items()) + sorted(
            ("tuned " + key, dim) for key, dim in tuned.items()
        )

    base = factor_of(base_name)
    for arm in contract.arms:
        if (
            arm.name in configs
            and config_diff(configs[base_name], configs[arm.name])
            and factor_of(arm.name) == base
        ):
            report.add(
                "P412",
                ("tuning", "arm_space", arm.name)
                if arm.name in tuning.arm_space
                else ("tuning", "arm_space", base_name),
                f"once tuned, arm {arm.name!r} has the same factor as the baseline {base_name!r}: "
                f"tuning.space and "
                "tuning.arm_space give the factor's keys the same ranges (or only the baseline's "
                "value), "
                "which overwrite what the arm's overrides set, so the two are the same experiment",
                "Give each arm its own range of the factor in tuning.arm_space, or tune no factor "
                "key.",
                key=True,
            )


_PROBE = "planner-probe-7f3c"  # a value no config holds: where it turns up, the tuned key reaches


def _tuned_into_the_factor(report: _Report, contract, composed: ComposedArms) -> None:
    """P418: a `tuning.space` key that reaches a factor key through an interpolation in some arms
    and in no factor key of others (`optimizer.lr: ${train.lr}` in sgd's option, a fixed `lr:
    0.001` in adam's): tuning it tunes one arm's factor and leaves the other's fixed, so the arms
    are not tuned alike. Each arm's config is set with a probe value at the key, as a trial's
    sampled value is (`apply_params`), and the factor's leaves that take it are found. Only configs
    with interpolations are probed."""
    from planner._contract.paths import apply_params

    factor_keys = list(contract.factor.keys)
    arms = [contract.baseline.name, *(arm.name for arm in contract.arms)]
    raws = {name: composed.raw.get(name) for name in arms}
    if not any(
        raw and _to_resolve(raw) for raw in raws.values()
    ):  # no interpolation: nothing can reach
        return
    for key in contract.tuning.space:
        if _inside(key, factor_keys):
            continue  # the factor itself tuned: P412's matter
        reached: dict[str, tuple[str, ...]] = {}
        for name in arms:
            try:
                probed = flatten(apply_params(composed.configs[name], {key: _PROBE}, raws[name]))
            except Exception:  # noqa: BLE001 - a resolver that refuses the probe: nothing to compare
                break
            reached[name] = tuple(
                sorted(
                    path
                    for path, value in probed.items()
                    if value == _PROBE and path != key and _inside(path, factor_keys)
                )
            )
        if len(reached) == len(arms) and any(reached.values()) and not all(reached.values()):
            into = {name: paths for name, paths in reached.items() if paths}
            shown = "; ".join(
                f"in arm {name!r} it sets {_names(list(paths))}" for name, paths in into.items()
            )
            fixed = [name for name, paths in reached.items() if not paths]
            rest = (
                f"; in {'arm' if len(fixed) == 1 else 'arms'} {_names(fixed)} it sets no factor key"
                if fixed
                else ""
            )
            report.add(
                "P418",
                ("tuning", "space", key),
                f"tuning.space key {key!r} reaches the factor through an interpolation in some "
                f"arms and no "
                f"factor key in others ({shown}{rest}): tuning it tunes one arm's factor and "
                f"leaves the "
                "other's fixed, so the arms are not tuned alike",
                "Tune the factor's own key in every arm (an arm_space range each), or make every "
                "arm's "
                "factor take the tuned key alike, or give the arms no interpolation into the "
                "factor.",
                key=True,
            )


def _floats_for_integers(report: _Report, tuning, configs: dict[str, dict]) -> None:
    """P942: a `uniform` or `log_uniform` range for a key every arm holds as an integer (`hidden:
    32`): each trial gets a float (`50.57557568522359`) where the trainable had an integer; a
    warning, since a float may be meant."""
    spaces: list[tuple[tuple[Any, ...], str, Dimension, list[str]]] = [
        (("tuning", "space", key), key, dim, list(configs)) for key, dim in tuning.space.items()
    ]
    spaces += [
        (("tuning", "arm_space", name, key), key, dim, [name])
        for name, space in tuning.arm_space.items()
        for key, dim in space.items()
        if name in configs
    ]
    for path, key, dim, arms in spaces:
        if dim.kind not in ("uniform", "log_uniform"):
            continue
        values = [get_path(configs[arm], key) for arm in arms]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            lo, hi = dim.bounds
            report.add(
                "P942",
                path,
                f"{format_path(path)} draws floats ({dim.kind}: [{lo:g}, {hi:g}]) for "
                f"{key!r}, which the config holds as the integer {values[0]}: each trial gets a "
                f"float where "
                "the trainable had an integer",
                "Tune it with int: [lo, hi] (or choice: [...]), or write the config's value as a "
                "float "
                "(32.0) if a float is meant.",
                key=True,
                severity="warning",
            )


def _culprit(contract, arm, i: int, path: str) -> tuple[Any, ...]:
    """The override that most likely made `path` differ: the arm's, else the baseline's, else the
    arm."""
    for where, overrides in (
        (("arms", i), arm.overrides),
        (("baseline",), contract.baseline.overrides),
    ):
        for j, text in enumerate(overrides):
            key = text.split("=", 1)[0].lstrip("+~").split("@", 1)[0].replace("/", ".")
            if key and (path == key or path.startswith(key + ".")):
                return (*where, "overrides", j)
    return ("arms", i, "overrides") if arm.overrides else ("arms", i)


def _all_paths(leaves: dict[str, Any]) -> list[str]:
    paths = set(leaves)
    for leaf in leaves:
        parts = leaf.split(".")
        paths.update(".".join(parts[:n]) for n in range(1, len(parts)))
    return sorted(paths)


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _value(value: Any) -> str:
    return "<absent>" if value is MISSING else short_repr(value, 40)


def warmup_lengths(contract, composed: ComposedArms) -> dict[str, tuple[str, float]]:
    """Arm -> (key, length in exposure units) of the longest warmup the factor changes in that arm.

    A warmup key is a config path with `warmup` in it that is in `factor.keys` or that the arm's
    composed config changes against the baseline's. Its length: a fraction of training
    (`warmup_ratio: 0.2`) times `budget.exposure`; a whole number up to the exposure
    (`warmup_epochs: 3`) as it is. A count in another unit (500 optimizer steps against 10 epochs)
    cannot be placed on the exposure's scale and is left out.
    """
    base = composed.configs.get(contract.baseline.name) or {}
    exposure = contract.budget.exposure
    out: dict[str, tuple[str, float]] = {}
    for arm in contract.all_arms:
        config = composed.configs.get(arm.name)
        if config is None:
            continue
        paths = {path for path, _, _ in config_diff(base, config)} | {
            path for path in flatten(config) if _inside(path, list(contract.factor.keys))
        }
        for path in sorted(paths):
            if not _WARMUP_KEY.search(path):
                continue
            value = get_path(config, path)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                continue
            last = path.rsplit(".", 1)[-1]
            length = value * exposure if _FRACTION_KEY.search(last) and value <= 1 else value
            if length > exposure or (not _FRACTION_KEY.search(last) and float(value) != int(value)):
                continue
            if arm.name not in out or length > out[arm.name][1]:
                out[arm.name] = (path, float(length))
    return out


def check_warnings(contract, loaded: LoadedYaml, composed: ComposedArms | None) -> list[Diagnostic]:
    """P900: a factor that touches a batch-size or accumulation key; P906: early stopping whose
    first rung comes before a warmup the factor changes has ended; P908: tuning on a metric named
    as a test-set one."""
    report = _Report(loaded)
    tuning = contract.tuning
    grace = (
        tuning.early_stop.grace if tuning is not None and tuning.early_stop.rule != "none" else None
    )
    if grace is not None and composed is not None:
        for arm, (key, length) in warmup_lengths(contract, composed).items():
            if grace < length:
                where: tuple[Any, ...] = (
                    ("tuning", "early_stop", "grace")
                    if ("tuning", "early_stop", "grace") in loaded.positions
                    else ("tuning", "early_stop")
                )
                report.add(
                    "P906",
                    where,
                    f"early_stop.grace is {grace} but arm {arm!r} warms up for {length:g} of "
                    f"{contract.budget.exposure} (its {key}): a trial of it is judged at the "
                    f"first rung before "
                    "the factor's effect could show, and a slower starter is stopped for being "
                    "slow to start",
                    f"Use a grace of at least {math.ceil(length)}, or early_stop rule none for "
                    f"this comparison.",
                    severity="warning",
                )
    touched: dict[str, int] = {}
    for i, key in enumerate(contract.factor.keys):
        if any(_BATCH_KEY.search(part) for part in key.split(".")):
            touched.setdefault(key, i)
    if composed is not None and contract.baseline.name in composed.configs:
        base = composed.configs[contract.baseline.name]
        for arm in contract.arms:
            if arm.name not in composed.configs:
                continue
            for path, _, _ in config_diff(base, composed.configs[arm.name]):
                if any(_BATCH_KEY.search(part) for part in path.split(".")):
                    owner = next(
                        (i for i, k in enumerate(contract.factor.keys) if _inside(path, [k])), 0
                    )
                    touched.setdefault(path, owner)
    metric = contract.metric
    if tuning is not None and "test" in re.split(r"[^a-z0-9]+", metric.name.lower()):
        report.add(
            "P908",
            ("metric", "name"),
            f"metric.name {metric.name!r} reads as a test-set metric, and tuning selects each "
            f"arm's config "
            "on it: the test set then shapes what is confirmed (a peek at it)",
            "Tune on a validation metric (metric.name: val_acc) and give the test metric as "
            "metric.heldout, which tuning never reads; a warning, since the name may mean "
            "something else.",
            severity="warning",
        )
    for key, i in touched.items():
        where = (
            ("factor", "keys", i) if ("factor", "keys") in loaded.positions else ("factor", "name")
        )
        report.add(
            "P900",
            where,
            f"the factor changes {key!r}, a batch-size or accumulation key: batch statistics "
            f"change and the "
            "learning rate is not rescaled, so the arms may differ in more than the factor",
            "Keep the effective batch size fixed, or scale the learning rate with it and say so "
            "in the hypothesis.",
            severity="warning",
        )
    return report.items


def check_trainable(contract, loaded: LoadedYaml, probe: TrainableProbe | None) -> list[Diagnostic]:
    """P421, P501-P503: what importing the trainable `module:function` showed (`probe`,
    planner._contract.probe; None for a `command:` trainable, which is not imported); P943: a
    module that uses planner.LightningCallback with a budget not counted in epochs."""
    if contract.trainable is None or probe is None:
        return []
    report = _Report(loaded)
    found = trainable_problem(probe)
    if found is not None:
        code, message, hint = found
        report.add(code, ("trainable",), message, hint)
    unit = contract.budget.unit
    if "LightningCallback" in probe.names and unit.strip().lower() not in EPOCH_UNITS:
        where = ("budget", "unit") if ("budget", "unit") in loaded.positions else ("budget",)
        report.add(
            "P943",
            where,
            f"the trainable's module uses planner.LightningCallback, which counts epochs, but "
            f"budget.unit is {unit!r}: each trial would be a protocol_error at fit (an exposure "
            f"of {contract.budget.exposure} {unit}s would train {contract.budget.exposure} "
            "epochs)",
            "Write budget.unit: epoch, with the exposure in epochs.",
            severity="warning",
        )
    return report.items


def trainable_problem(probe: TrainableProbe) -> tuple[str, str, str] | None:
    """(code, message, hint) for a trainable the probe could not import or call; None when it is
    found."""
    module, origin, function = probe.module, probe.origin, probe.function
    if probe.outcome == "package_exit":
        return (
            "P421",
            f"importing the trainable's package for {module!r} called {probe.how}: it would "
            "end the process that imports it without a word",
            'Move that call under `if __name__ == "__main__":`.',
        )
    if probe.outcome == "package_raised":
        return (
            "P503",
            f"importing the trainable's package for {module!r} raised {probe.error}",
            "Fix the error in that package (run `python -c 'import ...'` to see it).",
        )
    if probe.outcome == "not_found":
        return (
            "P501",
            f"the trainable's module {module!r} cannot be found from the contract's folder "
            f"({probe.roots[0]}) or the current folder ({probe.roots[1]})",
            _where_hint(probe.near),
        )
    if probe.outcome == "module_exit":
        return (
            "P421",
            f"importing the trainable's module {module!r} ({origin}) called "
            f"{probe.how}: it would end the process that imports it (plan validate, every "
            "Ray worker) without a word",
            'Move that call under `if __name__ == "__main__":` or into the trainable function.',
        )
    if probe.outcome == "module_raised":
        return (
            "P503",
            f"importing the trainable's module {module!r} raised {probe.error}",
            f"Fix the error in {origin} (run `python -c 'import {module}'` to see it).",
        )
    if probe.outcome == "no_function":
        return (
            "P502",
            f"module {module!r} ({origin}) has no {function!r}",
            f"Did you mean `{module}:{probe.close}`?"
            if probe.close
            else f"Define `def {function}(config, trial)` in it.",
        )
    if probe.outcome == "not_callable":
        return (
            "P502",
            f"{probe.trainable!r} is not a function",
            f"Define `def {function}(config, trial)` in {origin}.",
        )
    if probe.outcome == "found":
        return None
    raise AssertionError(f"a trainable probe with an unknown outcome {probe.outcome!r}")


def _where_hint(near: tuple[str, str] | None) -> str:
    """Where the module's file is, if it sits in a folder above the contract."""
    if near is not None:
        candidate, parent = near
        return (
            f"It is at {candidate}: run `plan` from {parent}, or move the contract next to it "
            "(trials import it from the contract's folder or the current folder)."
        )
    return (
        "Put the module next to the contract or in the current folder, or fix the name "
        "(`module.path:function`)."
    )
