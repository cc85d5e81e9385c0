"""Run folders with known pathologies for the `plan audit` tests, written to docs/run-folder.md (no
Ray).

`write_run(tmp_path, contract, trials)` lays out a run folder: the frozen
contract, run.json, state.json, identity.json, plan.json, trials.jsonl, and
selection.json and decisions.json computed as `plan run` computes them
(planner's own selection and decision rule). `curve_trial` makes one trial
record from the audit trainable's curve (tests/trainables/audit.py).
`differences(a, b)` lists the dotted paths where two contracts' data differ.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import yaml

from tests.trainables.audit import value

BASE: dict[str, Any] = {
    "version": 1,
    "name": "audit-case",
    "hypothesis": "The treatment raises val_acc.",
    "trainable": "tests.trainables.audit:train",
    "config": {
        "values": {
            "recipe": {
                "name": "a",
                "level": 0.5,
                "lr": 0.01,
                "best_lr": 0.01,
                "noise": 0.005,
                "shape": "plateau",
            }
        }
    },
    "factor": {"name": "recipe", "keys": ["recipe.name", "recipe.level"]},
    "baseline": {"name": "base", "overrides": ["recipe.name=a"]},
    "arms": [{"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.7"]}],
    "metric": {"name": "val_acc", "mode": "max", "heldout": "test_acc"},
    "acceptance": {"min_effect": 0.05},
    "seeds": [0, 1, 2],
    "budget": {"exposure": 4, "max_trials": 40},
    "data": {"fingerprint": []},
}

TUNING = {
    "trials_per_arm": 6,
    "seeds": [1000],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 1.0]}},
}


def contract_data(**patch: Any) -> dict[str, Any]:
    """BASE with top-level keys replaced; `recipe={...}` updates the shared recipe."""
    data = copy.deepcopy(BASE)
    recipe = patch.pop("recipe", None)
    if recipe:
        data["config"]["values"]["recipe"].update(recipe)
    data.update(copy.deepcopy(patch))
    return data


def frozen(data: dict[str, Any]) -> dict[str, Any]:
    from planner._contract.model import Contract

    return Contract.model_validate(data).frozen()


def arm_recipe(data: dict[str, Any], arm: str) -> dict[str, Any]:
    """The arm's recipe: the base values with the arm's `recipe.key=value` overrides."""
    recipe = copy.deepcopy(data["config"]["values"]["recipe"])
    for a in [data["baseline"], *data["arms"]]:
        if a["name"] == arm:
            for o in a["overrides"]:
                key, _, text = o.partition("=")
                recipe[key.split(".", 1)[1]] = yaml.safe_load(text)
    return recipe


def curve_trial(
    data: dict[str, Any],
    arm: str,
    phase: str,
    seed: int,
    *,
    index: int = 0,
    params: dict[str, Any] | None = None,
    s_per_step: float = 0.1,
    exposure: int | None = None,
    **recipe_patch: Any,
) -> dict[str, Any]:
    """One trial record as the runner writes it, from the audit trainable's curve."""
    recipe = {**arm_recipe(data, arm), **recipe_patch}
    for k, v in (params or {}).items():
        recipe[k.split(".", 1)[1]] = v
    budget = exposure or data["budget"]["exposure"]
    rng = random.Random(f"{0 if recipe.get('ignore_seed') else seed}-{recipe.get('lr')}")
    reports, status, violations = [], "completed", []
    offset = rng.gauss(0, recipe.get("offset", 0.0))
    for step in range(1, budget + 1):
        v = value(recipe, step, budget, offset + rng.gauss(0, recipe.get("noise", 0.005)))
        if recipe.get("lr", 0.0) > recipe.get("diverge_above", math.inf) and step >= 2:
            v = float("nan")
        metrics: dict[str, Any] = {"val_acc": v, "train_loss": 1 - v}
        if phase != "tune" or recipe.get("leak"):
            metrics["test_acc"] = v + rng.gauss(0, recipe.get("noise", 0.005))
        metrics = {
            k: ("nan" if isinstance(x, float) and math.isnan(x) else x) for k, x in metrics.items()
        }
        reports.append({"step": step, "metrics": metrics, "time_s": 1.0 + s_per_step * step})
        if metrics["val_acc"] == "nan":
            status = "diverged"
            violations.append({"kind": "diverged", "step": step, "message": "val_acc is nan"})
            break
    tid = f"tune-{arm}-s{seed}-t{index:03d}" if phase == "tune" else f"{phase}-{arm}-s{seed}"
    return {
        "trial_id": tid,
        "phase": phase,
        "arm": arm,
        "seed": seed,
        "index": index,
        "params": dict(params or {}),
        "config": {"recipe": recipe},
        "status": status,
        "exposure": reports[-1]["step"],
        "reports": reports,
        "attempts": 1,
        "errors": [],
        "violations": violations,
        "started": "2026-11-30T10:00:00.000Z",
        "ended": "2026-11-30T10:00:01.000Z",
        "duration_s": reports[-1]["time_s"],
        "host": "h",
        "pid": 1,
        "node_id": None,
        "contract_sha256": "x",
    }


def failed_trial(arm: str, phase: str, seed: int, message: str = "seed crashes") -> dict[str, Any]:
    return {
        "trial_id": f"{phase}-{arm}-s{seed}",
        "phase": phase,
        "arm": arm,
        "seed": seed,
        "index": 0,
        "params": {},
        "config": {},
        "status": "failed",
        "exposure": 0,
        "reports": [],
        "attempts": 2,
        "errors": [
            {
                "attempt": a,
                "type": "RuntimeError",
                "message": message,
                "traceback": 'File "train.py", line 3, in train',
            }
            for a in (1, 2)
        ],
        "violations": [],
        "duration_s": 0.5,
    }


def tuning_trials(
    data: dict[str, Any], values: list[float], key: str = "recipe.lr", **patch: Any
) -> list[dict]:
    """Tuning trials of every arm at the given values of `key` (one per value)."""
    return [
        curve_trial(
            data, arm["name"], "tune", data["tuning"]["seeds"][0], index=i, params={key: v}, **patch
        )
        for arm in [data["baseline"], *data["arms"]]
        for i, v in enumerate(values)
    ]


def confirm_trials(
    data: dict[str, Any], params: dict[str, dict[str, Any]] | None = None, **patch: Any
) -> list[dict]:
    return [
        curve_trial(
            data, arm["name"], "confirm", seed, params=(params or {}).get(arm["name"]), **patch
        )
        for arm in [data["baseline"], *data["arms"]]
        for seed in data["seeds"]
    ]


def write_run(
    tmp_path: Path,
    data: dict[str, Any],
    trials: list[dict[str, Any]],
    *,
    commit: str | None = "abc123",
    decisions: dict[str, Any] | None = None,
    selection: dict[str, Any] | None = None,
) -> Path:
    """A run folder of `data` (the contract, frozen here) holding `trials`; contract.yaml is also
    written to tmp."""
    from planner._contract.model import Contract
    from planner._stats.decide import decide
    from planner._stats.select import select

    model = Contract.model_validate(data)
    contract_path = tmp_path / "contract.yaml"
    contract_path.write_text(yaml.safe_dump(data, sort_keys=False))
    run = tmp_path / "runs" / model.name / "20261130-100000-abcd"
    run.mkdir(parents=True)
    (run / "contract.yaml").write_text(yaml.safe_dump(model.frozen(), sort_keys=False))
    (run / "run.json").write_text(
        json.dumps(
            {
                "run_id": run.name,
                "name": model.name,
                "contract_sha256": model.sha256(),
                "created": "2026-11-30T10:00:00.000Z",
                "planner_version": "0.1.0",
                "contract_path": str(contract_path),
            }
        )
    )
    (run / "state.json").write_text(
        json.dumps(
            {
                "state": "completed",
                "updated": "2026-11-30T10:01:00.000Z",
                "reason": "all planned trials ended",
                "budget": {"wall_time_s": 60.0, "trials_ended": len(trials)},
            }
        )
    )
    (run / "identity.json").write_text(
        json.dumps(
            {
                "contract_sha256": model.sha256(),
                "code": {
                    "repo": "/x",
                    "commit": commit,
                    "dirty": False,
                    "trainable": model.trainable,
                },
                "python": "3.11",
                "packages": {},
                "host": {"hostname": "h"},
                "data": {},
                "env": {},
            }
        )
    )
    (run / "plan.json").write_text(
        json.dumps(
            {
                "planned_count": len(trials),
                "exposure": model.budget.exposure,
                "max_trials": model.budget.max_trials,
                "phases": [],
            }
        )
    )
    (run / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    if model.tuning is not None:
        chosen = selection or {
            "rule": "final",
            "k": None,
            "metric": model.metric.name,
            "mode": model.metric.mode,
            "arms": {a: s.as_dict() for a, s in select(model, trials).items()},
        }
        (run / "selection.json").write_text(json.dumps(chosen))
    if decisions is None:
        outcomes = {a.name: [] for a in model.all_arms}
        for t in trials:
            if t["phase"] == "confirm":
                last = (
                    t["reports"][-1]["metrics"].get(model.metric.decision_metric)
                    if t["reports"]
                    else None
                )
                outcomes[t["arm"]].append(
                    (t["seed"], None if last in (None, "nan") else last, t["status"])
                )
        made = decide(
            model.acceptance,
            model.metric.mode,
            outcomes,
            model.baseline.name,
            planned_seeds=list(model.seeds),
            arms=[a.name for a in model.arms],
        )
        decisions = {
            "run_state": "completed",
            "metric": model.metric.decision_metric,
            "test": model.acceptance.test,
            "alpha": model.acceptance.alpha,
            "correction": model.acceptance.correction,
            "min_effect": model.acceptance.min_effect,
            "decisions": [
                {
                    k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                    for k, v in d.as_dict().items()
                }
                for d in made
            ],
        }
    (run / "decisions.json").write_text(json.dumps(decisions))
    return run


def differences(a: Any, b: Any, prefix: str = "") -> set[str]:
    """Dotted paths where two YAML data differ (lists compared whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: set[str] = set()
        for k in set(a) | set(b):
            path = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                out.add(path)
            else:
                out |= differences(a[k], b[k], path)
        return out
    return set() if a == b else {prefix}
