"""`plan run` with `tracking.mlflow`: every trial of a real run lands in a local MLflow store."""

from __future__ import annotations

import copy

import pytest
import yaml

from planner import load_run, run
from tests._runs import RUN_CONTRACT

pytestmark = pytest.mark.ray
mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")


def test_a_run_with_mlflow_tracking_logs_every_trial_with_its_decision(
    ray_local, in_repo, tmp_path
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    contract = copy.deepcopy(RUN_CONTRACT)
    contract["seeds"] = [0, 1, 2]
    contract["tracking"] = {"mlflow": {"tracking_uri": uri, "experiment": "e2e-mlflow"}}
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract))

    result = run(path, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed"
    trials = load_run(result.run_dir).records
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("e2e-mlflow")
    runs = client.search_runs([experiment.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == len(trials) == 6
    decision = next(d["decision"] for d in result.decisions if d["arm"] == "treat")
    treated = [r for r in children if r.data.tags.get("planner.arm") == "treat"]
    assert treated and all(r.data.tags.get("planner.decision") == decision for r in treated)
    assert {r.data.tags.get("planner.contract_sha256") for r in children} == {
        trials[0]["contract_sha256"]
    }
    # the parent: the contract's params, the decision, the report; the experiment a classic one
    (parent,) = [r for r in runs if r.data.tags.get("planner.kind") == "run"]
    assert parent.data.params["name"] == contract["name"]
    assert parent.data.params["metric.name"] == contract["metric"]["name"]
    assert parent.data.tags["planner.decision.treat"] == decision
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {
        "decisions.json",
        "report.html",
    }
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_store_mlflow_refuses_stops_the_run_before_any_trial(in_repo, tmp_path):
    contract = copy.deepcopy(RUN_CONTRACT)
    contract["tracking"] = {"mlflow": {"tracking_uri": "bogus-scheme://nowhere", "experiment": "x"}}
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract))
    from planner import PlannerError

    with pytest.raises(PlannerError):
        run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("trials.jsonl"))
