"""MLflow tracking against real local stores, from a run folder written by hand to
docs/run-folder.md."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import yaml

mlflow = pytest.importorskip("mlflow")

from planner._core.errors import MlflowTrackingError  # noqa: E402
from planner._results.mlflow import log_run_to_mlflow  # noqa: E402

RUN_ID = "20261129-181700-a3f2"
SHA = "ab" * 32
CONFIGS = {
    "sgd": {
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.0},
        "epochs": 3,
        "data": {"seed": 1234},
    },
    "momentum": {
        "optimizer": {"name": "momentum", "lr": 0.05, "momentum": 0.9},
        "epochs": 3,
        "data": {"seed": 1234},
    },
}


def _trial(trial_id, phase, arm, seed, accs, status="completed", params=None, index=0):
    config = json.loads(json.dumps(CONFIGS[arm]))
    for key, value in (params or {}).items():
        config["optimizer"][key.split(".")[-1]] = value
    return {
        "trial_id": trial_id,
        "phase": phase,
        "arm": arm,
        "seed": seed,
        "index": index,
        "params": params or {},
        "config": config,
        "status": status,
        "exposure": len(accs),
        "reports": [
            {
                "step": i + 1,
                "metrics": {"val_acc": acc, "val_loss": 1 - acc},
                "time_s": 0.5 * (i + 1),
            }
            for i, acc in enumerate(accs)
        ],
        "attempts": 1,
        "errors": [],
        "violations": [],
        "started": "2026-11-29T18:17:05+00:00",
        "ended": "2026-11-29T18:17:07+00:00",
        "duration_s": 2.0,
        "host": "node-1",
        "pid": 4242,
        "contract_sha256": SHA,
    }


TRIALS = [
    _trial(
        "tune-sgd-s100-t000", "tune", "sgd", 100, [0.6, 0.7, 0.72], params={"optimizer.lr": 0.1}
    ),
    _trial(
        "tune-momentum-s100-t000",
        "tune",
        "momentum",
        100,
        [0.5],
        status="early_stopped",
        params={"optimizer.lr": 0.01},
    ),
    _trial("confirm-sgd-s0", "confirm", "sgd", 0, [0.61, 0.69, 0.7]),
    _trial("confirm-sgd-s1", "confirm", "sgd", 1, [0.6, 0.68, 0.71]),
    _trial("confirm-momentum-s0", "confirm", "momentum", 0, [0.7, 0.78, 0.8]),
    _trial(
        "confirm-momentum-s1",
        "confirm",
        "momentum",
        1,
        [0.71, 0.77, float("nan")],
        status="diverged",
    ),
]


def _write_run_folder(root: Path, trials=TRIALS, decision="accept") -> Path:
    run_dir = root / "runs" / "demo" / RUN_ID
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "run_id": RUN_ID,
                "name": "demo",
                "contract_sha256": SHA,
                "created": "2026-11-29T18:17:00+00:00",
                "planner_version": "0.1.0",
                "contract_path": "/somewhere/contract.yaml",
            }
        )
    )
    (run_dir / "state.json").write_text(
        json.dumps(
            {
                "state": "completed",
                "updated": "2026-11-29T18:20:00+00:00",
                "reason": None,
                "budget": {"wall_time_s": 180.0, "trials_ended": len(trials)},
            }
        )
    )
    (run_dir / "identity.json").write_text(
        json.dumps(
            {
                "contract_sha256": SHA,
                "code": {"repo": "/src", "commit": "c0ffee1", "dirty": True},
                "python": "3.11.7",
                "packages": {},
                "host": {"hostname": "driver-host"},
                "data": {},
                "env": {},
            }
        )
    )
    (run_dir / "contract.yaml").write_text(
        yaml.safe_dump(
            {"name": "demo", "baseline": {"name": "sgd"}, "arms": [{"name": "momentum"}]}
        )
    )
    for arm, config in CONFIGS.items():
        (run_dir / "configs" / f"{arm}.yaml").write_text(yaml.safe_dump(config))
    _write_decision(run_dir, decision)
    lines = [json.dumps(t) for t in trials]
    (run_dir / "trials.jsonl").write_text(
        "\n".join(lines) + '\n{"trial_id": "confirm-sgd-s2", "pha'
    )  # torn
    return run_dir


def _write_decision(run_dir: Path, decision: str) -> None:
    (run_dir / "decisions.json").write_text(
        json.dumps(
            {
                "run_state": "completed",
                "metric": "val_acc",
                "test": "welch",
                "alpha": 0.05,
                "correction": "holm",
                "min_effect": 0.01,
                "decisions": [
                    {
                        "arm": "momentum",
                        "decision": decision,
                        "effect": 0.08,
                        "ci_low": 0.03,
                        "ci_high": 0.13,
                        "p_value": 0.01,
                        "alpha_adjusted": 0.05,
                        "n_baseline": 2,
                        "n_arm": 2,
                        "reason": "",
                    }
                ],
            }
        )
    )


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory):
    """One sqlite store for the module: creating its tables is MLflow's slow part."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def _runs(uri, experiment):
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return client, client.search_runs([exp.experiment_id], max_results=1000)


def _check_logged(uri, experiment, summary):
    client, runs = _runs(uri, experiment)
    assert len(runs) == 1 + len(TRIALS)
    by_name = {r.info.run_name: r for r in runs}
    parent = by_name[RUN_ID]
    assert parent.info.run_id == summary.parent_run_id
    assert parent.data.tags["planner.kind"] == "run"
    assert parent.data.tags["planner.decision.momentum"] == "accept"
    assert parent.data.tags["planner.run_state"] == "completed"
    assert parent.data.metrics["effect.momentum"] == pytest.approx(0.08)

    tuned = by_name["tune-sgd-s100-t000"]
    tags = tuned.data.tags
    assert tags["mlflow.parentRunId"] == parent.info.run_id
    assert {
        k: tags[f"planner.{k}"]
        for k in (
            "run_id",
            "contract_sha256",
            "commit",
            "dirty",
            "host",
            "seed",
            "arm",
            "phase",
            "status",
            "decision",
            "sampled",
        )
    } == {
        "run_id": RUN_ID,
        "contract_sha256": SHA,
        "commit": "c0ffee1",
        "dirty": "true",
        "host": "node-1",
        "seed": "100",
        "arm": "sgd",
        "phase": "tune",
        "status": "completed",
        "decision": "baseline",
        "sampled": "optimizer.lr",
    }
    assert tuned.data.params == {
        "optimizer.name": "sgd",
        "optimizer.lr": "0.1",
        "optimizer.momentum": "0.0",
        "epochs": "3",
        "data.seed": "1234",
    }
    history = client.get_metric_history(tuned.info.run_id, "val_acc")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
        (1, 0.6),
        (2, 0.7),
        (3, 0.72),
    ]
    assert tuned.info.status == "FINISHED"

    assert by_name["confirm-momentum-s0"].data.tags["planner.decision"] == "accept"
    assert by_name["tune-momentum-s100-t000"].info.status == "KILLED"  # early-stopped
    diverged = client.get_metric_history(by_name["confirm-momentum-s1"].info.run_id, "val_acc")
    assert math.isnan(max(diverged, key=lambda m: m.step).value)


def test_each_trial_becomes_a_child_run_with_identity_metrics_and_decision(tmp_path, sqlite_uri):
    run_dir = _write_run_folder(tmp_path)
    summary = log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="first")
    assert (summary.trials_logged, summary.trials_already_logged, summary.lines_skipped) == (
        len(TRIALS),
        0,
        1,
    )
    _check_logged(sqlite_uri, "first", summary)


def test_logging_again_duplicates_nothing_and_adds_what_is_new(tmp_path, sqlite_uri):
    run_dir = _write_run_folder(tmp_path, trials=TRIALS[:-1], decision="inconclusive")
    log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="again")
    again = log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="again")
    assert (again.trials_logged, again.trials_already_logged, again.trials_updated) == (
        0,
        len(TRIALS) - 1,
        0,
    )

    # the run resumed: one more trial ended and the decision changed
    with open(run_dir / "trials.jsonl", "w") as stream:
        stream.write("\n".join(json.dumps(t) for t in TRIALS) + "\n")
    _write_decision(run_dir, "accept")
    resumed = log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="again")
    assert (resumed.trials_logged, resumed.trials_updated) == (
        1,
        2,
    )  # the new trial; the momentum trials' tags
    assert resumed.parent_run_id == again.parent_run_id
    _check_logged(sqlite_uri, "again", resumed)


def test_a_trial_whose_logging_was_cut_short_is_logged_again(tmp_path, sqlite_uri):
    run_dir = _write_run_folder(tmp_path)
    log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="cut")
    client, runs = _runs(sqlite_uri, "cut")
    cut = next(r for r in runs if r.info.run_name == "confirm-sgd-s0")
    client.delete_tag(cut.info.run_id, "planner.logged")  # as if the process died mid-trial
    summary = log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="cut")
    assert (summary.trials_logged, summary.trials_already_logged) == (1, len(TRIALS) - 1)
    _check_logged(sqlite_uri, "cut", summary)


def test_the_file_store_works_when_mlflow_is_told_to_allow_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    summary = log_run_to_mlflow(_write_run_folder(tmp_path), tracking_uri=uri)
    _check_logged(uri, "demo", summary)  # the experiment defaults to the contract's name


def test_a_store_mlflow_refuses_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(MlflowTrackingError, match="refused: .*sqlite"):
        log_run_to_mlflow(_write_run_folder(tmp_path), tracking_uri=(tmp_path / "mlruns").as_uri())


def test_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(MlflowTrackingError, match="not a planner run folder: it has no run.json"):
        log_run_to_mlflow(tmp_path, tracking_uri="sqlite:///unused.db")


def test_without_mlflow_installed_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    run_dir = _write_run_folder(tmp_path)
    monkeypatch.setitem(
        sys.modules, "mlflow", None
    )  # what an environment without the extra looks like
    with pytest.raises(MlflowTrackingError, match=r"pip install 'planner\[mlflow\]'"):
        log_run_to_mlflow(run_dir, tracking_uri="sqlite:///unused.db")


def test_the_store_is_checked_before_a_run_starts(tmp_path, sqlite_uri, monkeypatch):
    from planner._results.mlflow import check_mlflow_tracking

    experiment_id = check_mlflow_tracking(sqlite_uri, "checked")
    assert (
        mlflow.MlflowClient(tracking_uri=sqlite_uri).get_experiment_by_name("checked").experiment_id
        == experiment_id
    )
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(MlflowTrackingError, match="refused"):
        check_mlflow_tracking((tmp_path / "mlruns").as_uri(), "checked")


def test_the_parent_run_holds_the_contracts_params_the_decision_and_the_report(
    tmp_path, sqlite_uri
):
    run_dir = _write_run_folder(tmp_path)
    summary = log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="parent")
    client, runs = _runs(sqlite_uri, "parent")
    parent = next(r for r in runs if r.info.run_id == summary.parent_run_id)
    assert parent.data.params == {
        "name": "demo",
        "baseline.name": "sgd",
        "arms": json.dumps([{"name": "momentum"}]),
    }
    assert summary.artifacts == ("decisions.json", "report.html")
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == set(summary.artifacts)
    folder = client.download_artifacts(parent.info.run_id, "", str(tmp_path / "got"))
    decisions = json.loads(Path(folder, "decisions.json").read_text())
    assert decisions == json.loads((run_dir / "decisions.json").read_text())
    page = Path(folder, "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "momentum" in page
    # beside the sqlite file, not in the folder the process runs in
    assert not Path("mlruns").exists()


def test_the_experiment_opens_in_mlflows_classic_view(tmp_path, sqlite_uri):
    from planner._results.mlflow import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG

    client = mlflow.MlflowClient(tracking_uri=sqlite_uri)
    made_before = client.create_experiment(  # by someone else, unmarked
        "made-before", artifact_location=(tmp_path / "artifacts").as_uri()
    )
    log_run_to_mlflow(_write_run_folder(tmp_path), tracking_uri=sqlite_uri, experiment="kind")
    log_run_to_mlflow(
        _write_run_folder(tmp_path / "b"), tracking_uri=sqlite_uri, experiment="made-before"
    )
    for experiment in (client.get_experiment_by_name("kind"), client.get_experiment(made_before)):
        assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"


def test_trials_logged_as_they_ended_are_not_logged_again_at_the_end(tmp_path, sqlite_uri):
    from planner._results.mlflow import LiveMlflow

    run_dir = _write_run_folder(tmp_path)
    live = LiveMlflow(run_dir, sqlite_uri, "live")
    for trial in TRIALS[:3]:
        live.trial_ended(trial)
    client, runs = _runs(sqlite_uri, "live")
    assert len(runs) == 1 + 3  # the parent, and each trial as it ended
    summary = log_run_to_mlflow(run_dir, tracking_uri=sqlite_uri, experiment="live")
    assert (summary.trials_logged, summary.trials_already_logged) == (len(TRIALS) - 3, 3)
    assert summary.parent_run_id == live.parent_id
    _check_logged(sqlite_uri, "live", summary)


def test_plan_export_mlflow_logs_a_finished_run(tmp_path, sqlite_uri, capsys):
    from planner._cli.main import main

    run_dir = _write_run_folder(tmp_path)
    args = ["export", str(run_dir), "--mlflow", sqlite_uri, "--experiment", "exported", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trials_logged"] == len(TRIALS) and out["artifacts"] == [
        "decisions.json",
        "report.html",
    ]
    _check_logged(sqlite_uri, "exported", log_run_to_mlflow(run_dir, sqlite_uri, "exported"))
    assert main(["export", str(run_dir), "--experiment", "x"]) == 2
    assert "give it with --mlflow" in capsys.readouterr().err
