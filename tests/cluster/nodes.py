"""A real multi-node Ray cluster on loopback, for tests and benchmarks.

`LocalCluster` starts a head and N worker nodes with `ray start --block`, each
its own process session with its own temp dir, resources and ports, all on
127.0.0.1. It waits until every node is alive, exposes `.address`
("127.0.0.1:<gcs port>") for `ray.init(address=...)` or `plan run --address`,
can kill one node the way a machine dies (SIGKILL to the node's whole process
session), and tears down only what it started:

- never `ray stop` (that stops every Ray on the machine, other people's too);
- each node's `ray start --block` runs in a new session, so killing that
  process group ends the node's GCS, raylet, agents and workers;
- then a sweep kills any stray process whose command line names this cluster's
  own temp dir (a worker that outlived its raylet), and removes the dir;
- and should the owner die without tearing down (SIGKILL, a CI timeout), each
  node notices within a second and kills its own process group.

Every node reports 127.0.0.1, so Ray's servers bind to loopback only (see
`_RAY_START_ON_LOOPBACK`), and the cluster uses token auth with a token of its
own. `driver_env()` gives the environment a driver subprocess needs for both.

    with LocalCluster([NodeSpec(resources={"head_only": 1}),
                       NodeSpec(resources={"worker_slot": 2})]) as cluster:
        subprocess.run([..., "--address", cluster.address], env=cluster.driver_env())
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

LOOPBACK = "127.0.0.1"
# A driver's Ray resolves 127.0.0.1 to the machine's outside IP unless this is 0.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
# On a loaded machine a node's agents can take longer than Ray's 30 s to register,
# and the raylet then aborts. Real clusters rarely need these; shared CI boxes do.
STARTUP_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_agent_register_timeout_ms": "180000",
    "RAY_worker_register_timeout_seconds": "180",
}
# The raylet gives its dashboard agent a fixed 15 s to start. With
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) every Ray process
# compiles Ray from source, about 3x slower; a bytecode cache of our own, kept
# outside the virtualenv, brings a node's start back in budget.
PYCACHE = Path(tempfile.gettempdir()) / "planner-cluster-pycache"


def _python_env(env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


@dataclass(frozen=True)
class NodeSpec:
    """What one node offers: CPUs, GPUs (declared, not probed) and custom resources."""

    num_cpus: int = 1
    num_gpus: int = 0
    resources: dict[str, float] = field(default_factory=dict)
    # Folders this node does not share with the driver: it runs in a mount namespace of its own with
    # an empty tmpfs over each (as root: `unshare --mount`), as a machine without the driver's disk
    # would.
    private: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # set in this node's environment only


@dataclass
class Node:
    index: int
    spec: NodeSpec
    temp_dir: Path
    log: Path
    process: subprocess.Popen
    node_id: str | None = None

    @property
    def is_head(self) -> bool:
        return self.index == 0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def free_ports(n: int) -> list[int]:
    """n distinct ports free on loopback right now (held together, then released)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# `ray start`, except that 127.0.0.1 stays 127.0.0.1. Ray's CLI replaces a
# loopback --node-ip-address or --address with the machine's outside IP
# (services.resolve_ip_for_localhost) unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
# and with that variable it refuses to start a second node. Keeping the given
# address makes every node report 127.0.0.1, and Ray's servers then bind to
# loopback only. Test-only: a real cluster's nodes have real addresses.
_RAY_START_ON_LOOPBACK = (
    "import os, signal, sys, threading, time\n"
    "import ray._private.services as s\n"
    "s.resolve_ip_for_localhost = lambda host: host\n"
    # The node dies with the process that started the cluster, even when that
    # one is killed without running its teardown (SIGKILL, a CI timeout).
    "owner = int(os.environ['PLANNER_CLUSTER_OWNER'])\n"
    "def watch():\n"
    "    while True:\n"
    "        time.sleep(1.0)\n"
    "        try:\n"
    "            os.kill(owner, 0)\n"
    "        except ProcessLookupError:\n"
    "            os.killpg(0, signal.SIGKILL)\n"
    "threading.Thread(target=watch, daemon=True).start()\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(main())\n"
)

_PROBE = textwrap.dedent(
    """
    import json, sys, time, ray
    expected, timeout = int(sys.argv[2]), float(sys.argv[3])
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    deadline = time.monotonic() + timeout
    while True:
        nodes = ray.nodes()
        alive = [n for n in nodes if n["Alive"]]
        if len(alive) == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print("NODES=" + json.dumps([{"node_id": n["NodeID"], "alive": n["Alive"], "ip": n["NodeManagerAddress"],
                       "resources": n["Resources"]} for n in nodes]))
    """
)


class LocalCluster:
    """A head (nodes[0]) and worker nodes started with `ray start` on 127.0.0.1."""

    def __init__(
        self,
        nodes: list[NodeSpec],
        *,
        object_store_memory: int = 80 * 1024**2,
        env: dict[str, str] | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least a head node")
        self.specs = list(nodes)
        self.object_store_memory = object_store_memory
        self.extra_env = dict(env or {})
        # Short: Ray's Unix sockets live under it and AF_UNIX paths stop at 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp"))
        # Token auth with a token of this cluster's own: whatever ~/.ray/auth_token
        # (shared by everyone on this machine) holds or becomes cannot lock us out.
        self.auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.nodes: list[Node] = []
        self.port: int | None = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def address(self) -> str:
        if self.port is None:
            raise RuntimeError("the cluster is not started")
        return f"{LOOPBACK}:{self.port}"

    def driver_env(self, **extra: str) -> dict[str, str]:
        """Environment for a driver subprocess: loopback node IP, RAY_ADDRESS of this cluster."""
        env = _python_env({k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
        env.update(LOOPBACK_ENV)
        env.update(self.auth_env)
        env["RAY_ADDRESS"] = self.address
        env.update(extra)
        return env

    def start(self, timeout: float = 180.0, attempts: int = 2) -> LocalCluster:
        """Start the head, then each worker; a node that fails to come up is retried."""
        try:
            for index, spec in enumerate(self.specs):
                for attempt in range(1, attempts + 1):
                    try:
                        self._start_node(index, spec, timeout)
                        break
                    except (RuntimeError, TimeoutError):
                        self._discard(self.nodes.pop())
                        if attempt == attempts:
                            raise
            self.wait_for_nodes(len(self.specs), timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _node_env(self) -> dict[str, str]:
        # No RAY_* and no PYTHONPATH from the caller: a node knows only its own
        # environment, so code reaches its workers through runtime_env or not at all.
        env = _python_env(
            {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "PYTHONPATH"}
        )
        env.update(STARTUP_ENV)
        env.update(self.auth_env)
        env["PLANNER_CLUSTER_OWNER"] = str(os.getpid())
        env.update(self.extra_env)
        return env

    def _start_node(self, index: int, spec: NodeSpec, timeout: float) -> Node:
        temp_dir = self.root / f"n{index}"
        shutil.rmtree(temp_dir, ignore_errors=True)
        temp_dir.mkdir()
        head = index == 0
        ports = free_ports(8)
        cmd = [
            sys.executable,
            "-c",
            _RAY_START_ON_LOOPBACK,
            "start",
            "--block",
            f"--node-ip-address={LOOPBACK}",
            f"--num-cpus={spec.num_cpus}",
            f"--num-gpus={spec.num_gpus}",
            f"--resources={json.dumps(spec.resources)}",
            f"--temp-dir={temp_dir}",
            f"--object-store-memory={self.object_store_memory}",
            f"--node-manager-port={ports[1]}",
            f"--object-manager-port={ports[2]}",
            f"--dashboard-agent-listen-port={ports[3]}",
            f"--dashboard-agent-grpc-port={ports[4]}",
            f"--runtime-env-agent-port={ports[5]}",
            f"--metrics-export-port={ports[6]}",
            # 0/0: each worker binds a port the OS picks, so no range can collide.
            "--min-worker-port=0",
            "--max-worker-port=0",
            "--disable-usage-stats",
            "--log-style=record",
            # Fewer Python processes racing to start on a small machine: no
            # autoscaler (the nodes are fixed) and no log streaming to drivers.
            "--no-monitor",
            "--include-log-monitor=false",
        ]
        if head:
            self.port = ports[0]
            cmd += [
                "--head",
                f"--port={self.port}",
                "--include-dashboard=false",
                f"--dashboard-port={ports[7]}",
            ]
        else:
            cmd += [f"--address={self.address}"]
        if spec.private:  # exec'd in place: the node's process is still the session's leader
            mounts = " && ".join(
                f"mount -t tmpfs -o size=256m tmpfs {shlex.quote(d)}" for d in spec.private
            )
            cmd = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f'{mounts} && exec "$@"',
                "node",
                *cmd,
            ]
        log = self.root / f"n{index}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                cmd,
                cwd=temp_dir,  # workers start here: not the driver's folder, not the repo
                env={**self._node_env(), **spec.env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        node = Node(index, spec, temp_dir, log, process)
        self.nodes.append(node)
        self._wait_until_started(node, timeout)
        node.node_id = self._raylet_node_id(node)
        return node

    def _wait_until_started(self, node: Node, timeout: float) -> None:
        """`ray start` prints this once its node registered with the GCS."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Ray runtime started" in node.log.read_text(errors="replace"):
                return
            if not node.alive:
                raise RuntimeError(f"node {node.index} exited while starting:\n{self._tail(node)}")
            time.sleep(0.3)
        raise TimeoutError(
            f"node {node.index} did not start in {timeout:.0f} s:\n{self._tail(node)}"
        )

    def _raylet_node_id(self, node: Node) -> str:
        for proc in self._own_processes(node):
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                continue
            if cmdline and Path(cmdline[0]).name == "raylet":
                for arg in cmdline:
                    if arg.startswith("--node_id="):
                        return arg.split("=", 1)[1]
        raise RuntimeError(f"node {node.index} started but its raylet is gone:\n{self._tail(node)}")

    @staticmethod
    def _tail(node: Node, chars: int = 3000) -> str:
        try:
            return node.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def nodes_info(self, expected: int | None = None, timeout: float = 0.0) -> list[dict]:
        """ray.nodes() seen by a short-lived driver; waits up to `timeout` for `expected` alive."""
        expected = len(self.specs) if expected is None else expected
        result = subprocess.run(
            [sys.executable, "-c", _PROBE, self.address, str(expected), str(timeout)],
            env=self.driver_env(),
            capture_output=True,
            text=True,
            timeout=timeout + 60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"probing the cluster failed:\n{result.stderr[-3000:]}")
        line = next((x for x in result.stdout.splitlines() if x.startswith("NODES=")), None)
        if line is None:
            raise RuntimeError(
                f"probing the cluster printed no "
                f"nodes:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
            )
        return json.loads(line.removeprefix("NODES="))

    def wait_for_nodes(self, expected: int, timeout: float = 120.0) -> list[dict]:
        nodes = self.nodes_info(expected, timeout)
        alive = [n for n in nodes if n["alive"]]
        if len(alive) != expected:
            raise TimeoutError(
                f"{len(alive)} of {expected} nodes alive after {timeout:.0f} s: {nodes}"
            )
        return alive

    def node_index(self, node_id: str) -> int | None:
        """Which of this cluster's nodes has this Ray node id (None: not ours)."""
        return next((n.index for n in self.nodes if n.node_id == node_id), None)

    # -- failure and teardown ---------------------------------------------

    def _own_processes(self, node: Node | None = None) -> list[psutil.Process]:
        """Processes of one node (or all nodes): the session's members and anything naming its temp
        dir."""
        nodes = [node] if node is not None else self.nodes
        sessions = {n.process.pid for n in nodes}
        marks = [str(n.temp_dir) for n in nodes]
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if proc.pid == os.getpid():
                    continue
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                if os.getsid(proc.pid) in sessions or any(
                    m in arg for arg in (proc.info["cmdline"] or []) for m in marks
                ):
                    found.append(proc)
            except (psutil.Error, ProcessLookupError, PermissionError):
                continue
        return found

    def kill_node(self, index: int) -> None:
        """End one node at once, as if its machine died: SIGKILL to all its processes."""
        self._kill(self.nodes[index])

    def restart_node(self, index: int, timeout: float = 180.0) -> Node:
        """Kill node `index` if it runs, start a fresh one with the same spec, wait until all are
        alive."""
        old = self.nodes[index]
        self._discard(old)
        self.nodes.remove(old)
        node = self._start_node(index, old.spec, timeout)
        self.nodes.sort(key=lambda n: n.index)
        self.wait_for_nodes(len(self.specs), timeout=timeout)
        return node

    def _discard(self, node: Node) -> None:
        self._kill(node)
        shutil.rmtree(node.temp_dir, ignore_errors=True)

    def _kill(self, node: Node) -> None:
        try:
            os.killpg(node.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for proc in self._own_processes(node):
            try:
                proc.kill()
            except psutil.Error:
                pass
        try:
            node.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """Kill this cluster's processes (workers first, then the head), and remove its temp dir."""
        for node in reversed(self.nodes):
            self._kill(node)
        deadline = time.monotonic() + 10
        while self._own_processes() and time.monotonic() < deadline:
            for proc in self._own_processes():
                try:
                    proc.kill()
                except psutil.Error:
                    pass
            time.sleep(0.2)
        shutil.rmtree(self.root, ignore_errors=True)

    def leftover_processes(self) -> list[int]:
        """Pids still running that belong to this cluster (for tests of the teardown)."""
        return [p.pid for p in self._own_processes() if _running(p)]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- a small contract whose trainable must be shipped -------------------------

SMALL_TRAINABLE = '''"""A quick synthetic trainable for cluster runs: it records where each attempt ran.

Each attempt writes trials/<id>/node-<pid>-<ns>.json: its Ray node, the module file that ran,
the GPUs Ray gave it (ray.get_gpu_ids(), CUDA_VISIBLE_DEVICES) and when it started and ended.
"""

import json
import math
import os
import random
import time


def _write(path, facts):
    with open(path + ".tmp", "w") as f:
        json.dump(facts, f)
    os.replace(path + ".tmp", path)


def train(config, trial):
    import ray

    facts = {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
             "module_file": __file__, "cwd": os.getcwd(), "phase": trial.phase, "seed": trial.seed,
             "trial_id": trial.id, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
             "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "start": time.time(), "end": None}
    os.makedirs(trial.dir, exist_ok=True)
    path = os.path.join(trial.dir, f"node-{facts['pid']}-{time.time_ns()}.json")
    _write(path, facts)
    recipe = config["recipe"]
    rng = random.Random(trial.seed)
    miss = abs(math.log10(recipe["lr"]) + 2.0) * 0.05
    for step in range(1, trial.budget + 1):
        time.sleep(config["step_s"])
        acc = recipe["level"] - miss + 0.02 * step / trial.budget + rng.gauss(0.0, 0.01)
        if trial.phase == "tune":
            trial.report(step, val_acc=acc)
        else:
            trial.report(step, val_acc=acc, test_acc=acc)
    _write(path, {**facts, "end": time.time()})
'''


def write_small_contract(
    folder: Path,
    *,
    name: str = "cluster-small",
    trials_per_arm: int = 4,
    seeds: tuple[int, ...] = (0, 1, 2, 3),
    exposure: int = 3,
    step_s: float = 0.5,
    resources: dict | None = None,
    retries: int = 0,
) -> Path:
    """A two-arm contract with a synthetic trainable in `folder` (on no node's path)."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster_trainable.py").write_text(SMALL_TRAINABLE)
    from tests._runs import synthetic_contract

    contract = synthetic_contract(
        name=name,
        hypothesis="The treatment recipe raises val_acc by more than 0.05.",
        trainable="cluster_trainable:train",
        config={"values": {"recipe": {"name": "a", "level": 0.5, "lr": 0.01}, "step_s": step_s}},
        seeds=list(seeds),
        budget={"exposure": exposure, "resources": resources or {"cpu": 1, "gpu": 0}},
        failures={"retries": retries},
    )
    if trials_per_arm:
        contract["tuning"] = {
            "trials_per_arm": trials_per_arm,
            "seeds": [1000],
            "sampler": {"name": "tpe", "seed": 0},
            "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
        }
    path = folder / "contract.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path
