"""Token authentication and fractional GPUs on a real loopback cluster: a driver the cluster
refuses gets one sentence, and trials that ask for part of a GPU share the GPU node.

The pure tests check the sentence a failed connection becomes and that Ray's stderr goes to the run
folder's ray.log while the driver connects. The `cluster` tests start two `ray start` nodes on
127.0.0.1 (tests/cluster/nodes.py) with token authentication, as docs/cluster.md says to start them:
RAY_AUTH_MODE=token and RAY_AUTH_TOKEN on every node. The second node declares one GPU
(`--num-gpus=1`; no real GPU is needed: Ray schedules what a node declares).

- a driver with the token but without RAY_AUTH_MODE=token, or with a wrong token, gets one sentence
  that says the cluster refused it for authentication, exit 3, and nothing of Ray's on the terminal;
- with both variables, `budget.resources: {cpu: 0.5, gpu: 0.5}` puts every trial on the GPU node,
  two at a time, each with CUDA_VISIBLE_DEVICES set by Ray, and the report's Cost section counts
  the gpu-seconds the trials reserved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ray.exceptions import AuthenticationError

from bench.gpu_check import most_at_once
from planner import RunError, load_run
from planner._core.errors import EXIT_INCOMPLETE
from planner._dispatch.ray_logs import RAY_LOG, stderr_to_ray_log
from planner._dispatch.ray_start import connect_failure

REPO = Path(__file__).resolve().parents[2]
ADDRESS = "10.0.0.5:6379"

# What ray.init raises when the GCS refuses the token (Ray 2.60): a ConnectionError whose cause is a
# RuntimeError holding the AuthenticationError's formatted traceback as text.
REFUSED = (
    "Failed to connect to GCS. Last connection error: Traceback (most recent call last):\n"
    "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is "
    "missing or "
    "incorrect. Note: RAY_AUTH_MODE is currently 'disabled' (not 'token')."
)


def _refused() -> ConnectionError:
    try:
        try:
            raise RuntimeError(REFUSED)
        except RuntimeError as cause:
            raise ConnectionError(f"Failed to connect to Ray cluster at {ADDRESS}") from cause
    except ConnectionError as error:
        return error


# ---------------------------------------------------------------- pure: the sentence


def test_a_refusal_without_the_auth_mode_names_both_variables():
    text = connect_failure(ADDRESS, _refused(), {"RAY_AUTH_TOKEN": "abcdef123456"})
    assert text.startswith(
        f"the Ray cluster at {ADDRESS} refused the connection: authentication failed"
    )
    assert "RAY_AUTH_MODE to token" in text and "RAY_AUTH_TOKEN" in text
    assert "abcdef123456" not in text and "\n" not in text


def test_a_refusal_with_the_auth_mode_says_the_token_is_not_the_clusters():
    text = connect_failure(
        ADDRESS, _refused(), {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "abcdef123456"}
    )
    assert text.startswith(
        f"the Ray cluster at {ADDRESS} refused the connection: authentication failed"
    )
    assert "(from RAY_AUTH_TOKEN) is not the cluster's" in text and "abcdef123456" not in text
    path = connect_failure(
        ADDRESS, _refused(), {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/s/tok"}
    )
    assert "the file RAY_AUTH_TOKEN_PATH names" in path and "/s/tok" not in path
    home = connect_failure(ADDRESS, _refused(), {"RAY_AUTH_MODE": "token"})
    assert "(from ~/.ray/auth_token)" in home


def test_the_drivers_own_token_problem_is_not_called_a_refusal():
    bad_file = AuthenticationError(
        "RAY_AUTH_TOKEN_PATH is set but file cannot be opened or is empty: /s/tok. "
        "Ensure that the token for the cluster is available"
    )
    text = connect_failure(
        ADDRESS, bad_file, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/s/tok"}
    )
    assert "refused" not in text and "cannot be read or is empty" in text and "/s/tok" not in text
    none = AuthenticationError(
        "Token authentication is enabled but no authentication token was found"
    )
    assert "no token was found" in connect_failure(ADDRESS, none, {"RAY_AUTH_MODE": "token"})


def test_other_connection_failures_keep_rays_reason_and_point_at_ray_log(tmp_path):
    error = ConnectionError(f"Failed to connect to Ray cluster at {ADDRESS}")
    text = connect_failure(ADDRESS, error, {}, log_dir=tmp_path)
    assert text == (
        f"cannot connect to the Ray cluster at {ADDRESS}: Failed to connect to Ray cluster at "
        f"{ADDRESS} (Ray's own lines: {tmp_path / RAY_LOG})"
    )


def test_no_sentence_is_cut_by_the_redactor():
    """The CLI's redactor cuts `NAME=value` for credential-like names (RAY_AUTH_MODE,
    RAY_AUTH_TOKEN_PATH)."""
    from planner._core.redact import Redactor

    for environ in (
        {},
        {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "abcdef123456"},
        {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/secrets/ray-token"},
    ):
        text = connect_failure(ADDRESS, _refused(), environ)
        assert Redactor.for_run(environ=environ).text(text) == text


# ---------------------------------------------------------------- pure: Ray's stderr goes to
# ray.log


def test_fd2_goes_to_ray_log_while_connecting_and_comes_back(tmp_path, capfd):
    with stderr_to_ray_log(tmp_path):
        os.write(2, b"[W gcs_client.cc:210] from C++\n")  # how Ray's core writes: to fd 2 itself
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
    assert (tmp_path / RAY_LOG).read_text() == "[W gcs_client.cc:210] from C++\n"


def test_a_ray_log_that_is_a_link_is_refused_not_written_through(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("")
    run = tmp_path / "run"
    run.mkdir()
    (run / RAY_LOG).symlink_to(target)
    with pytest.raises(RunError, match="symbolic link"):
        with stderr_to_ray_log(run):
            pass
    assert target.read_text() == ""


# ---------------------------------------------------------------- the token-auth cluster with a
# GPU node

cluster = pytest.mark.cluster
# The tests on `gpu_cluster` on one xdist worker (`--dist loadgroup`): it starts the cluster once.
on_gpu_cluster = pytest.mark.xdist_group("gpu_cluster")


@pytest.fixture(scope="module")
def gpu_cluster():
    from tests.cluster.nodes import LocalCluster, NodeSpec

    with LocalCluster([NodeSpec(num_cpus=1), NodeSpec(num_cpus=1, num_gpus=1)]) as running:
        yield running
    assert running.leftover_processes() == [], "the cluster's processes outlived its teardown"


def _plan_run(tmp_path: Path, contract: Path, runs: Path, address: str, env: dict, timeout: float):
    home = tmp_path / "user_home"  # `plan run` from a folder that is not the contract's
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "planner",
            "run",
            str(contract),
            "--address",
            address,
            "--runs-dir",
            str(runs),
        ],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run_folder(runs: Path) -> Path:
    (folder,) = [p for p in runs.glob("*/*") if (p / "run.json").is_file()]
    return folder


RAY_MARKS = ("gcs_client", "InvalidAuthToken", "Traceback", "RPC error", "ray.exceptions", "[20")


@on_gpu_cluster
@cluster
@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", ["token without the mode", "a wrong token"])
def test_a_driver_the_cluster_refuses_gets_one_sentence_and_exit_3(gpu_cluster, tmp_path, case):
    from tests.cluster.nodes import write_small_contract

    contract = write_small_contract(
        tmp_path / "experiment", trials_per_arm=0, seeds=(0, 1), exposure=1, step_s=0.0
    )
    env = gpu_cluster.driver_env(PYTHONPATH=str(REPO))
    if case == "token without the mode":  # what docs/cluster.md used to say was enough
        env.pop("RAY_AUTH_MODE")
    else:
        env["RAY_AUTH_TOKEN"] = "0" * 64
    runs = tmp_path / "runs"
    proc = _plan_run(tmp_path, contract, runs, gpu_cluster.address, env, timeout=300)

    assert proc.returncode == EXIT_INCOMPLETE == 3, (
        proc.returncode,
        proc.stdout[-2000:],
        proc.stderr[-3000:],
    )
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, (
        f"more than planner's sentence on stderr:\n{proc.stderr[-3000:]}\n"
        f"stdout:\n{proc.stdout[-3000:]}"
    )
    assert lines[0].startswith(
        f"plan run: the Ray cluster at {gpu_cluster.address} refused the connection: "
        "authentication failed, because "
    )
    if case == "token without the mode":
        assert "the driver sent no token" in lines[0] and "set RAY_AUTH_MODE to token" in lines[0]
    else:
        assert "(from RAY_AUTH_TOKEN) is not the cluster's" in lines[0]
    assert not any(mark in proc.stderr + proc.stdout for mark in RAY_MARKS), (
        proc.stderr + proc.stdout
    )
    run_dir = _run_folder(runs)
    assert (
        "InvalidAuthToken" in (run_dir / RAY_LOG).read_text()
    )  # Ray's lines are kept, in the run folder
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "failed" and "refused the connection" in state["reason"]


def _cost_rows(markdown: str) -> dict[str, list[str]]:
    section = markdown.split("## Cost (apart from the decision)", 1)[1].split("\n## ", 1)[0]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|")
    ]
    header = rows[0]
    assert header[-1] == "gpu-seconds", header
    return {row[0]: row for row in rows[2:]}


@on_gpu_cluster
@cluster
@pytest.mark.timeout(900)
def test_fractional_gpus_put_two_trials_at_once_on_the_gpu_node(gpu_cluster, tmp_path):
    from planner._results.report import _fmt
    from tests.cluster.nodes import write_small_contract

    contract = write_small_contract(
        tmp_path / "experiment",
        name="cluster-gpu",
        trials_per_arm=2,
        seeds=(0, 1),
        exposure=3,
        step_s=1.0,
        resources={"cpu": 0.5, "gpu": 0.5},
    )
    env = gpu_cluster.driver_env(PYTHONPATH=str(REPO))
    assert (
        env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"]
    )  # the two variables docs/cluster.md gives
    runs = tmp_path / "runs"
    proc = _plan_run(tmp_path, contract, runs, gpu_cluster.address, env, timeout=840)
    assert proc.returncode == 0, f"plan run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert not any(mark in proc.stderr for mark in RAY_MARKS), proc.stderr

    run_dir = _run_folder(runs)
    records = load_run(run_dir).records
    assert len(records) == 2 * 2 + 2 * 2 and all(r["status"] == "completed" for r in records), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in records
    ]
    gpu_node = gpu_cluster.nodes[1].node_id
    assert {r["node_id"] for r in records} == {gpu_node}, (
        "a trial ran off the node that declares the GPU"
    )
    facts = [json.loads(p.read_text()) for p in run_dir.glob("trials/*/node-*.json")]
    assert {f["trial_id"] for f in facts} == {r["trial_id"] for r in records}
    for f in facts:  # every attempt got GPU 0 from Ray, and CUDA_VISIBLE_DEVICES says so
        assert (
            f["node_id"] == gpu_node and f["gpu_ids"] == ["0"] and f["cuda_visible_devices"] == "0"
        ), f
    assert all(f["end"] is not None for f in facts)
    # 0.5 GPU a trial on a node with 1: two at a time, never more
    assert most_at_once([(f["start"], f["end"]) for f in facts]) == 2

    report = subprocess.run(
        [sys.executable, "-m", "planner", "report", str(run_dir), "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    cost = {c["arm"]: c for c in json.loads(report.stdout)["cost"]}
    markdown = subprocess.run(
        [sys.executable, "-m", "planner", "report", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = _cost_rows(markdown)
    for arm in ("base", "treat"):
        seconds = sum(r["duration_s"] for r in records if r["arm"] == arm)
        assert (
            cost[arm]["gpu_seconds"] == pytest.approx(0.5 * seconds, abs=2e-3)
            and cost[arm]["gpu_seconds"] > 0
        )
        assert rows[arm][-1] == _fmt(cost[arm]["gpu_seconds"])  # the Cost section shows them
