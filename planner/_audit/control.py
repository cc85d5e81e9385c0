"""The next control: one contract, derived from the run's frozen contract, with exactly one change.

Pure. The change answers the strongest finding that has a recipe, in this
order (what the comparison measures before how precisely it measures it):

    diverged_region            a lower (or higher) range for the key    `<name>-lower-<key>`
    selected_at_boundary       the key's range widened for every arm    `<name>-wider-<key>`
    stopped_early_at_selected  tuning without early stopping            `<name>-no-early-stop`
    still_improving            the exposure doubled                     `<name>-exposure-x2`
    seed_spread                the seeds `plan power` asks for          `<name>-seeds-<n>`

The factor, the arms, the metric and the acceptance never change. A budget
cap the change would break (`budget.max_trials`, `budget.max_heldout_evaluations`)
is raised to what the new plan needs, and the wall-time caps are scaled with
the planned exposure: they are listed in the change as `budget`, and nothing
else moves but `name` and `hypothesis`.
"""

from __future__ import annotations

import copy
import math
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from planner._audit.evidence import Evidence
from planner._audit.findings import Finding, _g, dimension
from planner._contract.rules import max_trials_problem, planned_trials
from planner._core.errors import RunError
from planner._core.lazy import lazy_import

contract_model = lazy_import(
    "planner._contract.model"
)  # pydantic: loaded only when --next writes a contract
pydantic = lazy_import("pydantic")

PRIORITY = (
    "diverged_region",
    "selected_at_boundary",
    "stopped_early_at_selected",
    "still_improving",
    "seed_spread",
)
WIDEN = (
    0.5  # a boundary range grows by half its span (log span for log_uniform) on the boundary's side
)


def candidates(findings: list[Finding]) -> list[Finding]:
    """The findings a next control could answer, strongest first: PRIORITY order, then the most
    extreme."""
    out = []
    for code in PRIORITY:
        found = [f for f in findings if f.code == code and f.recipe]
        if code == "selected_at_boundary":  # the value nearest its bound first
            found.sort(key=lambda f: min(p := (f.recipe or {})["position"], 1 - p))
        out += found
    return out


def _short(key: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", key.rsplit(".", 1)[-1].lower()).strip("-_") or "key"


def _name(name: str, suffix: str) -> str:
    room = 64 - len(suffix) - 1
    return f"{name[:room].rstrip('-_')}-{suffix}"


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _get(data: dict[str, Any], path: tuple[Any, ...]) -> Any:
    node: Any = data
    for part in path:
        node = node[part]
    return node


def _space_paths(data: dict[str, Any], key: str) -> list[tuple[Any, ...]]:
    """Every place the key's range is written: tuning.space and each arm_space entry."""
    tuning = data.get("tuning") or {}
    paths: list[tuple[Any, ...]] = (
        [("tuning", "space", key)] if key in (tuning.get("space") or {}) else []
    )
    paths += [
        ("tuning", "arm_space", arm, key)
        for arm, space in (tuning.get("arm_space") or {}).items()
        if key in (space or {})
    ]
    return paths


def _widened(kind: str, bounds: list[Any], side: str) -> list[Any] | None:
    lo, hi = bounds
    if kind == "log_uniform":
        step = (math.log10(hi) - math.log10(lo)) * WIDEN
        new = [lo / 10**step, hi] if side == "low" else [lo, hi * 10**step]
        return [float(f"{new[0]:.6g}"), float(f"{new[1]:.6g}")]
    span = (hi - lo) * WIDEN
    if kind == "int":
        span = max(1, round(span))
        floor = 1 if lo >= 1 else 0  # a count that started at 1 does not go to 0
        new = (
            [max(lo - span, floor) if lo >= floor else lo - span, hi]
            if side == "low"
            else [lo, hi + span]
        )
    else:
        new = [lo - span, hi] if side == "low" else [lo, hi + span]
        if side == "low" and lo >= 0:
            new[0] = max(new[0], 0.0)  # a range that started at or above 0 does not cross it
        if side == "high" and hi <= 0:
            new[1] = min(new[1], 0.0)
        new = [float(f"{new[0]:.6g}"), float(f"{new[1]:.6g}")]
    return None if new == list(bounds) else new


def _narrowed(kind: str, bounds: list[Any], side: str, edge: Any) -> list[Any] | None:
    lo, hi = bounds
    if kind == "int":
        new = [lo, int(edge) - 1] if side == "high" else [int(edge) + 1, hi]
    else:
        new = [lo, float(edge)] if side == "high" else [float(edge), hi]
    return new if new[0] < new[1] and new != list(bounds) else None


def _space_change(
    data: dict[str, Any], f: Finding, widen: bool
) -> tuple[list[dict[str, Any]], str] | None:
    r = f.recipe or {}
    key, side = r["key"], r["side"]
    changes = []
    for path in _space_paths(data, key):
        kb = dimension(_get(data, path))
        if kb is None:
            continue
        kind, bounds = kb
        new = (
            _widened(kind, list(bounds), side)
            if widen
            else _narrowed(kind, list(bounds), side, r["edge"])
        )
        if new is None:
            continue
        changes.append(
            {
                "path": ".".join(map(str, (*path, kind))),
                "from": list(bounds),
                "to": new,
                "_set": (*path, kind),
            }
        )
    if not changes:
        return None
    if widen:
        suffix = f"wider-{_short(key)}"
    else:
        suffix = f"{'lower' if side == 'high' else 'higher'}-{_short(key)}"
    return changes, suffix


def _exposure_change(data: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    old = data["budget"]["exposure"]
    return [
        {"path": "budget.exposure", "from": old, "to": 2 * old, "_set": ("budget", "exposure")}
    ], "exposure-x2"


def _seeds_change(data: dict[str, Any], need: int) -> tuple[list[dict[str, Any]], str]:
    seeds = list(data["seeds"])
    taken = set(seeds) | set((data.get("tuning") or {}).get("seeds") or [])
    new, candidate = list(seeds), max(seeds) + 1
    while len(new) < need:
        if candidate not in taken:
            new.append(candidate)
        candidate += 1
    return [{"path": "seeds", "from": seeds, "to": new, "_set": ("seeds",)}], f"seeds-{need}"


def _planned(data: dict[str, Any]) -> tuple[dict[str, int], int]:
    """(planned trials per phase, as `plan validate` counts them; planned exposure) of a contract
    as data.

    `planned_trials` reads only the arms, the seeds and the tuning seeds and trials of a contract:
    they are given to it from the data, so the audit loads no contract model until --next writes
    the contract.
    """
    tuning = data.get("tuning")
    counts = SimpleNamespace(
        all_arms=[data["baseline"], *data["arms"]],
        seeds=list(data["seeds"]),
        tuning=None
        if not tuning
        else SimpleNamespace(
            seeds=list(tuning["seeds"]), trials_per_arm=int(tuning["trials_per_arm"])
        ),
    )
    planned = planned_trials(counts)
    return planned, planned["total"] * int(data["budget"]["exposure"])


def _scale_duration(value: Any, ratio: float) -> Any:
    """'30m' x 2 -> '60m'; a number of seconds stays a number."""
    if isinstance(value, int | float):
        return math.ceil(value * ratio)
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", str(value))
    if not match:
        return value
    number = math.ceil(float(match.group(1)) * ratio * 10) / 10
    return f"{number:g}{match.group(2)}"


def _budget_follows(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The budget caps the change would break, raised with it."""
    out = []
    budget = new["budget"]
    planned, exposure = _planned(new)
    _, old_exposure = _planned(old)
    if max_trials_problem(planned, budget.get("max_trials")):  # the P409 rule
        out.append(
            {
                "path": "budget.max_trials",
                "from": budget["max_trials"],
                "to": planned["total"],
                "_set": ("budget", "max_trials"),
            }
        )
    cap = budget.get("max_heldout_evaluations")
    evaluations = (1 + len(new.get("arms") or [])) * len(new.get("seeds") or [])
    if cap is not None and (new.get("metric") or {}).get("heldout") and evaluations > cap:
        out.append(
            {
                "path": "budget.max_heldout_evaluations",
                "from": cap,
                "to": evaluations,
                "_set": ("budget", "max_heldout_evaluations"),
            }
        )
    ratio = exposure / old_exposure if old_exposure else 1.0
    if ratio > 1 and budget.get("max_wall_time") is not None:
        out.append(
            {
                "path": "budget.max_wall_time",
                "from": budget["max_wall_time"],
                "to": _scale_duration(budget["max_wall_time"], ratio),
                "_set": ("budget", "max_wall_time"),
            }
        )
    step_ratio = new["budget"]["exposure"] / old["budget"]["exposure"]
    if step_ratio > 1 and budget.get("max_trial_time") is not None:
        out.append(
            {
                "path": "budget.max_trial_time",
                "from": budget["max_trial_time"],
                "to": _scale_duration(budget["max_trial_time"], step_ratio),
                "_set": ("budget", "max_trial_time"),
            }
        )
    return out


_TEXT = {
    "narrow": (
        "if trials still diverge inside the new range, the key's range alone does not set the "
        "divergence "
        "(look at update sizes, the schedule, the data)",
        "no diverged tuning trial, the tuning budget spent where training is stable, and a "
        "decision that "
        "no longer rests on trials lost to divergence",
    ),
    "widen": (
        "if every arm's selected {key} lands inside the old range again and the decision is "
        "unchanged, the "
        "boundary did not bind and the original comparison stands",
        "{arm}'s selected {key} moves beyond the old bound; the decision is unchanged unless the "
        "old range "
        "held an arm back",
    ),
    "draws": (
        "if {arm}'s selected {key} stays inside the range explored before and the decision is "
        "unchanged, "
        "the earlier draws had found the optimum",
        "the added draws reach the part of {key}'s range never tried; {arm}'s selected {key} "
        "moves there "
        "or stays, and the decision holds or changes with it",
    ),
    "exposure": (
        "if the curves level off in the added exposure and the decision at twice the exposure is "
        "the "
        "same, the original comparison was not premature",
        "the curves level off before the new end; the decision is confirmed, or it changes if the "
        "slower "
        "learner catches up",
    ),
    "no_early_stop": (
        "if {arm} selects the same values without early stopping and the decision is unchanged, "
        "judging it at the first rung did not shape the comparison",
        "every tuning trial runs the full exposure; the arms may select the same values, and the "
        "decision then compares the factor alone",
    ),
    "seeds": (
        "if the CI at {n} seeds is still wider than min_effect, the spread was underestimated; if "
        "it "
        "straddles min_effect, the effect sits at the threshold",
        "a CI about as wide as min_effect, and a decision of accept or reject instead of "
        "inconclusive",
    ),
}


def next_control(ev: Evidence, findings: list[Finding], notes: list[str]) -> dict[str, Any] | None:
    """The next control as {code, arm, change, falsifier, expected, held_fixed, name, contract};
    None without one.

    The strongest finding whose recipe gives a change answers; one whose recipe
    cannot (a range at 0 that cannot widen below it) gives way to the next.
    """
    for f in candidates(findings):
        try:
            control = _control_for(ev, f)
        except (KeyError, TypeError, IndexError) as error:
            notes.append(
                f"the frozen contract lacks what the next control for {f.code} changes ({error}): "
                "no next control from it"
            )
            continue
        if control is not None:
            return control
    return None


def _control_for(ev: Evidence, f: Finding) -> dict[str, Any] | None:
    recipe = f.recipe
    assert recipe is not None  # the caller picks the findings with a recipe
    old = copy.deepcopy(ev.contract)  # the frozen contract: every default written out
    data = copy.deepcopy(old)
    kind = recipe["change"]
    if kind in ("widen", "narrow"):
        made = _space_change(data, f, widen=kind == "widen")
        if made is None:
            return None
        changes, suffix = made
    elif kind == "exposure":
        changes, suffix = _exposure_change(data)
    elif kind == "draws":
        old_draws = data["tuning"]["trials_per_arm"]
        changes = [
            {
                "path": "tuning.trials_per_arm",
                "from": old_draws,
                "to": 2 * old_draws,
                "_set": ("tuning", "trials_per_arm"),
            }
        ]
        suffix = "draws-x2"
    elif kind == "no_early_stop":
        old_stop = data["tuning"]["early_stop"]
        changes = [
            {
                "path": "tuning.early_stop",
                "from": dict(old_stop),
                "to": {**old_stop, "rule": "none", "grace": None, "reduction_factor": None},
                "_set": ("tuning", "early_stop"),
            }
        ]
        suffix = "no-early-stop"
    else:
        changes, suffix = _seeds_change(data, int(recipe["seeds"]))
    for c in changes:
        _set(data, c["_set"], c["to"])
    budget = _budget_follows(old, data)
    for c in budget:
        _set(data, c["_set"], c["to"])
    key = (f.recipe or {}).get("key", "")
    falsifier, expected = (t.format(key=key, arm=f.arm, n=recipe.get("seeds")) for t in _TEXT[kind])
    what = "; ".join(f"{c['path']}: {_show(c['from'])} -> {_show(c['to'])}" for c in changes)
    raised = "; ".join(f"{c['path']}: {_g(c['from'])} -> {_g(c['to'])}" for c in budget)
    data["name"] = _name(str(old["name"]), suffix)
    data["hypothesis"] = (
        f"A control for the audit's {f.code} finding on run {ev.name}/{ev.run_id}: {f.summary} "
        f"Change: {what}"
        + (f" (budget raised with it: {raised})" if raised else "")
        + f"; everything else as in {old['name']}. Falsifier: {falsifier}. Expected: {expected}."
    )
    return {
        "code": f.code,
        "arm": f.arm,
        "name": data["name"],
        "change": {
            "summary": what,
            "paths": [_public(c) for c in changes],
            "budget": [_public(c) for c in budget],
        },
        "falsifier": falsifier,
        "expected": expected,
        "held_fixed": _held_fixed(old["name"], kind, key, bool(budget)),
        "contract": data,
    }


def _show(value: Any) -> str:
    """A value for the change's sentence; a long seed list as its count and ends."""
    if isinstance(value, list) and len(value) > 6:
        return f"{len(value)} seeds [{value[0]}, {value[1]}, ..., {value[-1]}]"
    if isinstance(value, dict):  # tuning.early_stop: "rule asha, grace 2, reduction_factor 3"
        return "{" + ", ".join(f"{k} {_g(v)}" for k, v in value.items() if v is not None) + "}"
    return _g(value)


def _held_fixed(name: str, kind: str, key: str, raised: bool) -> str:
    held = [
        "the factor",
        "the arms and their overrides",
        "the metric",
        "the acceptance rule",
        "the trainable and its config",
        f"the tuning space but {key}" if kind in ("widen", "narrow") else "the tuning space",
    ]
    if kind != "no_early_stop":
        held.append("the tuning's early stopping")
    if kind != "seeds":
        held.append("the confirmation seeds")
    if kind != "exposure":
        held.append("the exposure")
    held.append("the rest of the budget" if raised else "the budget")
    return f"as in {name}: " + ", ".join(held)


def _public(change: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in change.items() if not k.startswith("_")}


def check(data: dict[str, Any]) -> None:
    """The derived contract must load with the contract model (plan validate checks the rest)."""
    try:
        contract_model.contract_from(data)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        raise RunError(
            f"the next control derived from the frozen contract does not load "
            f"({'.'.join(map(str, first['loc']))}: {first['msg']}); this is a bug in planner"
        ) from None


# ---------------------------------------------------------------- writing it


def _rebase_command(data: dict[str, Any], rebase: Any, dest: Path) -> list[str]:
    """A `command:` keeps running in the folder it ran in: its `cwd` (".": the contract's folder)
    rebased."""
    command = data.get("command")
    if not command:
        return []
    spec = dict(command) if isinstance(command, dict) else {"run": command}
    old = spec.get("cwd") or "."
    if os.path.isabs(old):
        return []
    spec["cwd"] = rebase(old)
    data["command"] = spec
    return [
        f"command.cwd is set to {spec['cwd']!r}: the command runs in the folder it ran in, seen "
        f"from {dest}"
    ]


def contract_text(
    ev: Evidence, control: dict[str, Any], target: str | os.PathLike
) -> tuple[str, list[str]]:
    """The next control as YAML to write at `target`, with relative paths rebased to stay the same
    folders.

    Every relative path of a contract is relative to the contract's folder:
    written elsewhere, config.dir, data.fingerprint, baseline.from_run and the
    folder a `command:` runs in (`command.cwd`, the contract's folder when unset)
    are rewritten relative to `target`'s folder so they name the same place (a
    note says so): the control runs wherever it is written. Returns (text, notes).
    """
    check(control["contract"])
    data = copy.deepcopy(control["contract"])
    notes: list[str] = []
    source = Path(ev.contract_path).parent if ev.contract_path else None
    dest = Path(target).resolve().parent
    if source is not None and source.resolve() != dest:

        def rebase(path: str) -> str:
            if os.path.isabs(path):
                return path
            return os.path.relpath((source / path).resolve(), dest)

        config = data.get("config") or {}
        if config.get("dir"):
            new = rebase(config["dir"])
            if new != config["dir"]:
                notes.append(
                    f"config.dir {config['dir']!r} is rewritten {new!r}: the same folder, seen "
                    f"from {dest}"
                )
                config["dir"] = new
        prints = (data.get("data") or {}).get("fingerprint") or []
        if any(not os.path.isabs(p) for p in prints):
            data["data"]["fingerprint"] = [rebase(p) for p in prints]
            notes.append(f"data.fingerprint paths are rewritten to be seen from {dest}")
        notes += _rebase_command(data, rebase, dest)
        baseline = data.get("baseline") or {}
        if baseline.get("from_run") and not os.path.isabs(baseline["from_run"]):
            new = rebase(baseline["from_run"])
            notes.append(
                f"baseline.from_run {baseline['from_run']!r} is rewritten {new!r}: the same run "
                f"folder"
            )
            baseline["from_run"] = new
        if data.get("trainable"):
            notes.append(
                f"the trainable {data['trainable']} is imported from {dest} or the current folder: "
                f"validate and run it from where the original ran ({source})"
            )
    elif source is None:
        notes.append(
            "run.json does not name the contract's path: relative paths are left as the run wrote "
            "them"
        )
    header = (
        f"# The next control proposed by `plan audit` for run {ev.name}/{ev.run_id}\n"
        f"# ({control['code']}{': ' + control['arm'] if control.get('arm') else ''}). Exactly one "
        f"change: "
        f"{control['change']['summary']}\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), notes
