"""Running on a real multi-node Ray cluster (issue #6, part 1).

The first tests are pure and fast: the per-trial resource request, the code
shipment (runtime_env) and the address rules of planner._dispatch.cluster.

The `cluster` tests start two real `ray start` nodes on 127.0.0.1 (tests/cluster.py):
a head with {"CPU": 1, "head_only": 1, "trial_slot": 1} and a worker with
{"CPU": 1, "worker_slot": 2, "trial_slot": 1}. Drivers run in subprocesses from a folder of their
own, the way a user's `plan run` would, and the trainable's code lives in a folder no
node has on its path: it reaches the workers only if runtime_env ships it.
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from planner import UsageError
from planner._contract.model import Budget, Resources
from planner._dispatch.cluster import (
    DEFAULT_EXCLUDES,
    large_files,
    resolve_address,
    resources_for,
    runtime_env_for,
    task_options,
    unfit_reason,
)

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- pure: resources


def test_resources_for_speaks_ray_names_with_custom_resources():
    budget = Budget(exposure=3, resources={"cpu": 2, "gpu": 0.5, "custom": {"worker_slot": 1}})
    assert resources_for(budget) == {"CPU": 2.0, "GPU": 0.5, "worker_slot": 1.0}
    assert task_options(budget) == {
        "num_cpus": 2.0,
        "num_gpus": 0.5,
        "resources": {"worker_slot": 1.0},
    }


def test_task_options_without_custom_resources_has_no_resources_key():
    assert task_options(Resources()) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert resources_for({"cpu": 0.5}) == {"CPU": 0.5, "GPU": 0.0}


@pytest.mark.parametrize("name", ["CPU", "GPU", "memory", "node:10.0.0.1"])
def test_a_custom_resource_may_not_take_a_ray_name(name):
    with pytest.raises(UsageError, match=name):
        resources_for(Resources(custom={name: 1}))


NODES = [
    {"Alive": True, "Resources": {"CPU": 1.0, "head_only": 1.0, "node:127.0.0.1": 1.0}},
    {"Alive": True, "Resources": {"CPU": 4.0, "worker_slot": 2.0}},
    {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}},
]


def test_unfit_reason_accepts_a_request_one_alive_node_holds():
    assert unfit_reason({"CPU": 1.0, "GPU": 0.0}, NODES) is None
    assert unfit_reason({"CPU": 2.0, "worker_slot": 2.0}, NODES) is None


def test_unfit_reason_names_what_no_alive_node_has():
    reason = unfit_reason({"CPU": 1.0, "GPU": 1.0}, NODES)  # only the dead node has GPUs
    assert reason is not None and "GPU=1" in reason and "worker_slot=2" in reason
    reason = unfit_reason({"CPU": 2.0, "head_only": 1.0}, NODES)  # head_only and 2 CPUs never meet
    assert reason is not None and "head_only=1" in reason
    assert unfit_reason({"CPU": 1.0}, NODES[2:]) == "the Ray cluster has no alive node"


# ---------------------------------------------------------------- pure: address


def test_resolve_address_prefers_the_flag_then_ray_address():
    assert resolve_address("10.0.0.5:6379", {"RAY_ADDRESS": "10.0.0.9:6379"}) == "10.0.0.5:6379"
    assert resolve_address(None, {"RAY_ADDRESS": "10.0.0.9:6379"}) == "10.0.0.9:6379"
    assert resolve_address(None, {}) is None
    assert resolve_address("local", {}) is None
    assert resolve_address("auto", {}) == "auto"


def test_resolve_address_refuses_a_host_without_port():
    with pytest.raises(UsageError, match="host:port"):
        resolve_address("10.0.0.5", {})


def test_resolve_address_says_what_ray_client_needs():
    import importlib.util

    if importlib.util.find_spec("grpc") is not None:
        assert resolve_address("ray://head:10001", {}) == "ray://head:10001"
    else:
        with pytest.raises(UsageError, match=r"ray\[client\]"):
            resolve_address("ray://head:10001", {})


# ---------------------------------------------------------------- pure: runtime_env


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "train.py").write_text("def train(config, trial):\n    pass\n")
    (project / "data").mkdir()
    (project / "data" / "small.csv").write_text("x\n1\n")
    with open(project / "data" / "big.bin", "wb") as f:
        f.truncate(2 * 1024 * 1024)  # sparse: 2 MiB on paper, nothing on disk
    return project


def test_runtime_env_ships_the_contract_folder_without_runs_or_big_files(tmp_path):
    project = _project(tmp_path)
    env = runtime_env_for(
        project, "pkg.train:train", cwd=project, runs_dir="out/runs", large_file_bytes=1024 * 1024
    )
    assert env["working_dir"] == str(project.resolve())
    assert set(DEFAULT_EXCLUDES) <= set(env["excludes"])
    assert "/out/runs/" in env["excludes"]
    assert "/data/big.bin" in env["excludes"]
    assert "/data/small.csv" not in env["excludes"]
    # the trainable is inside the folder: only planner itself travels as a module
    assert env["py_modules"] == [str(REPO / "planner")]


def test_runtime_env_ships_a_trainable_package_found_in_the_current_folder(tmp_path):
    project = tmp_path / "contract_here"
    project.mkdir()
    elsewhere = _project(tmp_path)  # pkg/ lives here, the user's current folder
    env = runtime_env_for(project, "pkg.train:train", cwd=elsewhere, ship_planner=False)
    assert env["working_dir"] == str(project.resolve())
    assert env["py_modules"] == [str(elsewhere.resolve() / "pkg")]


def test_runtime_env_does_not_ship_installed_packages(tmp_path):
    env = runtime_env_for(tmp_path, "json.decoder:JSONDecoder", cwd=tmp_path, ship_planner=False)
    assert "py_modules" not in env


def test_large_files_skips_runs_and_vcs_folders(tmp_path):
    for folder in ("runs", ".git", "keep"):
        (tmp_path / folder).mkdir()
        with open(tmp_path / folder / "blob", "wb") as f:
            f.truncate(4096)
    assert large_files(tmp_path, limit=1024) == ["/keep/blob"]


# ---------------------------------------------------------------- the two-node cluster

cluster = pytest.mark.cluster
# The tests on `two_nodes` in two xdist groups (`make test` runs this tier with `--dist loadgroup`):
# each group's worker starts a two-node cluster of its own, and the two halves, about 90 s each of
# mostly waiting, run at once. A test that kills a node starts it again before it ends.
nodes_a = pytest.mark.xdist_group("two_nodes_a")
nodes_b = pytest.mark.xdist_group("two_nodes_b")


@pytest.fixture(scope="module")
def two_nodes():
    from tests.cluster.nodes import LocalCluster, NodeSpec

    with LocalCluster(
        [
            NodeSpec(num_cpus=1, resources={"head_only": 1, "trial_slot": 1}),
            NodeSpec(num_cpus=1, resources={"worker_slot": 2, "trial_slot": 1}),
        ]
    ) as running:
        yield running
    assert running.leftover_processes() == [], "the cluster's processes outlived its teardown"


def _trainable_folder(tmp_path: Path) -> tuple[Path, str]:
    """A folder with a module no node has on its path; MARK proves which copy ran."""
    mark = uuid.uuid4().hex
    project = tmp_path / "shipped_project"
    project.mkdir()
    (project / "shipped_trainable.py").write_text(
        f"MARK = {mark!r}\n\ndef score(x):\n    return float(x) * 2.0\n"
    )
    return project, mark


def _driver(
    tmp_path: Path, body: str, *args: str, env: dict, timeout: float
) -> subprocess.CompletedProcess:
    """Run `body` as a driver script from a folder of its own; its last stdout line is JSON."""
    home = tmp_path / "driver_home"
    home.mkdir(exist_ok=True)
    script = home / "driver.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _driver_env(cluster) -> dict:
    return cluster.driver_env(
        PYTHONPATH=str(REPO)
    )  # planner on the driver; the nodes get it shipped


def _last_json(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, (
        f"driver failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@nodes_a
@cluster
@pytest.mark.timeout(240)
def test_the_nodes_are_alive_on_loopback_with_resources_of_their_own(two_nodes):
    nodes = two_nodes.wait_for_nodes(2, timeout=60)
    assert {n["ip"] for n in nodes} == {"127.0.0.1"}
    by_id = {n["node_id"]: n["resources"] for n in nodes}
    head, worker = (by_id[node.node_id] for node in two_nodes.nodes)
    assert head.get("head_only") == 1 and "worker_slot" not in head
    assert worker.get("worker_slot") == 2 and "head_only" not in worker


ORPHAN_OWNER = """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from tests.cluster.nodes import LocalCluster, NodeSpec

    cluster = LocalCluster([NodeSpec(num_cpus=1)]).start()
    print(json.dumps({"root": str(cluster.root), "sessions": [n.process.pid for n in cluster.nodes]}), flush=True)
    time.sleep(600)  # killed before it can tear anything down
"""


@cluster
@pytest.mark.timeout(300)
def test_nodes_die_with_the_process_that_started_them(tmp_path):
    import psutil

    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(ORPHAN_OWNER))
    owner = subprocess.Popen(
        [sys.executable, str(script), str(REPO)], stdout=subprocess.PIPE, text=True
    )
    try:
        info = json.loads(owner.stdout.readline())
    finally:
        owner.kill()  # SIGKILL: no finalizer, no atexit
        owner.wait()

    def ours() -> list[int]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if os.getsid(proc.pid) in info["sessions"] or any(
                    info["root"] in a for a in proc.info["cmdline"] or []
                ):
                    if proc.status() != psutil.STATUS_ZOMBIE:
                        found.append(proc.pid)
            except (psutil.Error, OSError):
                continue
        return found

    assert ours(), "the cluster was not running"
    deadline = time.monotonic() + 30
    while ours() and time.monotonic() < deadline:
        time.sleep(0.5)
    leftover = ours()
    import shutil

    shutil.rmtree(info["root"], ignore_errors=True)
    assert leftover == [], "the nodes outlived the process that started them"


TASKS_DRIVER = """
    import json, os, sys, time
    import ray
    from planner._dispatch.cluster import resources_for, runtime_env_for, task_options

    project, results = sys.argv[1], sys.argv[2]
    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False,
             runtime_env=runtime_env_for(project, "shipped_trainable:score"))

    def probe(tag, results):
        import planner
        import shipped_trainable
        import socket

        facts = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }
        facts.update(tag=tag, mark=shipped_trainable.MARK, cwd=os.getcwd(),
                     planner_file=planner.__file__, module_file=shipped_trainable.__file__)
        with open(os.path.join(results, f"{tag}.json"), "w") as f:  # storage both nodes see
            json.dump(facts, f)
        time.sleep(1.5)  # long enough that one node cannot take every task
        return facts

    task = ray.remote(probe)
    plain = [task.options(**task_options({"cpu": 1})).remote(f"cpu-{i}", results) for i in range(6)]
    worker = task.options(**task_options({"cpu": 1, "custom": {"worker_slot": 1}})).remote("worker", results)
    head = task.options(**task_options({"cpu": 1, "custom": {"head_only": 1}})).remote("head", results)
    tasks = ray.get(plain + [worker, head])

    from ray import tune

    def trial(config):
        facts = probe(f"tune-{config['i']}", results)
        import shipped_trainable
        tune.report({"score": shipped_trainable.score(config["i"]), "node_id": facts["node_id"]})

    tuner = tune.Tuner(
        tune.with_resources(trial, resources_for({"cpu": 1})),
        param_space={"i": tune.grid_search(list(range(6)))},
        run_config=tune.RunConfig(name="mechanics", storage_path=os.path.join(results, "tune"), verbose=0),
    )
    grid = tuner.fit()
    trials = [{"i": r.config["i"], "score": r.metrics["score"], "node_id": r.metrics["node_id"]} for r in grid]
    print(json.dumps({"driver_cwd": os.getcwd(), "tasks": tasks, "trials": trials}))
"""


@nodes_b
@cluster
@pytest.mark.timeout(600)
def test_tasks_and_trials_land_on_both_nodes_with_the_shipped_code(two_nodes, tmp_path):
    project, mark = _trainable_folder(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    out = _last_json(
        _driver(
            tmp_path,
            TASKS_DRIVER,
            str(project),
            str(results),
            env=_driver_env(two_nodes),
            timeout=540,
        )
    )
    head_id, worker_id = (node.node_id for node in two_nodes.nodes)
    tasks = {t["tag"]: t for t in out["tasks"]}

    # custom resources place a task on the node that has them
    assert tasks["worker"]["node_id"] == worker_id
    assert tasks["head"]["node_id"] == head_id
    # plain CPU tasks and Tune trials spread over both nodes
    assert {tasks[f"cpu-{i}"]["node_id"] for i in range(6)} == {head_id, worker_id}
    assert {t["node_id"] for t in out["trials"]} == {head_id, worker_id}
    assert sorted(t["score"] for t in out["trials"]) == [2.0 * i for i in range(6)]

    # the code came through runtime_env: this run's module, from a copy, not the driver's folder
    for facts in tasks.values():
        assert facts["mark"] == mark
        assert Path(facts["module_file"]).parent != project
        assert facts["cwd"] != out["driver_cwd"] and facts["cwd"] != str(project)
        assert Path(facts["planner_file"]).parent != REPO / "planner"  # shipped, not the checkout
    # every task and trial left its file in the results folder
    written = sorted(p.stem for p in results.glob("*.json"))
    assert written == sorted(list(tasks) + [f"tune-{i}" for i in range(6)])


KILL_TASKS_DRIVER = """
    import json, os, sys, time
    import ray
    from planner._dispatch.cluster import runtime_env_for, task_options

    project, results, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False,
             runtime_env=runtime_env_for(project, "shipped_trainable:score"))

    @ray.remote(max_retries=3)
    def long_trial(i, results):
        import shipped_trainable
        import socket

        facts = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }
        marker = os.path.join(results, f"start-{i}-{facts['pid']}.json")
        with open(marker, "w") as f:
            json.dump(facts, f)
        time.sleep(6)
        return dict(facts, i=i, score=shipped_trainable.score(i))

    refs = [long_trial.options(**task_options({"cpu": 1})).remote(i, results) for i in range(n)]
    print(json.dumps({"results": ray.get(refs)}))
"""


def _wait_for_start_on(
    results: Path, node_id: str, driver: subprocess.Popen, timeout: float
) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for marker in results.glob("start-*.json"):
            try:
                facts = json.loads(marker.read_text())
            except (OSError, ValueError):
                continue
            if facts["node_id"] == node_id:
                return facts
        if driver.poll() is not None:
            raise AssertionError(
                f"the driver ended before a trial started on the worker:\n{driver.stderr.read()}"
            )
        time.sleep(0.2)
    raise AssertionError(f"no trial started on the worker node in {timeout:.0f} s")


def _starts(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(results.glob("start-*.json"))]


def _popen_driver(tmp_path: Path, body: str, *args: str, env: dict) -> subprocess.Popen:
    home = tmp_path / "driver_home"
    home.mkdir(exist_ok=True)
    script = home / "driver.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@nodes_a
@cluster
@pytest.mark.timeout(600)
def test_a_node_killed_mid_run_leads_to_retried_tasks_not_a_lost_run(two_nodes, tmp_path):
    project, mark = _trainable_folder(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    head_id, worker_id = (node.node_id for node in two_nodes.nodes)
    driver = _popen_driver(
        tmp_path, KILL_TASKS_DRIVER, str(project), str(results), "4", env=_driver_env(two_nodes)
    )
    try:
        victim = _wait_for_start_on(results, worker_id, driver, timeout=240)
        two_nodes.kill_node(1)
        stdout, stderr = driver.communicate(timeout=400)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
        two_nodes.restart_node(1)  # the next test gets two nodes again
    assert driver.returncode == 0, f"the run was lost:\n{stdout[-2000:]}\n{stderr[-4000:]}"
    out = json.loads(stdout.strip().splitlines()[-1])
    done = {r["i"]: r for r in out["results"]}
    assert sorted(done) == [0, 1, 2, 3]  # nothing lost
    assert all(r["score"] == 2.0 * i for i, r in done.items())
    # the task that was running on the killed node started again, and finished on the head
    killed = [
        s for s in _starts(results) if s["node_id"] == worker_id and s["pid"] == victim["pid"]
    ]
    assert killed, "the victim's start marker is missing"
    retried = {json.loads(p.read_text())["node_id"] for p in results.glob("start-*.json")}
    assert head_id in retried
    starts_per_task: dict[int, int] = {}
    for p in results.glob("start-*.json"):
        i = int(p.stem.split("-")[1])
        starts_per_task[i] = starts_per_task.get(i, 0) + 1
    assert max(starts_per_task.values()) >= 2, f"no task was retried: {starts_per_task}"
    victims = [i for i, n in starts_per_task.items() if n >= 2]
    assert all(done[i]["node_id"] == head_id for i in victims)


KILL_TUNE_DRIVER = """
    import json, os, sys, time
    import ray
    from ray import tune
    from planner._dispatch.cluster import resources_for, runtime_env_for

    project, results, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False,
             runtime_env=runtime_env_for(project, "shipped_trainable:score"))

    def trial(config):
        import shipped_trainable
        import socket

        facts = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }
        with open(os.path.join(results, f"start-{config['i']}-{facts['pid']}.json"), "w") as f:
            json.dump(facts, f)
        for step in range(1, 7):
            time.sleep(1)
            tune.report({"step": step, "score": shipped_trainable.score(config["i"]), "node_id": facts["node_id"]})

    tuner = tune.Tuner(
        tune.with_resources(trial, resources_for({"cpu": 1})),
        param_space={"i": tune.grid_search(list(range(n)))},
        run_config=tune.RunConfig(name="killed", storage_path=os.path.join(results, "tune"), verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=2)),
    )
    grid = tuner.fit()
    rows = [{"i": r.config["i"], "error": repr(r.error) if r.error else None,
             "step": r.metrics.get("step"), "node_id": r.metrics.get("node_id")} for r in grid]
    print(json.dumps({"trials": rows}))
"""


@nodes_b
@cluster
@pytest.mark.timeout(600)
def test_a_node_killed_mid_run_leads_to_retried_tune_trials(two_nodes, tmp_path):
    project, _ = _trainable_folder(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    head_id, worker_id = (node.node_id for node in two_nodes.nodes)
    driver = _popen_driver(
        tmp_path, KILL_TUNE_DRIVER, str(project), str(results), "3", env=_driver_env(two_nodes)
    )
    try:
        victim = _wait_for_start_on(results, worker_id, driver, timeout=300)
        two_nodes.kill_node(1)
        stdout, stderr = driver.communicate(timeout=420)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
        two_nodes.restart_node(1)
    assert driver.returncode == 0, f"the run was lost:\n{stdout[-2000:]}\n{stderr[-4000:]}"
    rows = {r["i"]: r for r in json.loads(stdout.strip().splitlines()[-1])["trials"]}
    assert sorted(rows) == [0, 1, 2]
    assert all(r["error"] is None and r["step"] == 6 for r in rows.values()), rows
    starts = _starts(results)
    assert any(s["pid"] == victim["pid"] for s in starts)
    # the killed trial ran again (a second start marker) and completed on the surviving head
    per_trial: dict[int, int] = {}
    for p in results.glob("start-*.json"):
        i = int(p.stem.split("-")[1])
        per_trial[i] = per_trial.get(i, 0) + 1
    retried = [i for i, n in per_trial.items() if n >= 2]
    assert retried, f"no trial was retried: {per_trial}"
    assert all(rows[i]["node_id"] == head_id for i in retried)


# ---------------------------------------------------------------- plan run on the cluster


def _plan_run(
    tmp_path: Path, contract: Path, runs: Path, address: str, env: dict
) -> subprocess.Popen:
    """`plan run CONTRACT --address ...` from a folder that is not the contract's."""
    home = tmp_path / "user_home"
    home.mkdir(exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "planner",
        "run",
        str(contract),
        "--address",
        address,
        "--runs-dir",
        str(runs),
        "--quiet",
    ]
    return subprocess.Popen(
        cmd, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _run_folder(runs: Path) -> Path:
    folders = [p for p in runs.glob("*/*") if (p / "run.json").is_file()]
    assert len(folders) == 1, f"expected one run folder under {runs}: {folders}"
    return folders[0]


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a torn last line
    return rows


def _attempt_facts(run_dir: Path) -> list[dict]:
    """What each trial attempt wrote into its trial.dir: node id, module file, phase."""
    facts = []
    for path in run_dir.glob("trials/*/node-*.json"):
        try:
            facts.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being written right now
    return facts


def _planned(run_dir: Path) -> int:
    plan = json.loads((run_dir / "plan.json").read_text())
    for key in ("planned", "planned_trials", "planned_count", "count"):
        if isinstance(plan.get(key), int):
            return plan[key]
    return len(plan["trials"])


@nodes_b
@cluster
@pytest.mark.timeout(900)
def test_plan_run_on_two_node_cluster(two_nodes, tmp_path):
    from tests.cluster.nodes import write_small_contract

    project = tmp_path / "experiment"  # the trainable lives only here: it has to be shipped
    contract = write_small_contract(
        project, resources={"cpu": 1, "gpu": 0, "custom": {"trial_slot": 1}}
    )
    runs = tmp_path / "runs"
    started = time.monotonic()
    proc = _plan_run(tmp_path, contract, runs, two_nodes.address, _driver_env(two_nodes))
    stdout, stderr = proc.communicate(timeout=840)
    wall = time.monotonic() - started
    assert proc.returncode == 0, (
        f"plan run failed ({wall:.0f} s):\n{stdout[-3000:]}\n{stderr[-5000:]}"
    )

    run_dir = _run_folder(runs)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "completed"
    records = _read_jsonl(run_dir / "trials.jsonl")
    assert len({r["trial_id"] for r in records}) == _planned(run_dir) == len(records)
    assert all(r["status"] == "completed" for r in records), [
        (r["trial_id"], r["status"]) for r in records
    ]
    decisions = json.loads((run_dir / "decisions.json").read_text())
    assert [d["arm"] for d in decisions["decisions"]] == ["treat"]
    assert decisions["decisions"][0]["decision"] in {"accept", "reject", "inconclusive"}

    facts = _attempt_facts(run_dir)
    head_id, worker_id = (node.node_id for node in two_nodes.nodes)
    assert {f["node_id"] for f in facts} == {head_id, worker_id}, (
        "trials did not land on both nodes"
    )
    assert {f["phase"] for f in facts} == {"tune", "confirm"}
    # the trainable ran from the copy runtime_env shipped, never from the contract's folder
    assert all(Path(f["module_file"]).parent != project for f in facts)
    if any(
        "node_id" in r for r in records
    ):  # the run record names the node when dispatch stores it
        assert {r["node_id"] for r in records} == {head_id, worker_id}


@nodes_a
@cluster
@pytest.mark.timeout(900)
def test_plan_run_survives_a_node_killed_mid_run(two_nodes, tmp_path):
    from tests.cluster.nodes import write_small_contract

    project = tmp_path / "experiment"
    # one tuning trial an arm and two seeds: once the worker node is killed, every trial left runs
    # on the head's one CPU, one after another, and a trial lost and retried needs no more of them
    contract = write_small_contract(
        project,
        name="cluster-kill",
        trials_per_arm=1,
        seeds=(0, 1),
        exposure=6,
        step_s=1.0,
        retries=1,
        resources={"cpu": 1, "gpu": 0},
    )
    runs = tmp_path / "runs"
    worker_id = two_nodes.nodes[1].node_id
    proc = _plan_run(tmp_path, contract, runs, two_nodes.address, _driver_env(two_nodes))
    try:
        deadline = time.monotonic() + 400
        victim = None
        while victim is None and time.monotonic() < deadline and proc.poll() is None:
            folders = [p for p in runs.glob("*/*") if (p / "run.json").is_file()]
            for folder in folders:
                victim = next(
                    (f for f in _attempt_facts(folder) if f["node_id"] == worker_id), None
                )
            time.sleep(0.2)
        assert victim is not None, "no trial started on the worker node"
        time.sleep(1.0)  # into the trial's first steps
        two_nodes.kill_node(1)
        stdout, stderr = proc.communicate(timeout=800)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        two_nodes.restart_node(1)
    assert proc.returncode == 0, f"plan run did not complete:\n{stdout[-3000:]}\n{stderr[-5000:]}"

    run_dir = _run_folder(runs)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "completed"
    records = _read_jsonl(run_dir / "trials.jsonl")
    assert (
        len({r["trial_id"] for r in records}) == _planned(run_dir) == len(records)
    )  # nothing lost
    assert all(r["status"] == "completed" for r in records), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in records
    ]
    retried = [r for r in records if r["attempts"] >= 2]
    assert retried, "the trial on the killed node was not retried"
    assert (run_dir / "decisions.json").is_file()


@cluster
@pytest.mark.timeout(300)
def test_plan_run_without_an_address_starts_its_own_ray_beside_a_users_cluster(tmp_path):
    """A cluster the user started with `ray start --head` (its address in
    <temp>/ray/ray_current_cluster, where ray.init() without an address looks): `plan run` without
    --address is an embedded run all the same. ray.init() joined that cluster, or refused to with
    the embedded Ray's _system_config: three failed starts and "could not start a local Ray".
    RAY_TMPDIR keeps this test's address file its own."""
    import shutil
    import signal
    import tempfile

    from tests.cluster.nodes import LOOPBACK_ENV, free_ports, write_small_contract

    ray_tmp = Path(
        tempfile.mkdtemp(prefix="rt", dir="/tmp")
    )  # short: Ray's socket paths live under it
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(LOOPBACK_ENV, RAY_TMPDIR=str(ray_tmp), PYTHONPATH=str(REPO))
    ray = Path(sys.executable).with_name("ray")
    (port,) = free_ports(1)
    log = tmp_path / "head.log"
    with open(log, "wb") as out:
        head = subprocess.Popen(
            [
                str(ray),
                "start",
                "--head",
                "--block",
                f"--port={port}",
                "--num-cpus=1",
                "--node-ip-address=127.0.0.1",
                "--include-dashboard=false",
                "--disable-usage-stats",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.poll() is None and time.monotonic() < deadline, log.read_text(
                errors="replace"
            )[-3000:]
            time.sleep(0.3)
        address_file = ray_tmp / "ray" / "ray_current_cluster"
        assert (
            address_file.read_text().strip().endswith(f":{port}")
        )  # where ray.init() would find it
        contract = write_small_contract(
            tmp_path / "experiment", trials_per_arm=0, seeds=(0, 1), exposure=2, step_s=0.1
        )
        runs = tmp_path / "runs"
        done = subprocess.run(
            [sys.executable, "-m", "planner", "run", str(contract), "--runs-dir", str(runs)],
            cwd=tmp_path / "experiment",
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "starting an embedded local Ray" in done.stdout
        run_dir = _run_folder(runs)
        assert json.loads((run_dir / "state.json").read_text())["state"] == "completed"
        records = _read_jsonl(run_dir / "trials.jsonl")
        assert len(records) == _planned(run_dir) and all(
            r["status"] == "completed" for r in records
        )
    finally:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=30)
        shutil.rmtree(ray_tmp, ignore_errors=True)
