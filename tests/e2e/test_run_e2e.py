"""`plan run` end to end: real contracts through a real local Ray, real Optuna, real Tune."""

from __future__ import annotations

import io
import json
import math

import pytest
import yaml

from planner import load_run, run
from planner._cli.main import main
from planner._cli.run_text import format_result
from tests._runs import (
    RUN_CONTRACT,
    contract_writer,
    cut_short,
    interrupt_joined_run,
)

pytestmark = pytest.mark.ray

write = contract_writer(RUN_CONTRACT)


def level(value):
    return [{"name": "treat", "overrides": ["recipe.name=b", f"recipe.level={value}"]}]


def decision(result, arm="treat"):
    return next(d for d in result.decisions if d["arm"] == arm)


def records(result):
    return load_run(result.run_dir).records


def test_a_strong_effect_is_accepted_and_the_run_folder_holds_what_it_promises(
    ray_local, in_repo, tmp_path
):
    result = run(write(tmp_path), runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed" and result.exit_code == 0
    d = decision(result)
    assert d["decision"] == "accept" and d["effect"] == pytest.approx(0.2, abs=0.02)
    assert d["ci_low"] > 0 and d["n_arm"] == 5 and d["n_baseline"] == 5

    root = result.run_dir
    assert root.parent == tmp_path / "runs" / "e2e"
    for name in (
        "contract.yaml",
        "run.json",
        "state.json",
        "identity.json",
        "plan.json",
        "trials.jsonl",
        "events.jsonl",
        "decisions.json",
        "configs/base.yaml",
        "configs/treat.yaml",
    ):
        assert (root / name).is_file(), name
    assert not (root / "lock").exists()
    frozen = yaml.safe_load((root / "contract.yaml").read_text())
    assert frozen["acceptance"]["correction"] == "holm"  # defaults written out
    info = json.loads((root / "run.json").read_text())
    assert set(info) >= {
        "run_id",
        "name",
        "contract_sha256",
        "created",
        "planner_version",
        "contract_path",
    }
    state = json.loads((root / "state.json").read_text())
    assert state["state"] == "completed" and state["budget"]["trials_ended"] == 10
    identity = json.loads((root / "identity.json").read_text())
    assert (
        identity["code"]["trainable"] == RUN_CONTRACT["trainable"]
        and identity["code"]["trainable_source_sha256"]
    )
    assert {"python", "packages", "host", "data", "env"} <= set(identity)
    assert yaml.safe_load((root / "configs/treat.yaml").read_text())["recipe"]["level"] == 0.7
    plan = json.loads((root / "plan.json").read_text())
    assert plan["planned_count"] == 10
    trials = records(result)
    assert sorted(r["trial_id"] for r in trials) == sorted(
        f"confirm-{arm}-s{s}" for arm in ("base", "treat") for s in range(5)
    )
    keys = {
        "trial_id",
        "phase",
        "arm",
        "seed",
        "index",
        "params",
        "config",
        "status",
        "exposure",
        "reports",
        "attempts",
        "errors",
        "violations",
        "started",
        "ended",
        "duration_s",
        "host",
        "pid",
        "contract_sha256",
    }
    for r in trials:
        assert keys <= set(r) and r["status"] == "completed" and r["exposure"] == 3
        assert r["contract_sha256"] == info["contract_sha256"]
        assert (root / "trials" / r["trial_id"]).is_dir()
    events = [e["event"] for e in load_run(root).events]
    assert (
        events[0] == "run_started"
        and events[-1] == "run_ended"
        and events.count("trial_ended") == 10
    )
    decisions = json.loads((root / "decisions.json").read_text())
    assert decisions["run_state"] == "completed" and decisions["metric"] == "test_acc"
    assert set(decisions["decisions"][0]) >= {
        "arm",
        "decision",
        "effect",
        "ci_low",
        "ci_high",
        "p_value",
        "alpha_adjusted",
        "n_baseline",
        "n_arm",
        "reason",
    }


def test_a_null_effect_is_not_accepted(ray_local, in_repo, tmp_path):
    result = run(write(tmp_path, arms=level(0.5)), runs_dir=tmp_path / "runs", quiet=True)
    d = decision(result)
    assert result.state == "completed" and d["decision"] != "accept"
    assert d["effect"] == pytest.approx(0.0, abs=1e-9)


def test_a_harmful_effect_is_rejected(ray_local, in_repo, tmp_path):
    result = run(write(tmp_path, arms=level(0.3)), runs_dir=tmp_path / "runs", quiet=True)
    d = decision(result)
    assert d["decision"] == "reject" and d["effect"] < 0 and d["ci_high"] < 0.05


def test_a_crashing_arm_is_incomplete_with_its_traceback_in_the_run_folder(
    ray_local, in_repo, tmp_path
):
    path = write(tmp_path, trainable="tests.trainables.synthetic:crash", failures={"retries": 1})
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    # the run ended (completed), but an arm has no usable confirmation value: exit 4, not 0
    assert result.state == "completed" and result.exit_code == 4
    assert decision(result)["decision"] == "incomplete"
    crashed = [r for r in records(result) if r["arm"] == "treat"]
    assert len(crashed) == 5 and {r["status"] for r in crashed} == {"failed"}
    assert all(r["attempts"] == 2 and len(r["errors"]) == 2 for r in crashed)
    assert "this arm always crashes" in crashed[0]["errors"][-1]["traceback"]
    assert "Traceback" in crashed[0]["errors"][-1]["traceback"]
    assert {r["status"] for r in records(result) if r["arm"] == "base"} == {"completed"}


def test_a_diverging_arm_counts_as_diverged_value(ray_local, in_repo, tmp_path):
    path = write(
        tmp_path, trainable="tests.trainables.synthetic:diverge", failures={"diverged_value": 0.0}
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    diverged = [r for r in records(result) if r["arm"] == "treat"]
    assert {r["status"] for r in diverged} == {"diverged"} and all(
        r["exposure"] == 2 for r in diverged
    )
    d = decision(result)
    assert d["n_arm"] == 5 and d["decision"] == "reject"
    base_mean = (
        sum(r["reports"][-1]["metrics"]["test_acc"] for r in records(result) if r["arm"] == "base")
        / 5
    )
    assert d["effect"] == pytest.approx(0.0 - base_mean)

    without = write(tmp_path, file="c2.yaml", trainable="tests.trainables.synthetic:diverge")
    assert (
        decision(run(without, runs_dir=tmp_path / "runs", quiet=True))["decision"] == "incomplete"
    )


def test_tuning_at_a_matched_budget_finds_each_arms_own_learning_rate(ray_local, in_repo, tmp_path):
    """At the shared default lr (0.1) the treatment looks worse; tuned, it wins."""
    arms = [
        {
            "name": "treat",
            "overrides": ["recipe.name=b", "recipe.level=0.8", "recipe.best_lr=0.001"],
        }
    ]
    common = dict(
        config={
            "values": {
                "recipe": {"name": "a", "level": 0.7, "lr": 0.1, "best_lr": 0.1, "noise": 0.01}
            }
        },
        arms=arms,
        # the synthetic effect is exact: the paired test (the default) decides it by the sign rule,
        # which shows an exact shift from 6 seeds at alpha 0.05
        acceptance={"min_effect": 0.03},
        seeds=[0, 1, 2, 3, 4, 5],
    )
    untuned = run(
        write(tmp_path, file="untuned.yaml", **common), runs_dir=tmp_path / "runs", quiet=True
    )
    assert decision(untuned)["effect"] < 0 and decision(untuned)["decision"] == "reject"

    tuning = {
        "trials_per_arm": 16,
        "seeds": [100],
        "sampler": {"name": "tpe", "seed": 0},
        "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
        "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 3},
    }
    tuned = run(
        write(tmp_path, file="tuned.yaml", tuning=tuning, **common),
        runs_dir=tmp_path / "runs",
        quiet=True,
    )
    assert tuned.state == "completed"
    trials = records(tuned)
    tune_records = [r for r in trials if r["phase"] == "tune"]
    assert (
        sum(r["arm"] == "base" for r in tune_records)
        == sum(r["arm"] == "treat" for r in tune_records)
        == 16
    )
    stopped = [r for r in tune_records if r["status"] == "early_stopped"]
    assert stopped and all(
        r["exposure"] < 3 for r in stopped
    )  # ASHA stopped some, on the reported step
    selection = json.loads((tuned.run_dir / "selection.json").read_text())["arms"]
    # each arm lands near its own optimum (they are 2 decades apart), not at the other arm's
    assert abs(math.log10(selection["base"]["params"]["recipe.lr"]) - math.log10(0.1)) < 0.75
    assert abs(math.log10(selection["treat"]["params"]["recipe.lr"]) - math.log10(0.001)) < 0.75
    for arm, s in selection.items():
        chosen = next(r for r in tune_records if r["trial_id"] == s["trial_id"])
        assert chosen["status"] == "completed" and chosen["exposure"] == 3
        confirm = [r for r in trials if r["phase"] == "confirm" and r["arm"] == arm]
        assert {r["config"]["recipe"]["lr"] for r in confirm} == {s["params"]["recipe.lr"]}
    d = decision(tuned)
    assert d["effect"] > 0.03 and d["decision"] == "accept"


def test_reused_workers_do_not_leak_state_between_trials(ray_local, in_repo, tmp_path):
    """Arms that differ only in a name the trainable ignores must give identical results per
    seed."""
    path = write(
        tmp_path,
        trainable="tests.trainables.protocol:leaky",
        metric={"name": "acc", "mode": "max"},
        arms=[{"name": "treat", "overrides": ["recipe.name=b"]}],
        seeds=[0, 1, 2, 3, 4, 5],
        tuning={
            "trials_per_arm": 4,
            "seeds": [100],
            "sampler": {"name": "random", "seed": 1},
            "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
        },
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    trials = records(result)
    pids = {r["pid"] for r in trials}
    assert len(pids) < len(trials)  # workers were reused
    by_key = {}
    for r in trials:
        by_key.setdefault((r["phase"], r["seed"], r["index"]), {})[r["arm"]] = [
            x["metrics"] for x in r["reports"]
        ]
    assert len(by_key) == 4 + 6
    for key, arms in by_key.items():
        assert arms["base"] == arms["treat"], key
    assert len({json.dumps(v["base"]) for k, v in by_key.items() if k[0] == "confirm"}) == 6


def test_max_wall_time_stops_the_run_cleanly_as_budget_exhausted(ray_local, in_repo, tmp_path):
    path = write(
        tmp_path,
        trainable="tests.trainables.synthetic:slow",
        seeds=[0, 1, 2, 3, 4, 5],
        config={"values": {"recipe": {"name": "a", "level": 0.5, "best_lr": 0.01, "sleep": 0.5}}},
        budget={"exposure": 3, "max_wall_time": "4s"},
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "budget_exhausted" and result.exit_code == 3
    assert json.loads((result.run_dir / "state.json").read_text())["state"] == "budget_exhausted"
    ended = records(result)
    assert 0 < len(ended) < 12 and {r["status"] for r in ended} == {"completed"}
    assert decision(result)["decision"] == "incomplete"
    assert (
        json.loads((result.run_dir / "decisions.json").read_text())["run_state"]
        == "budget_exhausted"
    )


def test_a_resume_of_a_run_whose_wall_time_is_spent_starts_nothing(ray_local, in_repo, tmp_path):
    """It started Ray, announced a tuning pass and selected again, to end budget_exhausted as it
    was."""
    path = write(
        tmp_path,
        trainable="tests.trainables.synthetic:slow",
        seeds=[0, 1, 2, 3, 4, 5],
        config={"values": {"recipe": {"name": "a", "level": 0.5, "best_lr": 0.01, "sleep": 0.5}}},
        budget={"exposure": 3, "max_wall_time": "4s"},
    )
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert first.state == "budget_exhausted"
    before = records(first)
    events = len(load_run(first.run_dir).events)
    shown = io.StringIO()
    again = run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, stream=shown)
    assert again.state == "budget_exhausted" and again.exit_code == 3, shown.getvalue()
    assert (
        "spent budget.max_wall_time (4s" in shown.getvalue()
        and "Ray not started" in shown.getvalue()
    )
    assert "Ray ready" not in shown.getvalue() and "tuning:" not in shown.getvalue()
    # nothing ran: every record is the first run's, one that trial ended as that run stopped
    # included (its kept record, taken in by the resume, on a machine slow enough to stop mid-trial)
    logged = load_run(first.run_dir).events
    started = {e.get("trial_id") for e in logged[:events] if e["event"] == "trial_started"}
    assert all(r in before or r["trial_id"] in started for r in records(again)), records(again)
    new = [e["event"] for e in logged[events:]]
    assert "phase_started" not in new and "trial_started" not in new, new
    assert decision(again)["decision"] == "incomplete"


def test_max_trial_time_stops_and_fails_a_trial_as_timeout(ray_local, in_repo, tmp_path):
    path = write(
        tmp_path,
        trainable="tests.trainables.synthetic:slow",
        seeds=[0, 1],
        config={"values": {"recipe": {"name": "a", "level": 0.5, "best_lr": 0.01, "sleep": 2.0}}},
        budget={"exposure": 5, "max_trial_time": "1.5s"},
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    ended = records(result)
    assert len(ended) == 4 and {r["status"] for r in ended} == {"timeout"}
    # stopped at its time limit, not run to the end: a step takes 2 s, so 1.5 s holds at most one
    assert all(r["exposure"] <= 1 for r in ended), [r["exposure"] for r in ended]
    assert decision(result)["decision"] == "incomplete"


def test_resume_skips_finished_trials_and_refuses_a_changed_contract(ray_local, in_repo, tmp_path):
    path = write(tmp_path)
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    cut_short(first.run_dir, ["confirm-treat-s4", "confirm-base-s0"])
    resumed = run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    assert resumed.state == "completed" and resumed.run_dir == first.run_dir
    ids = [r["trial_id"] for r in records(resumed)]
    assert len(ids) == len(set(ids)) == 10
    assert decision(resumed)["decision"] == "accept"

    from planner import RunError

    changed = write(tmp_path, file="changed.yaml", seeds=[0, 1, 2, 3, 5])
    with pytest.raises(RunError, match="another contract"):
        run(changed, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)


def test_resuming_a_finished_run_decides_again_without_starting_ray(ray_local, in_repo, tmp_path):
    import os
    import subprocess
    import sys

    path = write(tmp_path)
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    before = decision(first)
    out = subprocess.run(
        [sys.executable, "-m", "planner", "run", str(path), "--resume", str(first.run_dir)],
        cwd=in_repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(in_repo), "RAY_ENABLE_AUTO_CONNECT": "0"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        "nothing left to run, Ray not started" in out.stdout
        and "embedded local Ray" not in out.stdout
    ), out.stdout
    again = json.loads((first.run_dir / "decisions.json").read_text())["decisions"]
    assert [(d["arm"], d["decision"], d["effect"]) for d in again] == [
        (before["arm"], before["decision"], before["effect"])
    ]
    assert len(records(first)) == 10  # no trial ran again


def test_cli_exit_codes_and_the_final_lines(ray_local, in_repo, tmp_path, capsys):
    code = main(["run", str(write(tmp_path)), "--runs-dir", str(tmp_path / "runs"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "run state:  completed" in out and "treat: accept" in out
    bad = write(tmp_path, file="bad.yaml", arms=[{"name": "treat", "overrides": ["recipe.nope=1"]}])
    assert main(["run", str(bad), "--runs-dir", str(tmp_path / "runs"), "--quiet"]) == 1
    assert "recipe.nope" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml"), "--quiet"]) == 2


def test_ctrl_c_interrupts_cleanly_through_an_address(ray_local, in_repo, tmp_path):
    """A `plan run` joined to a running Ray by --address, stopped by SIGINT: state interrupted,
    exit 3, what finished kept. The signal comes as a record lands, when the next trial has just
    been submitted: Ray ended a driver that cancelled such a trial at once (exit 1)."""
    address = ray_local.get_runtime_context().gcs_address
    path = write(
        tmp_path,
        trainable="tests.trainables.synthetic:slow",
        seeds=list(range(8)),
        config={"values": {"recipe": {"name": "a", "level": 0.5, "best_lr": 0.01, "sleep": 0.5}}},
        budget={"exposure": 2},
    )
    run_dir, out, _ = interrupt_joined_run(
        path, tmp_path / "runs", address, "e2e/*/trials.jsonl", 2
    )
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "interrupted"
    kept = load_run(run_dir).records
    assert 2 <= len(kept) < 16 and {r["status"] for r in kept} == {"completed"}
    assert not (run_dir / "lock").exists()
    assert json.loads((run_dir / "decisions.json").read_text())["run_state"] == "interrupted"
    assert "run state:  interrupted" in out


def test_grid_sampler_and_median_rule_run_through_tune(ray_local, in_repo, tmp_path):
    tuning = {
        "trials_per_arm": 3,
        "seeds": [100],
        "sampler": {"name": "grid", "seed": 0},
        "space": {"recipe.lr": {"choice": [0.001, 0.01, 0.1]}},
        "early_stop": {"rule": "median", "grace": 1},
    }
    result = run(
        write(tmp_path, tuning=tuning, seeds=[0, 1]), runs_dir=tmp_path / "runs", quiet=True
    )
    assert result.state == "completed"
    tune_records = [r for r in records(result) if r["phase"] == "tune"]
    for arm in ("base", "treat"):
        assert sorted(r["params"]["recipe.lr"] for r in tune_records if r["arm"] == arm) == [
            0.001,
            0.01,
            0.1,
        ]
    selection = json.loads((result.run_dir / "selection.json").read_text())["arms"]
    assert selection["base"]["params"] == {"recipe.lr": 0.01}  # best_lr of the base config
    # how far each arm's tuning explored is said with the decision (decisions.json, plan run's end)
    said = json.loads((result.run_dir / "decisions.json").read_text())["tuning"]
    assert (
        said["summary"]
        == result.tuning
        == "tuned with 3 draws per arm; recipe.lr drew 3 of its 3 choices"
    )
    assert f"tuning:     {result.tuning}" in format_result(result).splitlines()
    assert [(r["arm"], r["draws"], r["keys"][0]["distinct"]) for r in said["arms"]] == [
        ("base", 3, 3),
        ("treat", 3, 3),
    ]


def test_resume_continues_a_partial_tuning_sweep(ray_local, in_repo, tmp_path):
    tuning = {
        "trials_per_arm": 4,
        "seeds": [100],
        "sampler": {"name": "tpe", "seed": 0},
        "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
    }
    path = write(tmp_path, tuning=tuning, seeds=[0, 1])
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    all_records = records(first)
    dropped = {"tune-treat-s100-t001", "tune-treat-s100-t003"}
    kept = [r for r in all_records if r["phase"] == "tune" and r["trial_id"] not in dropped]
    cut_short(first.run_dir, [r["trial_id"] for r in all_records if r not in kept])
    resumed = run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    assert resumed.state == "completed"
    after = records(resumed)
    ids = [r["trial_id"] for r in after]
    assert len(ids) == len(set(ids)) == 8 + 4
    rerun = [r for r in after if r["trial_id"] in dropped]
    assert len(rerun) == 2 and all(r["status"] == "completed" for r in rerun)
    untouched = {r["trial_id"]: r for r in kept}
    assert all(untouched[r["trial_id"]] == r for r in after if r["trial_id"] in untouched)
    events = [e["event"] for e in load_run(first.run_dir).events]
    assert events.count("run_started") == 1 and events.count("run_resumed") == 1


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_a_resumed_sweep_draws_new_params_not_the_finished_ones_again(
    sampler, ray_local, in_repo, tmp_path
):
    """Before: the resumed sweep's sampler started its seeded sequence over, so t001 drew t000's lr
    again."""
    tuning = {
        "trials_per_arm": 4,
        "seeds": [100],
        "sampler": {"name": sampler, "seed": 0},
        "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
    }
    path = write(tmp_path, tuning=tuning, seeds=[0, 1])
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    kept = [
        r for r in records(first) if r["phase"] == "tune" and r["index"] == 0
    ]  # as if stopped after t000
    cut_short(first.run_dir, [r["trial_id"] for r in records(first) if r not in kept])
    resumed = run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    assert resumed.state == "completed"
    tune = [r for r in records(resumed) if r["phase"] == "tune"]
    for arm in ("base", "treat"):
        lrs = [r["params"]["recipe.lr"] for r in tune if r["arm"] == arm]
        assert len(lrs) == 4 and len(set(lrs)) == 4, (arm, lrs)


def test_resume_refuses_a_trainable_whose_source_changed(ray_local, in_repo, tmp_path, capsys):
    """Before: a resume after editing the trainable ran the new code beside the old trials, exit 0,
    and only events.jsonl said `trainable_changed`."""
    import shutil

    from planner import RunError

    shutil.copy(in_repo / "tests" / "trainables" / "synthetic.py", tmp_path / "edited_synthetic.py")
    path = write(tmp_path, trainable="edited_synthetic:train", seeds=[0, 1])
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert first.state == "completed"
    source = tmp_path / "edited_synthetic.py"
    source.write_text(source.read_text().replace("0.2 / step", "0.3 / step"))
    before = (first.run_dir / "events.jsonl").read_bytes()
    with pytest.raises(
        RunError, match=r"edited_synthetic\.py changed since .*changed code is a new run"
    ):
        run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    assert (
        main(
            [
                "run",
                str(path),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--resume",
                str(first.run_dir),
                "--quiet",
            ]
        )
        == 3
    )
    err = capsys.readouterr().err
    assert "changed code is a new run" in err and "Traceback" not in err
    assert (
        first.run_dir / "events.jsonl"
    ).read_bytes() == before  # refused before the folder is touched


def test_resume_refuses_a_local_module_the_trainable_imports_that_changed(
    ray_local, in_repo, tmp_path, capsys
):
    """A new user's resume after editing `helper.py` (imported by the trainable, itself unchanged)
    ran the new code beside the old trials and decided on the mixture; reeval said the code matched
    the log."""
    from planner import RunError

    (tmp_path / "local_gain.py").write_text("GAIN = 0.05\n")
    (tmp_path / "uses_helper.py").write_text(
        "from local_gain import GAIN\n\n\ndef train(config, trial):\n"
        "    for step in range(1, trial.budget + 1):\n"
        "        trial.report(step, val_acc=GAIN * step + 0.001 * trial.seed, test_acc=GAIN * "
        "step)\n"
    )
    path = write(tmp_path, trainable="uses_helper:train", seeds=[0, 1])
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert first.state == "completed"
    logged = json.loads((first.run_dir / "identity.json").read_text())["code"]["local_sources"]
    assert list(logged) == ["local_gain.py"]
    (tmp_path / "local_gain.py").write_text("GAIN = 0.5\n")
    with pytest.raises(
        RunError, match=r"a local module the trainable imports changed since .*\(local_gain\.py\)"
    ):
        run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    assert (
        main(
            [
                "run",
                str(path),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--resume",
                str(first.run_dir),
                "--quiet",
            ]
        )
        == 3
    )
    assert "Traceback" not in capsys.readouterr().err


def test_resume_refuses_config_files_that_compose_differently(ray_local, in_repo, tmp_path):
    from planner import RunError

    path = write(tmp_path, seeds=[0, 1])
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    logged = first.run_dir / "configs" / "treat.yaml"
    config = yaml.safe_load(logged.read_text())
    config["recipe"]["noise"] = 0.5  # as if the config tree had changed since
    logged.write_text(yaml.safe_dump(config))
    with pytest.raises(RunError, match="recipe.noise"):
        run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)


def test_the_driver_keeps_a_tuning_trials_last_reports_and_selects_as_the_whole_records_on_disk_do(
    ray_local, in_repo, tmp_path, monkeypatch
):
    """Issue 23: once a tuning trial's whole record is in trials.jsonl, the driver keeps of it the
    selection metric's last k reports and the summary the facts read, not all its reports (a large
    sweep of long trials would hold every report otherwise). Selected by the mean of the last 3 of
    12 reports, each arm's choice and score are those that the whole records on disk give; the
    confirmation's records stay whole."""
    import planner._dispatch.runner as runner
    from planner._contract.validate import load_contract
    from planner._stats.select import select

    seen: list[list[dict]] = []

    def selecting(contract, tune_records):
        seen.append([dict(r) for r in tune_records])
        return select(contract, tune_records)

    monkeypatch.setattr(runner, "select", selecting)
    tuning = {
        "trials_per_arm": 4,
        "seeds": [100],
        "sampler": {"name": "random", "seed": 0},
        "space": {"recipe.lr": {"log_uniform": [1.0e-3, 1.0e-1]}},
        "selection": {"rule": "mean_last_k", "k": 3},
    }
    path = write(tmp_path, tuning=tuning, budget={"exposure": 12}, seeds=[0, 1])
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed"
    on_disk = records(result)
    whole = [r for r in on_disk if r["phase"] == "tune"]
    assert len(whole) == 8 and all(len(r["reports"]) == 12 for r in whole)
    assert len(seen) == 1 and len(seen[0]) == 8
    assert all(
        len(r["reports"]) == 3
        and r["reports"] == next(w for w in whole if w["trial_id"] == r["trial_id"])["reports"][-3:]
        for r in seen[0]
    ), [len(r["reports"]) for r in seen[0]]
    expected = select(load_contract(path).contract, whole)
    chosen = json.loads((result.run_dir / "selection.json").read_text())["arms"]
    assert {arm: (s["trial_id"], s["score"]) for arm, s in chosen.items()} == {
        arm: (s.trial_id, s.score) for arm, s in expected.items()
    }
    assert all(len(r["reports"]) == 12 for r in on_disk if r["phase"] == "confirm")


TUNED_LR = {
    "trials_per_arm": 4,
    "seeds": [100],
    "sampler": {"name": "random", "seed": 0},
    "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
}


def test_tuned_values_that_never_reach_the_run_make_the_decision_invalid(
    ray_local, in_repo, tmp_path, capsys
):
    """Before: a trainable that ignores its tuned lr got a 'best' lr selected and a confident
    accept."""
    path = write(
        tmp_path,
        trainable="tests.trainables.synthetic:ignores_lr",
        tuning=TUNED_LR,
        seeds=[0, 1, 2],
    )
    assert main(["run", str(path), "--runs-dir", str(tmp_path / "runs")]) == 4
    out = capsys.readouterr().out
    run_dir = next((tmp_path / "runs" / "e2e").glob("*/"))
    doc = json.loads((run_dir / "decisions.json").read_text())
    row = next(d for d in doc["decisions"] if d["arm"] == "treat")
    assert row["decision"] == "invalid"
    assert row["invalid_reason"].startswith(
        "Invalid: the tuned values did not vary the run: 4 tuning trials of the "
        "baseline base with different params reported the same curves and 4 "
        "tuning trials of arm treat"
    )
    kinds = {(f["kind"], f["arm"]) for f in doc["findings"]}
    assert kinds == {("tuned_values_identical", "base"), ("tuned_values_identical", "treat")}
    assert "warning:    the tuned values did not vary the run: 4 tuning trials of arm treat" in out
    assert main(["audit", str(run_dir), "--json"]) == 0
    audit = capsys.readouterr().out
    codes = {(f["code"], f["arm"]) for f in json.loads(audit[: audit.rindex("}") + 1])["findings"]}
    assert ("tuned_values_identical", "treat") in codes
    assert not any(code == "selection_optimism" for code, _ in codes)


def test_tuning_trials_that_tie_on_the_final_value_only_are_not_flagged(
    ray_local, in_repo, tmp_path
):
    path = write(
        tmp_path,
        trainable="tests.trainables.synthetic:ties_at_the_end",
        tuning=TUNED_LR,
        seeds=[0, 1, 2],
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    tune = [r for r in records(result) if r["phase"] == "tune"]
    assert len({r["reports"][-1]["metrics"]["val_acc"] for r in tune if r["arm"] == "treat"}) == 1
    doc = json.loads((result.run_dir / "decisions.json").read_text())
    assert not any(f["kind"] == "tuned_values_identical" for f in doc.get("findings") or [])
    assert all("tuned values" not in d["reason"] for d in doc["decisions"])
