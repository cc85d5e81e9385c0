"""The audit parts of issues 20 (item 7), 21 (item 2) and 24 (item 8): each test fails on the code
before."""

from __future__ import annotations

import yaml

from planner._audit.audit import audit_run, contract_text
from tests._audit_runs import TUNING, confirm_trials, contract_data, curve_trial, write_run

MIDDLE = [0.005, 0.01, 0.02, 0.05]


def codes(audit, arm=None):
    return {f.code for f in audit.findings if arm is None or f.arm == arm}


def _workers(trials, firsts, startup_s=3.0):
    """Each trial on its own worker in start order; the trials in `firsts` start their worker and
    pay a start-up."""
    for i, t in enumerate(trials):
        t["started"] = f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}.000Z"
        t["pid"] = 100 + i
    by_id = {t["trial_id"]: t for t in trials}
    for tid in firsts:
        t = by_id[tid]
        for r in t["reports"]:
            r["time_s"] += startup_s
        t["duration_s"] = t["reports"][-1]["time_s"]
    # the rest run on the workers the firsts started (later), so they pay nothing
    rest = [t for t in trials if t["trial_id"] not in firsts]
    for i, t in enumerate(rest):
        t["pid"] = by_id[firsts[i % len(firsts)]]["pid"]
        t["started"] = f"2026-11-30T11:{i // 60:02d}:{i % 60:02d}.000Z"
    return trials


def test_unequal_cost_leaves_out_the_start_up_the_first_trial_of_each_worker_paid(tmp_path):
    data = contract_data(tuning=TUNING)
    tune = [
        curve_trial(data, arm, "tune", 1000, index=i, params={"recipe.lr": lr})
        for arm in ("base", "treat")
        for i, lr in enumerate(MIDDLE)
    ]
    trials = _workers(
        tune
        + confirm_trials(data, params={"base": {"recipe.lr": 0.01}, "treat": {"recipe.lr": 0.01}}),
        ["tune-base-s1000-t000", "tune-base-s1000-t001"],
    )
    audit = audit_run(write_run(tmp_path, data, trials))
    assert "unequal_cost" not in codes(
        audit
    )  # the same seconds per step: only base's first trials paid imports
    # a real difference per step is still found, and says what it left out
    slow = [
        curve_trial(
            data,
            arm,
            "tune",
            1000,
            index=i,
            params={"recipe.lr": lr},
            s_per_step=0.4 if arm == "treat" else 0.1,
        )
        for arm in ("base", "treat")
        for i, lr in enumerate(MIDDLE)
    ]
    slow += [
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
    other = tmp_path / "slow"
    other.mkdir()
    audit = audit_run(
        write_run(other, data, _workers(slow, ["tune-base-s1000-t000", "tune-treat-s1000-t000"]))
    )
    [cost] = [f for f in audit.findings if f.code == "unequal_cost"]
    assert cost.arm == "treat" and "seconds per step: treat 0.4 vs base 0.1" in cost.summary
    assert "resource-seconds per trial" in cost.summary
    assert (
        "The first trial of each worker (2: tune-base-s1000-t000, tune-treat-s1000-t000)"
        in cost.summary
    )
    per_arm = {e["arm"]: e for e in cost.evidence}
    assert set(per_arm) == {"base", "treat"} and set(per_arm["base"]["first_trials"]) == {
        "tune-base-s1000-t000"
    }
    startup = per_arm["treat"]["startup"]
    assert (
        startup["extra_s"] == startup["median_startup_s"] - startup["others_median_startup_s"] > 2.5
    )


def _missing(audit):
    return {m["what"]: m["why"] for m in audit.missing}


def test_a_validation_loss_is_not_a_training_loss_and_logged_splits_are_data_evidence(tmp_path):
    data = contract_data()
    trials = confirm_trials(data)
    for t in trials:
        for r in t["reports"]:
            r["metrics"]["val_loss"] = 1 - r["metrics"].pop("train_loss")
    audit = audit_run(write_run(tmp_path, data, trials))
    assert "no training-loss metric" in _missing(
        audit
    )  # "val_loss" contains "loss": not a training loss
    assert "no data fingerprint (data.fingerprint)" in _missing(audit)
    other = tmp_path / "with-splits"
    other.mkdir()
    for t in trials:
        t["splits"] = {"train": {"presentations": 8, "distinct": 8, "fingerprint": "ab" * 16}}
        for r in t["reports"]:
            r["metrics"]["loss"] = r["metrics"]["val_loss"] / 2
    audit = audit_run(write_run(other, data, trials))
    assert "no data fingerprint (data.fingerprint)" not in _missing(
        audit
    )  # the trials logged their splits
    assert "no training-loss metric" not in _missing(audit)


def _command_contract(names):
    data = contract_data()
    data.pop("trainable")
    data["command"] = {
        "run": "python train.py",
        "metrics": {"file": "metrics.csv", "format": "csv", "step": "epoch", "names": names},
    }
    return data


def test_training_loss_and_gradient_norm_come_from_what_was_declared_and_logged(tmp_path):
    data = _command_contract(
        {"val_acc": "val_acc", "test_acc": "test_acc", "train_loss": "train_loss"}
    )
    trials = confirm_trials(data)
    for t in trials:  # the train rows were never read: train_loss declared, never reported
        for r in t["reports"]:
            r["metrics"].pop("train_loss")
    run = write_run(tmp_path, data, trials)
    missing = _missing(audit_run(run))
    assert (
        "command.metrics.names declares train_loss, but no trial reported it"
        in missing["no training-loss metric"]
    )
    assert "no gradient-norm or update-size metric" in missing
    # the script's own log has a grad_norm column (the Trainer logs one), though planner read only
    # what it maps
    hydra = run / "trials" / trials[-1]["trial_id"] / "attempt-1" / "hydra"
    hydra.mkdir(parents=True)
    (hydra / "metrics.csv").write_text("epoch,val_acc,grad_norm,train_loss\n1,0.5,,\n1,,2.5,0.7\n")
    assert "no gradient-norm or update-size metric" not in _missing(audit_run(run))
    # a name that only contains "norm" or "grad" is not a gradient norm
    (hydra / "metrics.csv").write_text(
        "epoch,val_acc,layer_norm_scale,grad_clip_count\n1,0.5,1.0,0\n"
    )
    assert "no gradient-norm or update-size metric" in _missing(audit_run(run))


def test_an_arm_stopped_at_the_first_rung_at_the_other_arms_selected_value_is_reported_with_a_control(  # noqa: E501
    tmp_path,
):
    from planner._contract.model import Contract

    data = contract_data(
        tuning={
            **TUNING,
            "trials_per_arm": 4,
            "sampler": {"name": "random", "seed": 0},
            "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 2},
        }
    )
    tune = [
        curve_trial(data, arm, "tune", 1000, index=i, params={"recipe.lr": lr})
        for arm in ("base", "treat")
        for i, lr in enumerate(MIDDLE)
    ]
    stopped = next(t for t in tune if t["arm"] == "treat" and t["params"]["recipe.lr"] == 0.02)
    stopped["reports"], stopped["status"], stopped["exposure"] = (
        stopped["reports"][:1],
        "early_stopped",
        1,
    )
    selected = {"base": 0.02, "treat": 0.01}
    selection = {
        "rule": "final",
        "metric": "val_acc",
        "mode": "max",
        "arms": {
            arm: {
                "arm": arm,
                "trial_id": f"tune-{arm}-s1000-t00{MIDDLE.index(lr)}",
                "params": {"recipe.lr": lr},
                "score": 0.5,
            }
            for arm, lr in selected.items()
        },
    }
    confirm = confirm_trials(data, params={a: {"recipe.lr": lr} for a, lr in selected.items()})
    run = write_run(tmp_path, data, tune + confirm, selection=selection)
    audit = audit_run(run)
    [f] = [f for f in audit.findings if f.code == "stopped_early_at_selected"]
    assert f.arm == "treat" and f.kind == "inference"
    assert f.evidence[0]["trial_id"] == stopped["trial_id"] and f.evidence[0]["exposure"] == 1
    assert f.evidence[0]["other_arm"] == "base" and f.evidence[0]["other_params"] == {
        "recipe.lr": 0.02
    }
    assert "stopped at the first rung" in f.summary
    assert audit.next["code"] == "stopped_early_at_selected" and audit.next["name"].endswith(
        "-no-early-stop"
    )
    text, _ = contract_text(audit, tmp_path / "next.yaml")
    new = yaml.safe_load(text)
    assert new["tuning"]["early_stop"]["rule"] == "none"
    assert Contract.model_validate(new).tuning.early_stop.rule == "none"
    # the same run where base never stopped treat at that value: no finding
    stopped["status"], stopped["exposure"] = "completed", 4
    other = tmp_path / "healthy"
    other.mkdir()
    stopped["reports"] = curve_trial(
        data, "treat", "tune", 1000, index=2, params={"recipe.lr": 0.02}
    )["reports"]
    assert "stopped_early_at_selected" not in codes(
        audit_run(write_run(other, data, tune + confirm, selection=selection))
    )


def test_an_unbounded_ci_reads_none_not_pythons_None():
    """A new user saw `CI [None, None]` in plan audit's What-ran rows (a degenerate spread has no
    CI)."""
    from planner._audit import findings

    assert findings._g(None) == "none" and findings._g(0.12345) == "0.1235"
