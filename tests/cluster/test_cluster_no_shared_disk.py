"""`plan run --address` on a cluster whose worker nodes do not share the driver's disk, with nodes
that die.

The worker node runs in a mount namespace of its own with an empty tmpfs over the runs folder
(`NodeSpec(private=...)`, as root): what a trial writes into `trial.dir` there stays there, and only
what travels through Ray reaches the run folder. The head (where the driver's Ray connects) shares
the driver's disk, as the machine the driver runs on does. The trainable writes where each attempt
ran into a `facts` folder both sides see, the test's only window into the worker node.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._s3 import s3_server
from tests.cluster.nodes import LocalCluster, NodeSpec

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="private mounts need root (unshare --mount)"),
]

TRAINABLE = """import json, os, time


def _write(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def train(config, trial):
    import ray

    node = ray.get_runtime_context().get_node_id()
    checkpoint = os.path.join(trial.dir, "ckpt.json")
    first = 1
    if trial.resumed and os.path.exists(checkpoint):  # continue where the cut-short attempt was
        with open(checkpoint) as f:
            first = json.load(f)["step"] + 1
    facts = os.path.join(config["facts"], f"{trial.id}-{trial.attempt}-{os.getpid()}.json")
    fact = {"node_id": node, "phase": trial.phase, "trial_id": trial.id, "first": first, "step": 0}
    _write(facts, fact)
    level = config["recipe"]["level"] + 0.001 * trial.seed + 0.01 * config["recipe"]["lr"]
    step_s = config["tune_step_s"] if trial.phase == "tune" else config["step_s"]
    for step in range(first, trial.budget + 1):
        time.sleep(step_s)
        print(f"step {step} on {node}", flush=True)
        _write(checkpoint, {"step": step})
        metrics = {"val_acc": level + 0.01 * step}
        if trial.phase != "tune":  # the held-out metric never in tuning
            metrics["test_acc"] = metrics["val_acc"]
        trial.report(step, **metrics)
        _write(facts, dict(fact, step=step))
"""


def _contract(
    folder: Path,
    facts: Path,
    *,
    retries: int,
    exposure: int = 4,
    tuned: int = 0,
    step_s: float = 0.6,
    tune_step_s: float | None = None,
) -> Path:
    """The contract; `tuned`: tuning trials per arm (over `recipe.lr`), none by default; a step
    lasts `step_s`, in tuning `tune_step_s` when given."""
    import yaml

    from tests._runs import synthetic_contract

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spread_trainable.py").write_text(TRAINABLE)
    recipe = {"name": "a", "level": 0.5, "lr": 0.01}
    contract = synthetic_contract(
        name="no-shared-disk",
        hypothesis="The treatment recipe raises val_acc by more than 0.05.",
        trainable="spread_trainable:train",
        config={
            "values": {
                "recipe": recipe,
                "step_s": step_s,
                "tune_step_s": step_s if tune_step_s is None else tune_step_s,
                "facts": str(facts),
            }
        },
        seeds=[0, 1, 2],
        budget={"exposure": exposure, "resources": {"cpu": 1, "gpu": 0}},
        failures={"retries": retries},
    )
    if tuned:
        contract["tuning"] = {
            "trials_per_arm": tuned,
            "seeds": [1000],
            "sampler": {"name": "random", "seed": 0},
            "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
        }
    path = folder / "contract.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def _plan_run(contract: Path, runs: Path, env: dict, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "planner", "run", str(contract), "--runs-dir", str(runs), *extra]
    return subprocess.Popen(
        cmd,
        cwd=contract.parent.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_folder(runs: Path) -> Path:
    (folder,) = [p for p in runs.glob("*/*") if (p / "run.json").is_file()]
    return folder


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]


def _wait_for_fact(
    facts: Path, proc: subprocess.Popen, *, node_id: str, phase: str, step: int = 0
) -> dict:
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        for path in facts.glob("*.json"):
            try:
                fact = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if fact["node_id"] == node_id and fact["phase"] == phase and fact["step"] >= step:
                return fact
        time.sleep(0.2)
    out, err = proc.communicate() if proc.poll() is not None else ("", "")
    raise AssertionError(f"no {phase} trial started on the node:\n{out[-3000:]}\n{err[-3000:]}")


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    """The runs folder (private to the worker nodes that ask for it) and the facts folder."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "facts").mkdir()
    return tmp_path / "runs", tmp_path / "facts"


def _kill_when_started(
    cluster: LocalCluster, proc: subprocess.Popen, facts: Path, index: int, *, step: int = 0
) -> tuple[dict, str, str]:
    """Kill node `index` once a confirmation trial reached `step` there; (that trial's fact, the
    driver's stdout and stderr). The driver never outlives it."""
    try:
        victim = _wait_for_fact(
            facts, proc, node_id=str(cluster.nodes[index].node_id), phase="confirm", step=step
        )
        time.sleep(1.0)  # into its steps
        cluster.kill_node(index)
        stdout, stderr = proc.communicate(timeout=900)
        return victim, stdout, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


RAY_LINE = re.compile(r"\(raylet\)|\[state-dump\]|heartbeat|Raylet is terminated|GCS", re.I)


@pytest.mark.timeout(1500)
def test_a_worker_lost_in_confirmation_is_retried_without_a_shared_disk(tmp_path):
    runs, facts = _folders(tmp_path)
    contract = _contract(tmp_path / "experiment", facts, retries=1)
    with LocalCluster(
        [NodeSpec(num_cpus=1), NodeSpec(num_cpus=1, private=(str(runs),))]
    ) as cluster:
        worker = cluster.nodes[1].node_id
        env = cluster.driver_env(PYTHONPATH=str(REPO))
        proc = _plan_run(contract, runs, env, "--address", cluster.address)
        victim, stdout, stderr = _kill_when_started(cluster, proc, facts, 1)
    assert proc.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    run_dir = _run_folder(runs)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "completed"
    records = {r["trial_id"]: r for r in _records(run_dir)}
    assert all(r["status"] == "completed" for r in records.values()), records
    lost = records[victim["trial_id"]]
    assert lost["attempts"] == 2 and lost["errors"][0]["type"] == "WorkerDied", lost
    # every trial's folder holds its output log and its kept record, wherever it ran
    for trial_id in records:
        folder = run_dir / "trials" / trial_id
        assert "step 4 on" in (folder / "output.log").read_text(), trial_id
        kept = json.loads((folder / ".planner-record.json").read_text())["record"]
        assert kept["trial_id"] == trial_id and kept["status"] == "completed"
    assert lost["node_id"] != worker  # its last attempt ran on the node left
    # nothing of Ray's own on the terminal
    assert not [line for line in (stdout + stderr).splitlines() if RAY_LINE.search(line)]

    # the same contract on an embedded Ray decides the same
    embedded = tmp_path / "embedded"
    done = subprocess.run(
        [sys.executable, "-m", "planner", "run", str(contract), "--runs-dir", str(embedded)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    decided = json.loads((run_dir / "decisions.json").read_text())["decisions"]
    alone = json.loads((_run_folder(embedded) / "decisions.json").read_text())["decisions"]
    assert [(d["arm"], d["decision"]) for d in decided] == [
        (d["arm"], d["decision"]) for d in alone
    ]


@pytest.mark.timeout(1500)
def test_a_lost_head_ends_the_driver_with_exit_3_and_a_resume_that_works_on_a_new_head(tmp_path):
    runs, facts = _folders(tmp_path)
    contract = _contract(tmp_path / "experiment", facts, retries=0)
    with LocalCluster([NodeSpec(num_cpus=1), NodeSpec(num_cpus=1)]) as cluster:
        old = cluster.address
        proc = _plan_run(contract, runs, cluster.driver_env(PYTHONPATH=str(REPO)), "--address", old)
        _, stdout, stderr = _kill_when_started(cluster, proc, facts, 0)
    # Ray's own client ends a driver 60 s after its head died, with exit 1 and the state left
    # `running`: exit 3 and `interrupted` (below) are planner's watch of the head
    assert proc.returncode == 3, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    assert not [
        line
        for line in (stdout + stderr).splitlines()
        if RAY_LINE.search(line) and "Ray session was lost" not in line and "run state" not in line
    ]
    (line,) = [x for x in stdout.splitlines() if x.startswith("to resume:")]
    assert old not in line and "--resume" in line
    assert json.loads((_run_folder(runs) / "state.json").read_text())["state"] == "interrupted"

    import shlex

    argv = shlex.split(line.removeprefix("to resume:").strip())
    assert argv[:2] == ["plan", "run"]
    with LocalCluster([NodeSpec(num_cpus=2)]) as fresh:
        done = subprocess.run(
            [sys.executable, "-m", "planner", "run", *argv[2:]],
            cwd=contract.parent.parent,
            env=fresh.driver_env(PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = _run_folder(runs)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "completed"
    assert (run_dir / "decisions.json").is_file()


@pytest.mark.timeout(1500)
def test_a_trial_cut_short_on_one_node_continues_from_its_checkpoint_on_another(tmp_path):
    with s3_server("checkpoints") as s3:
        runs, facts = _folders(tmp_path)
        contract = _contract(tmp_path / "experiment", facts, retries=1, exposure=6)
        nodes = [NodeSpec(num_cpus=1), NodeSpec(num_cpus=1, private=(str(runs),))]
        with LocalCluster(nodes, env=s3.keys) as cluster:
            worker = cluster.nodes[1].node_id
            env = cluster.driver_env(PYTHONPATH=str(REPO), **s3.keys)
            proc = _plan_run(
                contract, runs, env, "--address", cluster.address, "--storage", s3.uri("planner")
            )
            victim, stdout, stderr = _kill_when_started(cluster, proc, facts, 1, step=2)
        stored = s3.stored("planner/")
    assert proc.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    run_dir = _run_folder(runs)
    record = {r["trial_id"]: r for r in _records(run_dir)}[victim["trial_id"]]
    assert record["status"] == "completed" and record["attempts"] == 2, record
    assert record["resumed"] is True
    again = [json.loads(p.read_text()) for p in facts.glob(f"{victim['trial_id']}-2-*.json")]
    assert again and again[0]["node_id"] != worker
    # the second attempt began past the steps the first one had checkpointed on the lost node
    assert again[0]["first"] >= 3, again
    assert record["reports"][0]["step"] == again[0]["first"]
    rel = f"{run_dir.parent.name}/{run_dir.name}/{victim['trial_id']}/ckpt.json"
    assert f"planner/{rel}" in stored, stored


def _site_with_nodepkg(tmp_path: Path) -> Path:
    """A package only some nodes have: on the driver's path, and the nodes' given it."""
    site = tmp_path / "site"
    (site / "nodepkg").mkdir(parents=True)
    (site / "nodepkg" / "__init__.py").write_text("GAIN = 0.0\n")
    return site


def _needing_nodepkg(contract: Path) -> None:
    trainable = contract.parent / "spread_trainable.py"
    trainable.write_text("import nodepkg  # noqa: F401\n" + trainable.read_text())


@pytest.mark.timeout(1500)
def test_a_node_that_cannot_import_the_trainable_is_named_and_no_trial_runs_there(tmp_path):
    # tuning trials (placed by Ray Tune) and confirmation trials (placed by planner) alike: the
    # refused node is held for the whole run
    runs, facts = _folders(tmp_path)
    site = _site_with_nodepkg(tmp_path)
    # tuning trials long enough that Tune starts a second trial process while the first runs (a
    # short one's process is reused for every trial): that one would go to the free node. The six
    # confirmation trials queue for the head's one CPU however short they are.
    contract = _contract(
        tmp_path / "experiment", facts, retries=0, exposure=2, tuned=2, tune_step_s=3.0
    )
    _needing_nodepkg(contract)
    with LocalCluster(
        [NodeSpec(num_cpus=1, env={"PYTHONPATH": str(site)}), NodeSpec(num_cpus=2)]
    ) as cluster:
        env = cluster.driver_env(PYTHONPATH=f"{REPO}{os.pathsep}{site}")
        proc = _plan_run(contract, runs, env, "--address", cluster.address)
        stdout, stderr = proc.communicate(timeout=900)
        head, broken = (node.node_id for node in cluster.nodes)
    assert proc.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    named = [line for line in stdout.splitlines() if broken[:12] in line]
    assert len(named) == 1 and "No module named 'nodepkg'" in named[0], stdout
    run_dir = _run_folder(runs)
    records = _records(run_dir)
    phases = {r["phase"] for r in records}
    assert phases == {"tune", "confirm"}, phases
    assert len([r for r in records if r["phase"] == "tune"]) == 4
    assert all(r["status"] == "completed" for r in records), records
    # every record keeps the node it ran on: the head, never the refused node with its 2 CPUs
    assert {r["node_id"] for r in records} == {head}
    ran = [json.loads(p.read_text())["node_id"] for p in facts.glob("*.json")]
    assert ran and set(ran) == {head}
    decided = json.loads((run_dir / "decisions.json").read_text())["decisions"]
    assert [d["decision"] for d in decided] == ["accept"], decided
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    refusals = [e for e in events if e["event"] == "node_refused"]
    assert [e["node_id"] for e in refusals] == [broken]
    assert not [line for line in (stdout + stderr).splitlines() if RAY_LINE.search(line)]


@pytest.mark.timeout(900)
def test_a_cluster_whose_every_node_is_refused_stops_before_any_trial(tmp_path):
    runs, facts = _folders(tmp_path)
    site = _site_with_nodepkg(tmp_path)
    contract = _contract(tmp_path / "experiment", facts, retries=0, exposure=2, tuned=2)
    _needing_nodepkg(contract)
    with LocalCluster([NodeSpec(num_cpus=1)]) as cluster:  # the driver's own node lacks it too
        env = cluster.driver_env(PYTHONPATH=f"{REPO}{os.pathsep}{site}")
        proc = _plan_run(contract, runs, env, "--address", cluster.address)
        stdout, stderr = proc.communicate(timeout=600)
        (head,) = (node.node_id for node in cluster.nodes)
    assert proc.returncode == 3, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    said = [line for line in stderr.splitlines() if "no node of the Ray cluster" in line]
    assert len(said) == 1, stderr
    assert head[:12] in said[0] and "(the one the driver runs on)" in said[0]
    assert "No module named 'nodepkg'" in said[0]
    run_dir = _run_folder(runs)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "failed"
    assert not (run_dir / "trials.jsonl").exists() or not _records(run_dir)
    assert not list(facts.glob("*.json"))  # no trial started anywhere
    assert not [line for line in (stdout + stderr).splitlines() if RAY_LINE.search(line)]
