"""Issue 20/21/24, the integrity parts of _core, _data, _audit, _contract and _store: each test
fails on the code before it and passes after."""

from pathlib import Path

from planner._core.records import error_groups, error_key
from planner._trial.protocol import run_trial
from planner._trial.spec import TrialSpec

REPO = str(Path(__file__).resolve().parents[2])


# ---------------------------------------------------------------- errors named once, with a count


def test_five_failures_that_differ_only_by_a_path_are_one_group_with_a_count(tmp_path):
    records = []
    for i in range(5):
        tid = f"tune-b-s100-t{i:03d}"
        spec = TrialSpec(
            trial_id=tid,
            phase="tune",
            arm="b",
            seed=100,
            index=i,
            params={},
            config={},
            budget=2,
            dir=str(tmp_path / "trials" / tid),
            trainable="tests.trainables.integrity:opens_a_missing_file",
            metric="acc",
            path=(REPO,),
        )
        records.append(run_trial(spec))
    assert all(r["status"] == "failed" for r in records)
    messages = {r["errors"][-1]["message"] for r in records}
    assert len(messages) == 5  # each names its own trial's folder
    groups = error_groups(records)
    assert len(groups) == 1, groups
    assert groups[0]["count"] == 5 and groups[0]["first"] == "tune-b-s100-t000"
    assert (
        groups[0]["error"].startswith("FileNotFoundError: ")
        and "tune-b-s100-t000" in groups[0]["error"]
    )


def test_error_key_normalizes_trial_ids_paths_hex_ids_and_numbers_and_nothing_else():
    assert error_key("KeyError: 'lr'") == "KeyError: 'lr'"
    assert error_key("RuntimeError: tune-b-s100-t004 diverged at step 12 (lr=1.5e-3)") == error_key(
        "RuntimeError: tune-b-s100-t007 diverged at step 3 (lr=0.02)"
    )
    assert error_key("OSError: object at 0x7f3a2b1c, run 3f2a9c1d4e5b6a7f") == error_key(
        "OSError: object at 0x55aa, run 0a1b2c3d4e5f6789"
    )
    assert error_key("confirm-treat-arm-s3 lost") == error_key("confirm-treat-arm-s11 lost")
    assert error_key("python: can't open file '/work/a/train.py'") == error_key(
        "python: can't open file 'b/x.py'"
    )
    # what names the failure stays: the key, the metric, a layer name with a digit
    assert error_key("KeyError: 'lr'") != error_key("KeyError: 'wd'")
    assert error_key("metric val_acc2 never reported") != error_key(
        "metric val_acc3 never reported"
    )
    assert error_key("conv1 failed") != error_key("conv2 failed")


def test_grouped_errors_keep_their_type_apart_and_their_order_of_first_occurrence():
    def failed(tid, kind, message):
        return {"trial_id": tid, "status": "failed", "errors": [{"type": kind, "message": message}]}

    groups = error_groups(
        [
            failed("t0", "ValueError", "bad 1"),
            failed("t1", "KeyError", "bad 2"),
            failed("t2", "ValueError", "bad 3"),
            {"trial_id": "t3", "status": "completed"},
        ]
    )
    assert groups == [
        {"error": "ValueError: bad 1", "count": 2, "first": "t0"},
        {"error": "KeyError: bad 2", "count": 1, "first": "t1"},
    ]


# -------------------------------------------------------------- data checks compare like with like


def _split_record(trial_id, arm, seed, splits, phase="confirm"):
    from planner._data.splits import SplitLog

    log = SplitLog()
    return {
        "trial_id": trial_id,
        "arm": arm,
        "seed": seed,
        "phase": phase,
        "violations": [],
        "splits": {name: log.add(name, *args) for name, args in splits.items()},
    }


DATA = {
    "unit": "row",
    "independent": {"pairs": [["train", "test"]], "by": ["unit", "patient"]},
    "matched": True,
    "fixed": ["test"],
}


def _arm_splits(kind: str, seed: int) -> dict:
    """clean: patients 0-7 train, 8-9 test; leaky: patient 7's rows in both; shifted: another train
    set."""
    patient = lambda rows: [f"p{r // 2}" for r in rows]  # noqa: E731 (two rows a patient)
    train, test = list(range(16)), [16, 17, 18, 19]
    if kind == "leaky":
        train, test = list(range(15)), [15, 16, 17, 18, 19]
    if kind == "shifted":
        train = [r + 20 * (seed + 1) for r in train]
    return {
        "train": (train, {"patient": patient(train)}),
        "test": (test, {"patient": patient(test)}),
    }


def test_each_arm_is_matched_against_the_baseline_never_another_arm_whatever_order_trials_end():
    from planner._data.checks import cross_trial_violations, invalid_reasons

    arms = ["leaky", "shifted", "same"]
    for order in (["clean", *arms], [*arms, "clean"], ["leaky", "clean", "same", "shifted"]):
        ended, records = [], []
        for seed in (0, 1):
            for arm in order:
                record = _split_record(f"confirm-{arm}-s{seed}", arm, seed, _arm_splits(arm, seed))
                from planner._data.checks import overlap_violations

                record["violations"] = overlap_violations(record["splits"], DATA)[0]
                record["violations"] += cross_trial_violations(
                    record, ended, DATA, baseline="clean"
                )
                ended.append(record)
                records.append(record)
        unmatched = [v for r in records for v in r["violations"] if v["kind"] == "unmatched_data"]
        assert unmatched and all("clean" in v["arms"] for v in unmatched), order
        assert {a for v in unmatched for a in v["arms"]} == {"clean", "leaky", "shifted"}
        reasons = invalid_reasons(records, "clean", arms)
        assert set(reasons) == {"leaky", "shifted"}, (order, reasons)
        assert "split_overlap" in reasons["leaky"] or "unmatched_data" in reasons["leaky"]
        assert "unmatched_data" in reasons["shifted"] and "clean" in reasons["shifted"]


def test_a_treatment_arm_against_another_treatment_arm_in_an_older_run_folder_invalidates_neither():
    from planner._data.checks import invalid_reasons

    between = {
        "kind": "unmatched_data",
        "arms": ["leaky", "same"],
        "message": "split test differs between arms leaky and same at seed 0",
    }
    assert (
        invalid_reasons(
            [{"trial_id": "confirm-same-s0", "arm": "same", "violations": [between]}],
            "clean",
            ["leaky", "same"],
        )
        == {}
    )


def test_a_fixed_split_varies_within_an_arm_not_against_another_arm():
    from planner._data.checks import cross_trial_violations

    shifted = _split_record("confirm-shifted-s0", "shifted", 0, {"test": ([30, 31], None)})
    base1 = _split_record("confirm-clean-s1", "clean", 1, {"test": ([1, 2], None)})
    # the baseline's fixed test split is not "varying" because another arm logged another one at
    # seed 0
    assert [
        v["kind"] for v in cross_trial_violations(base1, [shifted], DATA, baseline="clean")
    ] == []
    base0 = _split_record("confirm-clean-s0", "clean", 0, {"test": ([1, 3], None)})
    [v] = cross_trial_violations(base1, [shifted, base0], DATA, baseline="clean")
    assert (
        v["kind"] == "split_varies"
        and v["seeds"] == [0, 1]
        and v["trial_ids"][0] == "confirm-clean-s0"
    )


# ------------------------------------- P934 counts only completed tests of the trainable


def test_a_repeated_test_counts_only_completed_decided_runs_of_the_same_trainable(tmp_path):
    import json

    from planner._lineage import history
    from planner._lineage.ledger import append, read

    runs = tmp_path / "runs"
    key = ("sha-of-the-baseline", ("width",))

    def one(name, state, decision, trainable=None, identity=None):
        started = {
            "run": f"{name}/r",
            "name": name,
            "baseline": {"config_sha256": key[0]},
            "factor": {"name": "width", "keys": ["width"]},
            "alpha": 0.05,
        }
        if trainable:
            started["trainable"] = trainable
        append(runs, "run_started", **started)
        append(
            runs,
            "run_ended",
            run=f"{name}/r",
            state=state,
            alpha=0.05,
            decisions=[{"arm": "wide", "decision": decision}],
        )
        if identity:  # an older ledger: the trainable only in the run folder's identity.json
            folder = runs / name / "r"
            folder.mkdir(parents=True)
            (folder / "run.json").write_text(json.dumps({"run_id": "r", "name": name}))
            (folder / "identity.json").write_text(json.dumps({"code": {"trainable": identity}}))

    one("done", "completed", "inconclusive", trainable="m:train")
    one("accepted", "completed", "accept", identity="m:train")
    one("cut-short", "interrupted", "incomplete", trainable="m:train")
    one("no-value", "completed", "incomplete", trainable="m:train")
    one("broken-data", "completed", "invalid", trainable="m:train")
    one("another-trainable", "completed", "reject", trainable="other:train")
    one("a-command", "completed", "reject", identity="command: python train.py")
    ledger = read(runs)
    counted = [e.started["name"] for e in history.earlier_tests(ledger, key, trainable="m:train")]
    assert counted == ["done", "accepted"]
    rep = history.repetition(history.earlier_tests(ledger, key, trainable="m:train"), 0.05, "width")
    assert rep["count"] == 3 and "tested 3 times" in rep["sentence"]
    assert [
        e.started["name"]
        for e in history.earlier_tests(ledger, key, trainable="command: python train.py")
    ] == ["a-command"]


# ---------------------------------------------------------------- the folder a command runs in


def test_command_cwd_is_resolved_from_the_contract_folder_and_absent_from_the_frozen_copy_when_unset(  # noqa: E501
    tmp_path,
):
    from planner._contract.model import Contract

    base = {
        "version": 1,
        "name": "c",
        "hypothesis": "h",
        "config": {"values": {"x": 1}},
        "factor": {"name": "x", "keys": ["x"]},
        "baseline": {"name": "a", "overrides": ["x=1"]},
        "arms": [{"name": "b", "overrides": ["x=2"]}],
        "metric": {"name": "acc", "mode": "max"},
        "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1],
        "budget": {"exposure": 2},
    }
    plain = Contract.model_validate({**base, "command": {"run": "python train.py"}})
    assert "cwd" not in plain.frozen()["command"]  # a contract without it keeps its hash
    assert plain.command_dir(tmp_path) == tmp_path.resolve()
    moved = Contract.model_validate(
        {**base, "command": {"run": "python train.py", "cwd": "../project"}}
    )
    assert moved.command_dir(tmp_path / "controls") == (tmp_path / "project").resolve()
    assert moved.frozen()["command"]["cwd"] == "../project" and moved.sha256() != plain.sha256()
    assert (
        Contract.model_validate({**base, "command": "python train.py"}).command_dir(tmp_path)
        == tmp_path.resolve()
    )


# ---------------------------------------------------------------- tuning that says when it is weak


def _tuned(
    tmp_path, *, sampler=None, trials=6, grace=1, warmup="sched.warmup_epochs=3", rule="asha"
):
    import yaml

    from planner._contract.validate import validate

    tuning = {
        "trials_per_arm": trials,
        "seeds": [1000],
        "space": {"optim.lr": {"log_uniform": [1e-4, 1e-1]}},
        "early_stop": {"rule": rule, **({"grace": grace} if rule != "none" else {})},
    }
    if sampler:
        tuning["sampler"] = {"name": sampler}
    data = {
        "version": 1,
        "name": "warm",
        "hypothesis": "A warmup helps.",
        "command": "python train.py",
        "config": {
            "values": {"optim": {"lr": 0.01}, "sched": {"warmup_epochs": 0, "warmup_ratio": 0.0}}
        },
        "factor": {"name": "warmup", "keys": ["sched"]},
        "baseline": {"name": "constant", "overrides": []},
        "arms": [{"name": "warm", "overrides": [warmup]}],
        "metric": {"name": "val_acc", "mode": "max"},
        "acceptance": {"min_effect": 0.01},
        "seeds": [0, 1, 2, 3, 4],
        "budget": {"exposure": 6},
        "tuning": tuning,
    }
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "train.py").write_text(
        ""
    )  # the script the command runs (P532 refuses a missing one)
    result = validate(path)
    assert result.valid, [d.format() for d in result.diagnostics]
    return {d.code: d for d in result.diagnostics if d.severity == "warning"}


def test_tpe_with_fewer_trials_than_its_start_up_is_named_random_search(tmp_path):
    warned = _tuned(tmp_path, grace=3)
    assert (
        "P905" in warned
        and "sampler tpe (the default) gets 6 trials per sweep" in warned["P905"].message
    )
    assert "random search" in warned["P905"].message
    assert "P905" not in _tuned(tmp_path, sampler="random", grace=3)
    assert "P905" not in _tuned(tmp_path, trials=10, grace=3)


def test_a_grace_below_the_warmup_the_factor_changes_is_warned(tmp_path):
    warned = _tuned(tmp_path, sampler="random", grace=1)
    assert (
        "P906" in warned
        and "arm 'warm' warms up for 3 of 6 (its sched.warmup_epochs)" in warned["P906"].message
    )
    assert "a grace of at least 3" in warned["P906"].hint
    assert "P906" not in _tuned(tmp_path, sampler="random", grace=3)
    assert "P906" not in _tuned(tmp_path, sampler="random", rule="none")
    ratio = _tuned(tmp_path, sampler="random", grace=2, warmup="sched.warmup_ratio=0.5")
    assert "warms up for 3 of 6 (its sched.warmup_ratio)" in ratio["P906"].message
    # 500 optimizer steps cannot be placed on a 6-epoch exposure: no guess
    assert "P906" not in _tuned(
        tmp_path, sampler="random", grace=1, warmup="sched.warmup_epochs=500"
    )


# ---------------------------------------------------------------- the packages the trainable used


def _identity_contract(**how):
    from planner._contract.model import Contract

    return Contract.model_validate(
        {
            "version": 1,
            "name": "lit",
            "hypothesis": "h",
            "config": {"values": {"x": 1}},
            **how,
            "factor": {"name": "x", "keys": ["x"]},
            "baseline": {"name": "a", "overrides": ["x=1"]},
            "arms": [{"name": "b", "overrides": ["x=2"]}],
            "metric": {"name": "acc", "mode": "max"},
            "acceptance": {"min_effect": 0.01},
            "seeds": [0, 1],
            "budget": {"exposure": 2},
        }
    )


def test_identity_records_the_packages_a_command_script_and_its_local_modules_import(tmp_path):
    import importlib.metadata

    from planner._store.identity import packages, trainable_imports

    (tmp_path / "train.py").write_text(
        "import os\nimport lightning as L\nfrom models.net import Net\n"
    )
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "net.py").write_text("from . import parts\n")
    (tmp_path / "models" / "parts.py").write_text(
        "import torchmetrics\nfrom sklearn import datasets\n"
    )
    contract = _identity_contract(command="python train.py --fast")
    used = trainable_imports(contract, tmp_path, [])[0]
    assert {"lightning", "torchmetrics", "torch", "scikit-learn"} <= set(
        used
    )  # torch: what lightning requires
    assert "models" not in used and "os" not in used
    recorded = packages(used)
    assert recorded["lightning"] == importlib.metadata.version("lightning")
    assert recorded["torchmetrics"] == importlib.metadata.version("torchmetrics")
    assert recorded["torch"] == importlib.metadata.version("torch")


def test_identity_records_the_packages_a_function_trainables_module_imports(tmp_path):
    from planner._store.identity import trainable_imports

    (tmp_path / "lit_train.py").write_text("def train(config, trial):\n    import torchmetrics\n")
    used = trainable_imports(
        _identity_contract(trainable="lit_train:train"), tmp_path, [str(tmp_path)]
    )[0]
    assert {"torchmetrics", "torch"} <= set(used) and "lightning" not in used


def test_reeval_names_a_changed_or_removed_package_the_run_used():
    from planner._reeval.differences import compare_identity, current_identity

    today = current_identity(
        "command: python -c pass",
        [],
        [],
        __import__("pathlib").Path("."),
        module=False,
        package_names=["lightning", "no-such-distribution-here"],
    )
    import importlib.metadata

    assert today["packages"]["lightning"] == importlib.metadata.version("lightning")
    logged = {
        "code": today["code"],
        "python": today["python"],
        "data": {},
        "packages": {**today["packages"], "lightning": "1.0.0", "no-such-distribution-here": "2.0"},
    }
    found = {d.what: (d.logged, d.current) for d in compare_identity(logged, today)}
    assert found == {
        "packages.lightning": ("1.0.0", importlib.metadata.version("lightning")),
        "packages.no-such-distribution-here": ("2.0", None),
    }


def test_a_submodule_imported_by_name_from_a_local_package_is_followed(tmp_path):
    from planner._store.identity import trainable_imports

    (tmp_path / "train.py").write_text("from models import net\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "net.py").write_text("import torchmetrics\n")
    used, _, files = trainable_imports(_identity_contract(command="python train.py"), tmp_path, [])
    assert "torchmetrics" in used and "models" not in used
    assert (tmp_path / "models" / "net.py").resolve() in {f.resolve() for f in files}
