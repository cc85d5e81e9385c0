"""`plan audit` on run folders written with known pathologies (docs/run-folder.md): each code, its
evidence, the healthy run's silence, and the next control's one change. Pure: no Ray, no
subprocess."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from planner._audit.audit import audit_json, audit_run, contract_text
from planner._audit.findings import SYMPTOMS
from planner._cli.audit_text import format_audit
from planner._cli.main import main
from planner._contract.validate import validate
from planner._core.records import seeds_identical
from tests._audit_runs import (
    TUNING,
    confirm_trials,
    contract_data,
    curve_trial,
    differences,
    failed_trial,
    tuning_trials,
    write_run,
)
from tests._run_folders import cli

MIDDLE = [
    0.004,
    0.008,
    0.012,
    0.02,
    0.03,
    0.05,
]  # lr values well inside [0.001, 1] on the log scale


@pytest.fixture(autouse=True)
def _repo(in_repo):  # the trainable imports as tests.trainables.audit from the repository root
    return in_repo


def codes(audit, arm=None):
    return [f.code for f in audit.findings if arm is None or f.arm == arm]


def one(audit, code, arm=None):
    found = [f for f in audit.findings if f.code == code and (arm is None or f.arm == arm)]
    assert len(found) == 1, (code, [f.as_dict() for f in audit.findings])
    return found[0]


def check_next(tmp_path, audit, original: dict, code: str, name_suffix: str) -> dict:
    """The next control answers `code`, validates, and differs from the frozen contract in its one
    change."""
    n = audit.next
    assert n is not None and n["code"] == code, audit.next
    assert n["name"] == f"{original['name']}-{name_suffix}"
    target = tmp_path / "next.yaml"  # next to the original contract: no path to rebase
    text, notes = contract_text(audit, target)
    target.write_text(text)
    result = validate(target)
    assert result.valid, [d.format() for d in result.diagnostics]
    new = yaml.safe_load(text)
    frozen = audit.evidence.contract
    changed = {
        c["path"].rsplit(".", 1)[0] if c["path"].startswith("tuning.space") else c["path"]
        for c in n["change"]["paths"] + n["change"]["budget"]
    }
    found = differences(frozen, new)
    assert {"name", "hypothesis"} <= found
    assert {_space_key(p) for p in found - {"name", "hypothesis"}} == changed, (found, changed)
    assert len(n["change"]["paths"]) >= 1
    for c in n["change"]["paths"]:
        assert c["from"] != c["to"]
    assert not any(
        p.startswith(("factor", "arms", "baseline", "metric", "acceptance")) for p in found
    )
    assert (
        code in new["hypothesis"]
        and "Falsifier" in new["hypothesis"]
        and "Expected" in new["hypothesis"]
    )
    return new


def _space_key(path: str) -> str:
    """tuning.space.recipe.lr.log_uniform -> tuning.space.recipe.lr (the dimension, as change paths
    name it)."""
    return (
        path.rsplit(".", 1)[0]
        if path.startswith("tuning.") and path.endswith(("log_uniform", "uniform", "int"))
        else path
    )


def test_a_healthy_run_has_no_symptom_and_no_next_control(tmp_path):
    data = contract_data(tuning=TUNING, seeds=[0, 1, 2, 3, 4], recipe={"noise": 0.003})
    trials = tuning_trials(data, MIDDLE) + confirm_trials(
        data, params={"base": {"recipe.lr": 0.01}, "treat": {"recipe.lr": 0.01}}
    )
    audit = audit_run(write_run(tmp_path, data, trials))
    assert [f for f in audit.findings if f.code in SYMPTOMS] == []
    assert "seed_spread" not in codes(audit) and "unequal_cost" not in codes(audit)
    assert audit.next is None
    assert "No finding calls for a next control" in format_audit(audit)
    recipes = {(r["arm"], r["phase"]): r for r in audit.recipes}
    assert recipes[("treat", "confirm")]["statuses"] == {"completed": 5}
    assert recipes[("treat", "confirm")]["exposure"] == {"min": 4, "max": 4}
    assert recipes[("treat", "confirm")]["config_vs_baseline"] == {
        "recipe.level": 0.7,
        "recipe.name": "b",
    }
    assert recipes[("base", "tune")]["params"]["recipe.lr"] == {"min": 0.004, "max": 0.05}
    assert recipes[("treat", "confirm")]["s_per_step"] == pytest.approx(0.1)


def test_divergence_at_the_top_of_the_lr_range_is_found_and_the_next_control_lowers_it(tmp_path):
    data = contract_data(tuning=TUNING, recipe={"diverge_above": 0.3})
    trials = tuning_trials(data, [0.004, 0.01, 0.03, 0.1, 0.4, 0.8]) + confirm_trials(data)
    audit = audit_run(write_run(tmp_path, data, trials))
    d = one(audit, "diverged", "treat")
    assert d.kind == "observation"
    bad = [e for e in d.evidence if "trial_id" in e]
    assert {e["trial_id"] for e in bad} == {"tune-treat-s1000-t004", "tune-treat-s1000-t005"}
    assert all(e["step"] == 2 and e["metric"] == "val_acc" for e in bad)
    assert d.evidence[-1]["shared_params"]["recipe.lr"] == {"min": 0.4, "max": 0.8}
    r = one(audit, "diverged_region", "base")
    assert r.kind == "inference"
    assert r.evidence[0]["side"] == "high" and r.evidence[0]["diverged_from"] == 0.4
    assert r.evidence[0]["stable_up_to"] == 0.1
    new = check_next(tmp_path, audit, data, "diverged_region", "lower-lr")
    assert new["tuning"]["space"]["recipe.lr"] == {"log_uniform": [0.001, 0.4]}


def test_a_selected_value_at_the_edge_of_its_range_widens_it_for_every_arm(tmp_path):
    data = contract_data(tuning=TUNING, recipe={"best_lr": 0.9})
    trials = tuning_trials(data, [0.002, 0.01, 0.05, 0.2, 0.5, 0.95])
    trials += confirm_trials(
        data, params={"base": {"recipe.lr": 0.95}, "treat": {"recipe.lr": 0.95}}
    )
    audit = audit_run(write_run(tmp_path, data, trials))
    f = one(audit, "selected_at_boundary", "treat")
    assert f.evidence[0]["value"] == 0.95 and f.evidence[0]["side"] == "high"
    assert f.evidence[0]["position"] == pytest.approx((3 + (-0.0223)) / 3, abs=1e-3)
    new = check_next(tmp_path, audit, data, "selected_at_boundary", "wider-lr")
    lo, hi = new["tuning"]["space"]["recipe.lr"]["log_uniform"]
    assert lo == 0.001 and hi == pytest.approx(10**1.5, rel=1e-5)


def test_curves_still_rising_at_the_end_ask_for_twice_the_exposure(tmp_path):
    data = contract_data(
        recipe={"shape": "rising"},
        budget={"exposure": 6, "max_trials": 6, "max_wall_time": "10m", "max_trial_time": 90},
    )
    audit = audit_run(write_run(tmp_path, data, confirm_trials(data)))
    f = one(audit, "still_improving", "base")
    e = f.evidence[0]
    assert (
        f.kind == "inference" and e["steps"] == [4, 6] and e["gain"] == pytest.approx(0.1, abs=0.01)
    )
    assert e["gain"] - e["ci_half_width"] > 0
    new = check_next(tmp_path, audit, data, "still_improving", "exposure-x2")
    assert new["budget"]["exposure"] == 12
    assert new["budget"]["max_wall_time"] == "20m" and new["budget"]["max_trial_time"] == 180
    assert new["budget"]["max_trials"] == 6  # not broken by the change: unchanged


def test_a_flat_curve_and_a_late_decline_are_told_apart(tmp_path):
    data = contract_data(
        arms=[
            {
                "name": "treat",
                "overrides": ["recipe.name=b", "recipe.level=0.7", "recipe.shape=decline"],
            }
        ],
        factor={"name": "recipe", "keys": ["recipe.name", "recipe.level", "recipe.shape"]},
        recipe={"shape": "flat"},
        budget={"exposure": 5},
    )
    audit = audit_run(write_run(tmp_path, data, confirm_trials(data)))
    flat = one(audit, "flat", "base")
    assert flat.evidence[0]["steps"] == [1, 5] and flat.evidence[0]["metric"] == "test_acc"
    decline = one(audit, "late_decline", "treat")
    assert decline.evidence[0]["steps"] == [3, 5]
    assert decline.evidence[0]["drop"] == pytest.approx(0.08, abs=0.02)
    assert "late_decline" not in codes(audit, "base") and "flat" not in codes(audit, "treat")
    assert audit.next is None  # neither has a contract change that answers it


def test_identical_seeds_failures_and_heldout_exposure(tmp_path):
    data = contract_data(tuning=TUNING, recipe={"ignore_seed": True})
    tune = tuning_trials(data, MIDDLE)
    tune[0] = curve_trial(
        data, "base", "tune", 1000, index=0, params={"recipe.lr": MIDDLE[0]}, leak=True
    )
    confirm = confirm_trials(
        data, params={"base": {"recipe.lr": 0.01}, "treat": {"recipe.lr": 0.01}}
    )
    confirm[-1] = failed_trial("treat", "confirm", 2)
    audit = audit_run(write_run(tmp_path, data, tune + confirm))
    same = one(audit, "seeds_identical", "base")
    assert same.evidence[0]["seeds"] == [0, 1, 2] and same.evidence[0]["steps"] == 4
    assert "flat" not in codes(audit, "base")  # no seed noise to judge a curve against
    fail = one(audit, "failures", "treat")
    assert (
        fail.evidence[0]["trial_id"] == "confirm-treat-s2"
        and fail.evidence[0]["error_type"] == "RuntimeError"
    )
    held = one(audit, "heldout_exposure", "base")
    assert held.evidence[0]["trial_id"] == "tune-base-s1000-t000" and held.evidence[0]["step"] == 1
    assert any("seed noise of base" in m["what"] for m in audit.missing)


def test_seeds_identical_logged_by_the_decision_is_read(tmp_path):
    data = contract_data()
    run = write_run(tmp_path, data, confirm_trials(data))
    doc = json.loads((run / "decisions.json").read_text())
    doc["decisions"][0]["findings"] = [{"code": "seeds_identical", "detail": "logged by the run"}]
    (run / "decisions.json").write_text(json.dumps(doc))
    f = one(audit_run(run), "seeds_identical", "treat")
    assert f.evidence == [
        {
            "source": "decisions.json",
            "arm": "treat",
            "code": "seeds_identical",
            "detail": "logged by the run",
        }
    ]


def test_a_wide_ci_asks_for_the_seeds_power_needs(tmp_path):
    data = contract_data(
        arms=[{"name": "treat", "overrides": ["recipe.name=b", "recipe.level=0.52"]}],
        recipe={"noise": 0.001, "offset": 0.03},
        # welch: the seed offset both arms share is what widens its CI (the paired test removes it)
        acceptance={"min_effect": 0.02, "test": "welch"},
        budget={"exposure": 4, "max_trials": 6},
    )
    audit = audit_run(write_run(tmp_path, data, confirm_trials(data)))
    f = one(audit, "seed_spread", "treat")
    e = f.evidence[0]
    assert e["decision"] == "inconclusive" and e["width"] > 0.02 and e["seeds_80"] > 3
    from planner._contract.model import Contract
    from planner._plan.seeds import power_summary

    said = power_summary(
        Contract.model_validate(data), e["sd"]
    )  # what `plan power --pilot RUN_DIR` prints
    assert (
        e["seeds_80"] == said["needed"]["80"]["seeds"]
        and e["power_declared"] == said["declared"]["power"]
    )
    new = check_next(tmp_path, audit, data, "seed_spread", f"seeds-{e['seeds_80']}")
    assert new["seeds"][:3] == [0, 1, 2] and len(new["seeds"]) == e["seeds_80"]
    assert new["budget"]["max_trials"] == 2 * e["seeds_80"]


def test_selection_optimism_and_unequal_cost(tmp_path):
    data = contract_data(tuning=TUNING)
    tune = [
        curve_trial(
            data,
            t["arm"],
            "tune",
            1000,
            index=t["index"],
            params=t["params"],
            s_per_step=0.4 if t["arm"] == "treat" else 0.1,
        )
        for t in tuning_trials(data, MIDDLE)
    ]
    confirm = [
        curve_trial(
            data,
            t["arm"],
            "confirm",
            t["seed"],
            params={"recipe.lr": 0.01},
            s_per_step=0.4 if t["arm"] == "treat" else 0.1,
        )
        for t in confirm_trials(data)
    ]
    selection = {
        "rule": "final",
        "metric": "val_acc",
        "mode": "max",
        "arms": {
            "base": {
                "arm": "base",
                "trial_id": "tune-base-s1000-t001",
                "params": {"recipe.lr": 0.01},
                "score": 0.5,
            },
            "treat": {
                "arm": "treat",
                "trial_id": "tune-treat-s1000-t001",
                "params": {"recipe.lr": 0.01},
                "score": 0.9,
            },
        },
    }
    audit = audit_run(write_run(tmp_path, data, tune + confirm, selection=selection))
    opt = one(audit, "selection_optimism", "treat")
    assert opt.evidence[0]["optimism"] == pytest.approx(0.2, abs=0.01)
    assert opt.evidence[0]["optimism"] > opt.evidence[0]["ci_half_width"]
    assert "selection_optimism" not in codes(audit, "base")
    cost = one(audit, "unequal_cost")
    assert cost.arm == "treat"
    per_arm = {row["arm"]: row for row in cost.evidence}
    assert per_arm["treat"]["median_s_per_step"] == pytest.approx(0.4)
    assert per_arm["base"]["median_s_per_step"] == pytest.approx(0.1)


def test_seeds_that_tie_give_no_inference_from_a_ci_of_width_zero(tmp_path):
    """A quantized metric (accuracy on a small validation set) ties across seeds: every seed of
    treat ends at 0.7 after the same rise. `selection_optimism` and `still_improving` weighed a
    difference against a 95 % CI of +-0 and inferred it; with no spread the CI says nothing, and
    three seeds that agree are too few for the sign rule over seeds (chance gives it one time in
    eight)."""
    data = contract_data(tuning=TUNING)
    tune = [
        curve_trial(data, t["arm"], "tune", 1000, index=t["index"], params=t["params"])
        for t in tuning_trials(data, MIDDLE)
    ]
    confirm = [
        curve_trial(data, t["arm"], "confirm", t["seed"], params={"recipe.lr": 0.01})
        for t in confirm_trials(data)
    ]
    for trial in confirm:
        if trial["arm"] == "treat":
            n = len(trial["reports"])
            for step, report in enumerate(trial["reports"], start=1):
                report["metrics"]["val_acc"] = round(0.5 + 0.2 * step / n, 2)
    selection = {
        "rule": "final",
        "metric": "val_acc",
        "mode": "max",
        "arms": {
            "base": {
                "arm": "base",
                "trial_id": "tune-base-s1000-t001",
                "params": {"recipe.lr": 0.01},
                "score": 0.5,
            },
            "treat": {
                "arm": "treat",
                "trial_id": "tune-treat-s1000-t001",
                "params": {"recipe.lr": 0.01},
                "score": 0.9,
            },
        },
    }
    audit = audit_run(write_run(tmp_path, data, tune + confirm, selection=selection))
    assert "selection_optimism" not in codes(audit, "treat") and "still_improving" not in codes(
        audit, "treat"
    )


def test_missing_evidence_is_named(tmp_path):
    data = contract_data(metric={"name": "val_acc", "mode": "max"})
    trials = confirm_trials(data)
    for t in trials:
        for r in t["reports"]:
            r["metrics"].pop("train_loss")
    audit = audit_run(write_run(tmp_path, data, trials, commit=None))
    what = [m["what"] for m in audit.missing]
    assert "no training-loss metric" in what and "no gradient-norm or update-size metric" in what
    assert "no commit in the identity" in what and "no held-out metric (metric.heldout)" in what


def test_the_json_shape_and_the_cli(tmp_path, capsys):
    data = contract_data(recipe={"shape": "rising"}, budget={"exposure": 6})
    run = write_run(tmp_path, data, confirm_trials(data))
    assert main(["audit", str(run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"run", "recipes", "findings", "missing", "next"}
    assert all(set(f) == {"code", "arm", "kind", "summary", "evidence"} for f in doc["findings"])
    assert all(f["kind"] in ("observation", "inference", "guess") for f in doc["findings"])
    assert set(doc["next"]) >= {"code", "change", "falsifier", "expected", "contract"}
    assert doc == audit_json(audit_run(run))
    target = tmp_path / "next.yaml"
    assert main(["audit", str(run), "--next", str(target)]) == 0
    assert f"wrote {target}" in capsys.readouterr().out
    assert yaml.safe_load(target.read_text())["budget"]["exposure"] == 12
    assert main(["validate", str(target)]) == 0


def test_no_next_control_writes_nothing(tmp_path, capsys):
    data = contract_data()
    run = write_run(tmp_path, data, confirm_trials(data))
    target = tmp_path / "next.yaml"
    assert main(["audit", str(run), "--next", str(target)]) == 0
    captured = capsys.readouterr()
    assert (
        "No finding calls for a next control" in captured.out and "is not written" in captured.err
    )
    assert not target.exists()


def test_a_next_control_written_elsewhere_keeps_its_folders(tmp_path):
    data = contract_data(recipe={"shape": "rising"}, budget={"exposure": 6})
    data["data"]["fingerprint"] = ["data.bin"]
    (tmp_path / "data.bin").write_bytes(b"x")
    run = write_run(tmp_path, data, confirm_trials(data))
    audit = audit_run(run)
    elsewhere = tmp_path / "other" / "deeper"
    elsewhere.mkdir(parents=True)
    text, notes = contract_text(audit, elsewhere / "next.yaml")
    new = yaml.safe_load(text)
    assert (elsewhere / new["data"]["fingerprint"][0]).resolve() == (
        tmp_path / "data.bin"
    ).resolve()
    assert any("data.fingerprint" in n for n in notes)


def test_not_a_run_folder_is_a_sentence(tmp_path, capsys):
    assert main(["audit", str(tmp_path)]) == 2
    assert "is not a run folder" in capsys.readouterr().err


def test_a_range_that_cannot_widen_gives_way_to_the_next_finding(tmp_path):
    space = {"recipe.lr": {"log_uniform": [0.001, 1.0]}, "recipe.drop": {"uniform": [0.0, 0.5]}}
    data = contract_data(
        tuning={**TUNING, "space": space},
        recipe={"shape": "rising", "drop": 0.1},
        budget={"exposure": 6},
    )
    tune = [
        curve_trial(
            data,
            arm,
            "tune",
            1000,
            index=i,
            params={"recipe.lr": lr, "recipe.drop": 0.01 * (i + 1)},
        )
        for arm in ("base", "treat")
        for i, lr in enumerate(MIDDLE)
    ]
    selected = {
        "recipe.lr": 0.01,
        "recipe.drop": 0.01,
    }  # the lower 10 % of [0, 0.5], which starts at 0
    audit = audit_run(
        write_run(
            tmp_path,
            data,
            tune + confirm_trials(data, params={"base": selected, "treat": selected}),
            selection={
                "rule": "final",
                "metric": "val_acc",
                "mode": "max",
                "arms": {
                    a: {
                        "arm": a,
                        "trial_id": f"tune-{a}-s1000-t000",
                        "params": selected,
                        "score": 0.5,
                    }
                    for a in ("base", "treat")
                },
            },
        )
    )
    assert one(audit, "selected_at_boundary", "base").evidence[0]["key"] == "recipe.drop"
    check_next(tmp_path, audit, data, "still_improving", "exposure-x2")


def test_a_run_with_no_trial_yet_says_so(tmp_path):
    audit = audit_run(write_run(tmp_path, contract_data(), []))
    assert audit.findings == [] and audit.next is None and audit.recipes == []
    assert [m["what"] for m in audit.missing] == ["no trial ended"]
    assert "no trial ended yet" in format_audit(audit)


def test_what_ran_compares_a_recipe_with_the_baseline_like_for_like(tmp_path):
    """Before: `treat ran, against the baseline's logged config: ..., seed=0`: the arm's first
    trial (seed 0) was compared with the baseline's first trial to finish (seed 1), seed key
    included."""
    data = contract_data(seeds=[0, 1, 2])
    data["command"] = {"run": "python train.py", "seed_key": "seed", "budget_key": "epochs"}
    data.pop("trainable", None)
    trials = confirm_trials(data)
    for t in trials:
        t["config"] = {**t["config"], "seed": t["seed"], "epochs": 4}
    base = [t for t in trials if t["arm"] == "base"]
    trials = [base[1], base[0], base[2]] + [
        t for t in trials if t["arm"] != "base"
    ]  # seed 1 finished first
    recipes = {
        (r["arm"], r["phase"]): r for r in audit_run(write_run(tmp_path, data, trials)).recipes
    }
    assert recipes[("treat", "confirm")]["config_vs_baseline"] == {
        "recipe.level": 0.7,
        "recipe.name": "b",
    }


def test_the_audit_and_the_run_judge_identical_seeds_by_one_rule(tmp_path):
    # Every seed of base reported the same curves, a metric stored as "nan" (a non-finite value)
    # included: the run's own rule calls the seeds identical, and the audit reads the same records
    # by the same rule (it used to compare its own float copies, where nan != nan, and said
    # nothing).
    data = contract_data(recipe={"ignore_seed": True})
    confirm = confirm_trials(
        data, params={"base": {"recipe.lr": 0.01}, "treat": {"recipe.lr": 0.01}}
    )
    for r in confirm:
        for report in r["reports"]:
            report["metrics"]["grad_norm"] = "nan"
    assert seeds_identical(confirm).get("base") == 3
    audit = audit_run(write_run(tmp_path, data, confirm))
    assert one(audit, "seeds_identical", "base").evidence[0]["seeds"] == [0, 1, 2]
    assert ("base" in seeds_identical(confirm)) and ("treat" in seeds_identical(confirm)) == (
        "seeds_identical" in codes(audit, "treat")
    )


def test_a_curve_of_two_reports_is_not_said_to_rise_over_its_last_third(tmp_path):
    """A script that evaluates at its first and last step only: the rise is over the whole curve,
    and the sentence says that, not 'the last third'."""
    data = contract_data(recipe={"shape": "rising"})
    confirm = confirm_trials(data)
    for trial in confirm:
        trial["reports"] = [trial["reports"][0], trial["reports"][-1]]
    audit = audit_run(write_run(tmp_path, data, confirm))
    f = one(audit, "still_improving", "base")
    assert "over its only reports, too few for a last third (step 1 to " in f.summary
    assert "over the last third" not in f.summary


def test_a_gain_every_seed_shows_alike_is_still_improving_by_the_sign_rule(tmp_path):
    """Six seeds that each rise by exactly the same amount over the last third have no spread for a
    CI, but every seed agreeing is evidence: chance alone gives six gains of one sign once in 64
    (one-sided)."""
    data = contract_data(seeds=[0, 1, 2, 3, 4, 5])
    confirm = [curve_trial(data, t["arm"], "confirm", t["seed"]) for t in confirm_trials(data)]
    for (
        trial
    ) in confirm:  # each seed at its own level, each rising by the same (exact binary) steps
        for step, report in enumerate(trial["reports"], start=1):
            for metric in ("val_acc", "test_acc"):
                report["metrics"][metric] = 0.5 + trial["seed"] / 64 + step / 32
    audit = audit_run(write_run(tmp_path, data, confirm))
    f = one(audit, "still_improving", "treat")
    assert f.evidence[0]["p_sign"] == pytest.approx(0.5**6)
    assert "every one of 6 seeds gains exactly that" in f.summary
    # one seed that gains less breaks the tie: the CI decides again, here with a spread too small
    # to matter
    confirm[0]["reports"][-1]["metrics"]["test_acc"] -= 0.001
    (tmp_path / "spread").mkdir()
    audit = audit_run(write_run(tmp_path / "spread", data, confirm))
    assert "sign test" not in getattr(
        next((x for x in audit.findings if x.code == "still_improving"), None), "summary", ""
    )


def test_an_under_explored_range_is_flagged_with_the_range_explored_and_more_draws_proposed(
    tmp_path,
):
    """The nanoGPT case: five log-uniform draws of lr, all in 0.0021-0.0081 of a declared [3e-4,
    3e-2]; both arms select their smallest. The value sits at 42 % of the declared range (no
    declared boundary), but at the edge of what was explored, with 42 % of the range below it never
    tried."""
    tuning = {**TUNING, "trials_per_arm": 5, "space": {"recipe.lr": {"log_uniform": [3e-4, 3e-2]}}}
    data = contract_data(tuning=tuning, recipe={"best_lr": 0.0005})
    draws = [0.0021, 0.0034, 0.0047, 0.0063, 0.0081]
    trials = tuning_trials(data, draws)
    trials += confirm_trials(
        data, params={"base": {"recipe.lr": 0.0021}, "treat": {"recipe.lr": 0.0021}}
    )
    selection = {
        "rule": "final",
        "metric": "val_acc",
        "mode": "max",
        "arms": {
            arm: {"arm": arm, "trial_id": f"tune-{arm}-s1000-t000", "params": {"recipe.lr": 0.0021}}
            for arm in ("base", "treat")
        },
    }
    audit = audit_run(write_run(tmp_path, data, trials, selection=selection))
    for arm in ("base", "treat"):
        f = one(audit, "selected_at_boundary", arm)
        e = f.evidence[0]
        assert e["explored"] == [0.0021, 0.0081] and e["draws"] == 5 and e["side"] == "low"
        assert e["position"] == pytest.approx(math.log(7) / math.log(100), abs=1e-3)
        assert e["explored_share"] == pytest.approx(math.log(0.0081 / 0.0021) / math.log(100))
        assert "smallest of its 5 draws, which explored 0.0021-0.0081" in f.summary
    new = check_next(tmp_path, audit, data, "selected_at_boundary", "draws-x2")
    assert new["tuning"]["trials_per_arm"] == 10


def test_audit_next_does_not_replace_an_existing_file(run, tmp_path, capsys):
    """`plan audit RUN --next contract.yaml` replaced the user's contract without a word."""
    mine = tmp_path / "contract.yaml"
    mine.write_text("my contract\n")
    code, _, err = cli(["audit", str(run), "--next", str(mine)], capsys)
    assert code == 2 and "--force" in err and mine.read_text() == "my contract\n"
    code, _, err = cli(["audit", str(run), "--next", str(mine), "--force"], capsys)
    assert code == 0, err
