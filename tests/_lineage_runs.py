"""Lineage run folders and contracts for tests: a finished run written as `plan run` writes it,
through the run folder's own writer and the ledger's own calls (no Ray)."""

from __future__ import annotations

import functools
from pathlib import Path

from planner._lineage import record
from planner._lineage.resolve import ProjectLineage
from tests._runs import lineage_contract, write_contract_data

REPO = Path(__file__).resolve().parents[1]
TRAINABLE = "tests.trainables.lineage:train"

FIRST = lineage_contract(
    name="levels",
    trainable=TRAINABLE,
    tuning={
        "trials_per_arm": 2,
        "seeds": [1000],
        "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
    },
)


write = functools.partial(
    write_contract_data, sort_keys=False
)  # write(folder, data, name="contract.yaml")


def fake_run(
    contract_path: Path,
    runs_dir: Path,
    decisions: dict[str, str],
    *,
    state: str = "completed",
    params: dict[str, dict] | None = None,
) -> Path:
    """A finished run folder in the documented format, and its ledger lines, as `plan run` writes
    them."""
    from planner._core.version import VERSION
    from planner._plan.trials import make_plan
    from planner._store.identity import run_identity, trainable_search_path
    from planner._store.writer import RunStore

    lineage = ProjectLineage(runs_dir)
    loaded = load_contract_with(contract_path, lineage)
    contract, configs = loaded.contract, loaded.configs
    from planner._core.redact import Redactor

    store = RunStore.create(runs_dir, contract.name)
    store.redactor = Redactor.for_run(contract.frozen(), *configs.values())  # as plan run does
    store.write_frozen(
        contract, str(contract_path), configs, make_plan(contract).as_dict(), VERSION
    )
    store.write_identity(
        run_identity(contract, contract_path.parent, trainable_search_path(contract_path.parent))
    )
    record.run_started(
        store.root, contract, configs, lineage.resolved.source if lineage.resolved else None
    )
    params = params or {}
    if contract.tuning is not None:
        store.write_selection(
            {
                "rule": "final",
                "k": None,
                "metric": "val_acc",
                "mode": "max",
                "arms": {
                    arm: {
                        "arm": arm,
                        "trial_id": f"tune-{arm}-s1000-t000" if arm in params else None,
                        "params": params.get(arm, {}),
                        "score": 0.5,
                        "candidates": 1,
                        "trials": 2,
                        "reason": ""
                        if arm in params
                        else "no tuning trial completed the full exposure",
                    }
                    for arm in configs
                },
            }
        )
    rows = [
        {
            "arm": arm,
            "decision": d,
            "effect": 0.2 if d == "accept" else 0.0,
            "ci_low": 0.1,
            "ci_high": 0.3,
            "p_value": 0.01,
            "alpha_adjusted": 0.05,
            "n_baseline": 3,
            "n_arm": 3,
            "reason": f"it was {d}",
        }
        for arm, d in decisions.items()
    ]
    store.write_decisions(
        {
            "run_state": state,
            "metric": "val_acc",
            "test": "welch",
            "alpha": 0.05,
            "correction": "holm",
            "min_effect": 0.05,
            "decisions": rows,
        }
    )
    store.write_state(state, reason="test")
    record.run_ended(store.root, state, "test", rows, contract.acceptance.alpha)
    return store.root


def load_contract_with(path: Path, lineage: ProjectLineage):
    from planner._contract.validate import load_contract as load

    return load(path, lineage)


def second(run_dir: Path, arm: str = "high", **extra) -> dict:
    """A contract from `run_dir`'s arm: the arms change only recipe.width."""
    data = {k: v for k, v in FIRST.items() if k not in ("config", "tuning")}
    data.update(
        name="wider",
        hypothesis="A wider recipe raises val_acc.",
        factor={"name": "width", "keys": ["recipe.width"]},
        baseline={"from_run": str(run_dir), "arm": arm},
        arms=[{"name": "wide", "overrides": ["recipe.width=2"]}],
        **extra,
    )
    return data


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]
