"""The unchanged Hydra app (examples/unchanged_app) through `plan run --address` on the loopback
cluster of tests/cluster/nodes.py: its seed and epochs set by the contract, its
metrics read from its own CSV while it runs, under ASHA, on both nodes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner import load_run

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "unchanged_app"


@pytest.fixture(scope="module")
def two_nodes():
    from tests.cluster.nodes import LocalCluster, NodeSpec

    with LocalCluster(
        [
            NodeSpec(num_cpus=1, resources={"trial_slot": 1}),
            NodeSpec(num_cpus=1, resources={"trial_slot": 1}),
        ]
    ) as running:
        yield running
    assert running.leftover_processes() == [], "the cluster's processes outlived its teardown"


@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_the_unchanged_app_runs_on_the_loopback_cluster_under_asha(two_nodes, tmp_path):
    app = tmp_path / "experiment"
    shutil.copytree(APP, app)
    contract = yaml.safe_load((app / "contract.yaml").read_text())
    contract["seeds"] = [0, 1, 2]
    contract["budget"]["resources"] = {"cpu": 1, "gpu": 0, "custom": {"trial_slot": 1}}
    (app / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    home = tmp_path / "user_home"  # `plan run` from a folder that is not the contract's
    home.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "planner",
            "run",
            str(app / "contract.yaml"),
            "--address",
            two_nodes.address,
            "--runs-dir",
            str(tmp_path / "runs"),
            "--quiet",
        ],
        cwd=home,
        env=two_nodes.driver_env(PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert proc.returncode == 0, f"plan run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"

    (run_dir,) = [p for p in (tmp_path / "runs").glob("*/*") if (p / "run.json").is_file()]
    records = load_run(run_dir).records
    assert len(records) == 12 + 6
    head_id, worker_id = (node.node_id for node in two_nodes.nodes)
    assert {r["node_id"] for r in records} == {head_id, worker_id}, (
        "trials did not land on both nodes"
    )
    cut = [r for r in records if r["status"] == "early_stopped"]
    assert cut and all(r["exposure"] < 8 for r in cut), [
        (r["trial_id"], r["status"]) for r in records
    ]
    confirm = [r for r in records if r["phase"] == "confirm"]
    assert all(
        r["status"] == "completed" and [x["step"] for x in r["reports"]] == list(range(1, 9))
        for r in confirm
    ), [(r["trial_id"], r["status"], r["errors"][:1]) for r in confirm]
    for r in confirm:  # the seed reached the app's own config
        config = (
            run_dir / "trials" / r["trial_id"] / "attempt-1" / "hydra" / ".hydra" / "config.yaml"
        )
        assert yaml.safe_load(config.read_text())["seed"] == r["seed"]
    decisions = json.loads((run_dir / "decisions.json").read_text())["decisions"]
    assert [(d["arm"], d["decision"]) for d in decisions] == [("standardized", "accept")]
