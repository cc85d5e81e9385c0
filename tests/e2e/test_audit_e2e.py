"""`plan audit` on runs made for real: small contracts with a known pathology through `plan run` on
the local Ray.

Each contract runs the audit trainable (tests/trainables/audit.py) with one
pathology; the audit must find its code with the right evidence, a healthy
run none of the symptom codes, and every `--next` contract must pass
`plan validate` and differ from the frozen contract in its one stated way.
"""

from __future__ import annotations

import json

import pytest
import yaml

from planner import run
from planner._audit.findings import SYMPTOMS
from planner._cli.main import main
from tests._audit_runs import contract_data, differences

pytestmark = pytest.mark.ray

TUNING = {
    "trials_per_arm": 6,
    "seeds": [1000],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [0.001, 1.0]}},
}


def run_contract(tmp_path, data):
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.run_dir is not None
    return result.run_dir


def audit(run_dir, capsys, *extra):
    capsys.readouterr()  # what the run printed before (its folder's line)
    assert main(["audit", str(run_dir), "--json", *extra]) == 0
    out = capsys.readouterr().out
    return json.loads(out[: out.rindex("}") + 1])


def found(doc, code, arm=None):
    return [f for f in doc["findings"] if f["code"] == code and (arm is None or f["arm"] == arm)]


def check_next(tmp_path, run_dir, doc, capsys, code, suffix):
    """--next writes a contract that `plan validate` accepts and that differs in its one change
    only."""
    assert doc["next"]["code"] == code and doc["next"]["name"].endswith(f"-{suffix}")
    target = tmp_path / "next.yaml"
    audit(run_dir, capsys, "--next", str(target))
    assert main(["validate", str(target)]) == 0
    capsys.readouterr()
    frozen = yaml.safe_load((run_dir / "contract.yaml").read_text())
    new = yaml.safe_load(target.read_text())
    change = doc["next"]["change"]
    stated = {c["path"] for c in change["paths"] + change["budget"]}
    assert differences(frozen, new) == {"name", "hypothesis"} | stated
    return new


def test_a_healthy_run_gets_no_symptom(ray_local, in_repo, tmp_path, capsys):
    data = contract_data(
        tuning=TUNING, seeds=[0, 1, 2, 3, 4], recipe={"noise": 0.002, "best_lr": 0.03}
    )
    doc = audit(run_contract(tmp_path, data), capsys)
    assert [f["code"] for f in doc["findings"] if f["code"] in SYMPTOMS] == []
    assert doc["next"] is None
    assert {(r["arm"], r["phase"]) for r in doc["recipes"]} == {
        ("base", "tune"),
        ("base", "confirm"),
        ("treat", "tune"),
        ("treat", "confirm"),
    }


def test_divergence_at_high_lr_test_exposure_and_the_winners_curse(
    ray_local, in_repo, tmp_path, capsys
):
    # the trainable also reports the held-out metric while tuning: test exposure
    # and its tuning scores carry an offset per trial that confirmation does not repeat: the
    # winner's curse
    data = contract_data(
        tuning={**TUNING, "trials_per_arm": 8},
        recipe={"diverge_above": 0.1, "leak": True, "tune_offset": 0.05},
    )
    run_dir = run_contract(tmp_path, data)
    doc = audit(run_dir, capsys)
    trials = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    for arm in ("base", "treat"):
        exposed = found(doc, "heldout_exposure", arm)
        assert len(exposed) == 1 and {e["trial_id"] for e in exposed[0]["evidence"]} == {
            t["trial_id"] for t in trials if t["phase"] == "tune" and t["arm"] == arm
        }
    diverged = {t["trial_id"] for t in trials if t["status"] == "diverged"}
    assert diverged and all(
        t["params"]["recipe.lr"] > 0.1 for t in trials if t["trial_id"] in diverged
    )
    for f in found(doc, "diverged"):
        assert {e["trial_id"] for e in f["evidence"] if "trial_id" in e} == {
            t["trial_id"] for t in trials if t["status"] == "diverged" and t["arm"] == f["arm"]
        }
        assert all(e["step"] == 2 for e in f["evidence"] if "trial_id" in e)
    region = found(doc, "diverged_region")
    assert region and all(r["evidence"][0]["side"] == "high" for r in region)
    edge = min(r["evidence"][0]["diverged_from"] for r in region if r["arm"] == doc["next"]["arm"])
    selection = json.loads((run_dir / "selection.json").read_text())["arms"]
    optimism = found(doc, "selection_optimism")
    assert optimism
    for f in optimism:
        e = f["evidence"][0]
        assert (
            e["tuning_score"] == selection[f["arm"]]["score"] and e["optimism"] > e["ci_half_width"]
        )
    new = check_next(tmp_path, run_dir, doc, capsys, "diverged_region", "lower-lr")
    assert new["tuning"]["space"]["recipe.lr"]["log_uniform"] == [0.001, edge]


def test_rising_and_declining_curves(ray_local, in_repo, tmp_path, capsys):
    data = contract_data(
        arms=[
            {
                "name": "treat",
                "overrides": ["recipe.name=b", "recipe.level=0.7", "recipe.shape=decline"],
            }
        ],
        factor={"name": "recipe", "keys": ["recipe.name", "recipe.level", "recipe.shape"]},
        recipe={"shape": "rising"},
        budget={"exposure": 5, "max_trial_time": "2m"},
    )
    run_dir = run_contract(tmp_path, data)
    doc = audit(run_dir, capsys)
    rising = found(doc, "still_improving", "base")
    assert len(rising) == 1 and rising[0]["evidence"][0]["steps"] == [
        3,
        5,
    ]  # the last third: 5 - 4 / 3
    decline = found(doc, "late_decline", "treat")
    assert len(decline) == 1 and decline[0]["evidence"][0]["steps"] == [3, 5]
    assert not found(doc, "late_decline", "base") and not found(doc, "still_improving", "treat")
    new = check_next(tmp_path, run_dir, doc, capsys, "still_improving", "exposure-x2")
    assert new["budget"]["exposure"] == 10 and new["budget"]["max_trial_time"] == "4m"


def test_flat_identical_seeds_failures_and_unequal_cost(ray_local, in_repo, tmp_path, capsys):
    data = contract_data(
        arms=[
            {
                "name": "treat",
                "overrides": [
                    "recipe.name=b",
                    "recipe.level=0.7",
                    "recipe.ignore_seed=true",
                    "recipe.sleep=0.05",
                ],
            }
        ],
        recipe={
            "shape": "flat",
            "noise": 0.001,
            "offset": 0.01,
            "crash_seed": 2,
            "ignore_seed": False,
            "sleep": 0.0,
        },
        seeds=[0, 1, 2, 3],
        factor={
            "name": "recipe",
            "keys": ["recipe.name", "recipe.level", "recipe.ignore_seed", "recipe.sleep"],
        },
    )
    run_dir = run_contract(tmp_path, data)
    doc = audit(run_dir, capsys)
    flat = found(doc, "flat", "base")
    assert len(flat) == 1 and flat[0]["evidence"][0]["steps"] == [1, 4]
    same = found(doc, "seeds_identical", "treat")
    assert len(same) == 1 and same[0]["evidence"][0]["seeds"] == [0, 1, 3]
    fails = {e["trial_id"] for f in found(doc, "failures") for e in f["evidence"]}
    assert fails == {"confirm-base-s2", "confirm-treat-s2"}
    assert not found(doc, "seeds_identical", "base") and not found(doc, "flat", "treat")
    cost = found(doc, "unequal_cost")  # treat's steps sleep 50 ms, base's do not
    assert len(cost) == 1 and cost[0]["arm"] == "treat"
    per_step = {row["arm"]: row["median_s_per_step"] for row in cost[0]["evidence"]}
    assert per_step["treat"] >= 0.05 > per_step["base"]


def test_a_selected_lr_at_the_top_of_its_range(ray_local, in_repo, tmp_path, capsys):
    # the random sampler's seed 10 draws one lr in the top 3 % of the range (the others below 80 %)
    tuning = {
        **TUNING,
        "sampler": {"name": "random", "seed": 10},
        "space": {"recipe.lr": {"log_uniform": [0.0001, 0.05]}},
    }
    data = contract_data(tuning=tuning, recipe={"best_lr": 1.0})
    run_dir = run_contract(tmp_path, data)
    doc = audit(run_dir, capsys)
    selection = json.loads((run_dir / "selection.json").read_text())["arms"]
    for f in found(doc, "selected_at_boundary"):
        e = f["evidence"][0]
        assert e["value"] == selection[f["arm"]]["params"]["recipe.lr"] and e["side"] == "high"
        assert e["position"] >= 0.9
    assert found(doc, "selected_at_boundary")
    new = check_next(tmp_path, run_dir, doc, capsys, "selected_at_boundary", "wider-lr")
    lo, hi = new["tuning"]["space"]["recipe.lr"]["log_uniform"]
    assert lo == 0.0001 and hi > 0.05


def test_a_wide_ci_and_the_seeds_power_asks_for(ray_local, in_repo, tmp_path, capsys):
    data = contract_data(
        arms=[{"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.51"]}],
        recipe={"noise": 0.001, "offset": 0.03, "shape": "flat"},
        # welch: the arms' seed noise is shared, so only the unpaired test sees the seeds' spread
        acceptance={"min_effect": 0.02, "test": "welch"},
        budget={"exposure": 3, "max_trials": 6},
    )
    run_dir = run_contract(tmp_path, data)
    doc = audit(run_dir, capsys)
    spread = found(doc, "seed_spread", "treat")
    assert len(spread) == 1
    e = spread[0]["evidence"][0]
    assert e["width"] > 0.02 and e["seeds_80"] > 3
    new = check_next(tmp_path, run_dir, doc, capsys, "seed_spread", f"seeds-{e['seeds_80']}")
    assert len(new["seeds"]) == e["seeds_80"] and new["budget"]["max_trials"] == 2 * e["seeds_80"]
