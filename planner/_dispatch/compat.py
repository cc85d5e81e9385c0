"""Every private name of Ray and Optuna that planner uses, each behind one named function here.

Where Ray or Optuna offers a public API for what planner needs, planner calls it and this module has
no part in it. What is left is of two kinds, both listed in `PRIVATE_NAMES`:

- NEEDED: planner would behave differently without it (a SIGTERM while Ray starts would end the
  process as an internal error; after a lost GCS the embedded Ray's processes would be left behind).
  Checked when this module is imported: a Ray without one is refused with a sentence naming the
  package, its version and the missing name.
- SPEED: it only makes a run faster or lighter (Ray's start, Tune's bookkeeping of a trial). A Ray
  without one runs as Ray itself would: each patch below looks its names up when it is entered and
  leaves Ray as it is when one is missing. `missing()` lists them; the installed Ray is held to none
  missing by a test.

At import the installed Ray and Optuna versions are also checked against the range this module was
written and tested for (pyproject's), before anything else: the error names the package, its version
and the range.

Imported when a command starts Ray (by `session`, lazily) or when tuning starts (by `tune`):
importing it imports Ray's core, never Ray Tune, AIR or Optuna, whose names are looked up as their
patch is entered."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ray

from planner._core.errors import RunError

# The versions this module was written and tested for: pyproject.toml's ranges (`.ci/lowest.sh` runs
# the lowest, CI's own resolution the newest). Lower bound included, upper bound excluded.
SUPPORTED = {"ray": ((2, 41), (3,)), "optuna": ((4, 0), (6,))}
# The Ray the SPEED patches were written and measured on: an older Ray in the range may lack some
# of them (Ray 2.41 has neither the dashboard's dependency check nor `ray._common`) and runs
# without them.
SPEED_WRITTEN_FOR = (2, 60)

NEEDED, SPEED = "needed", "speed"
ABSENT = object()  # what `lookup` returns for a name the installed package does not have


@dataclass(frozen=True)
class PrivateName:
    """A private name: `attribute` (dotted; "" for the module itself) of `module`, in `package`."""

    package: str
    module: str
    attribute: str
    kind: str

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.attribute}" if self.attribute else self.module


def _names(package: str, kind: str, *dotted: str) -> tuple[PrivateName, ...]:
    out = []
    for name in dotted:
        module, _, attribute = name.partition(":")
        out.append(PrivateName(package, module, attribute, kind))
    return tuple(out)


# Instance attributes (a Tune Trial's, an OptunaSearch's, a Ray node's) cannot be looked up without
# an instance: they are named in the functions that use them, each of which tolerates their absence.
PRIVATE_NAMES: tuple[PrivateName, ...] = (
    *_names(
        "ray",
        NEEDED,
        "ray._private.utils:set_sigterm_handler",
        "ray._private.worker:_global_node",
        "ray._private.node:Node.kill_all_processes",
    ),
    *_names(
        "ray",
        SPEED,
        "ray._private.services:get_node",
        "ray._raylet:GcsClient",  # its get_all_node_info is an instance's (the try in its patch)
        "ray._private.parameter:RayParams",
        "ray._private.node:Node.start_api_server",
        "ray._private.utils:get_dashboard_dependency_error",
        "ray._common.usage.usage_lib",
        "ray.air._internal.usage:tag_callbacks",
        "ray.air._internal.usage:record_extra_usage_tag",
        "ray.air._internal.usage:TagKey.AIR_CALLBACKS",
        "ray.air.execution._internal.actor_manager:RayActorManager.remove_actor",
        "ray.tune.registry:_Registry.get",
        "ray.tune.registry:_Registry.contains",
        "ray.tune.execution.class_cache:_ActorClassCache.get",
        "ray.tune.execution.class_cache:DEFAULT_ENV_VARS",
        "ray.tune.execution.class_cache:ENV_VARS_TO_PROPAGATE",
    ),
)

# The logger Ray's start-up code logs on (ray.init clears the `ray` logger's handlers meanwhile).
RAY_STARTUP_LOGGER = "ray._private"
# Modules both ray.init and Ray Tune import: imported first, before the two run side by side.
SHARED_WITH_RAY_INIT = ("ray._common.usage.usage_lib", "ray.dashboard")


def version_tuple(text: str) -> tuple[int, ...]:
    """(2, 60, 0) for "2.60.0" or "2.60.0rc1"; () for text that does not start with a version."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(part) for part in match.groups() if part is not None) if match else ()


def _range_text(package: str) -> str:
    low, high = SUPPORTED[package]
    return f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"


def version_problem(package: str, installed: str) -> str | None:
    """The sentence for `package` at `installed`, a version outside the supported range; or None."""
    low, high = SUPPORTED[package]
    if low <= version_tuple(installed) < high:
        return None
    return (
        f"{package} {installed} is installed, but planner supports {package}{_range_text(package)} "
        f"(install a version in that range, e.g. pip install '{package}{_range_text(package)}')"
    )


def lookup(name: PrivateName) -> Any:
    """The object `name` names in the installed package (it may be None, as Ray's node is before Ray
    starts), or ABSENT when it is not there."""
    try:
        owner: Any = importlib.import_module(name.module)
    except ImportError:
        return ABSENT
    for part in filter(None, name.attribute.split(".")):
        if not hasattr(owner, part):
            return ABSENT
        owner = getattr(owner, part)
    return owner


def _installed(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def missing_sentence(name: PrivateName) -> str:
    """The one sentence for a NEEDED private name the installed package does not have."""
    return (
        f"{name.package} {_installed(name.package)} has no {name.dotted}, which planner needs; "
        f"install {name.package}{_range_text(name.package)} at a version planner was tested with"
    )


def missing(kind: str | None = None) -> list[PrivateName]:
    """The names of `PRIVATE_NAMES` (of `kind`, or all) that the installed packages lack."""
    return [
        name
        for name in PRIVATE_NAMES
        if (kind is None or name.kind == kind) and lookup(name) is ABSENT
    ]


def check_installed() -> None:
    """RunError with one sentence when Ray's or Optuna's version is outside the range, or a NEEDED
    name is missing (the first found). Optuna's version is read from its metadata: Optuna is not
    imported here."""
    for package in SUPPORTED:
        installed = _installed(package)
        problem = version_problem(package, installed) if installed[:1].isdigit() else None
        if problem is not None:
            raise RunError(problem)
    for name in missing(NEEDED):
        raise RunError(missing_sentence(name))


check_installed()


# ---------------------------------------------------------------- patching a library's name for a b


@contextmanager
def wrapped(owner: Any, name: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    """`owner.name` is `wrap(original)` while the block runs, then the original again; an `owner` (a
    library's module or class) without `name`, or None, is left as it is: what is swapped for speed
    is never needed."""
    original = getattr(owner, name, None) if owner is not None else None
    if original is None:
        yield
        return
    with replaced(owner, name, wrap(original)):
        yield


@contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name` is `value` while the block runs, then what it was again."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _module(dotted: str) -> Any:
    try:
        return importlib.import_module(dotted)
    except ImportError:
        return None


# ---------------------------------------------------------------- Ray's core: start, signals, shutd


@contextmanager
def ray_sigterm_handler_not_installed() -> Iterator[None]:
    """While the block runs (ray.init), Ray does not install its own SIGTERM handler (`sys.exit(15)`
    wherever it is)."""
    with wrapped(ray._private.utils, "set_sigterm_handler", lambda original: lambda handler: None):
        yield


def kill_ray_processes() -> None:
    """After a lost GCS: what is left of the embedded Ray's processes ended, without a wait."""
    node = ray._private.worker._global_node
    if node is not None:
        node.kill_all_processes(check_alive=False, allow_graceful=False)


def kill_autoscaler_monitor() -> None:
    """The embedded head's autoscaler monitor killed now (it does not exit on SIGTERM, and
    ray.shutdown gives it a second before killing it anyway); it holds nothing of a run's. A Ray
    whose node does not list it is left as it is."""
    node = ray._private.worker._global_node
    processes = getattr(node, "all_processes", None) if node is not None else None
    monitors: list[Any] = processes.get("monitor", []) if isinstance(processes, dict) else []
    for info in monitors:
        if info.process.poll() is None:
            info.process.kill()
            info.process.wait(timeout=5)


def embedded_process_pids() -> list[int]:
    """The pids of the processes the embedded Ray's node started (GCS, raylet, its agents and
    workers' parents), as its node lists them; none when this Ray's node does not list them."""
    node = ray._private.worker._global_node
    processes = getattr(node, "all_processes", None) if node is not None else None
    if not isinstance(processes, dict):
        return []
    return [info.process.pid for infos in processes.values() for info in infos]


@contextmanager
def node_registration_polled(every_s: float = 0.02, within_s: float = 30.0) -> Iterator[None]:
    """While an embedded Ray starts, its wait for the new raylet to register with the GCS polls
    every `every_s` instead of every second.

    ray.init asks the GCS for the node it started (`ray._private.services.get_node`); asked before
    the raylet has registered (once its agents are up), Ray's C++ client waits a whole second before
    it asks again, so Ray's start took 1 or 2 s longer than the raylet needed. Here the new GCS's
    node list is read every `every_s` until it holds a node (at most `within_s`; an embedded Ray's
    own GCS holds only the one it started), then Ray's own call answers at once. Should any of this
    not be there in the installed Ray, Ray's own call runs alone."""
    gcs_client = getattr(_module("ray._raylet"), "GcsClient", None)

    def polled(original):
        def get_node(gcs_address, node_id):
            try:
                client = gcs_client(address=gcs_address)
                deadline = time.monotonic() + within_s
                while time.monotonic() < deadline:
                    if client.get_all_node_info(timeout=2):  # the embedded Ray's own GCS: its node
                        break
                    time.sleep(every_s)
            except Exception:  # Ray's own wait, below, says what went wrong
                pass
            return original(gcs_address, node_id)

        return get_node

    services = _module("ray._private.services") if gcs_client is not None else None
    with wrapped(services, "get_node", polled):
        yield


@contextmanager
def without_idle_head_processes(log_to_driver: bool) -> Iterator[None]:
    """While an embedded Ray starts, it starts none of the three head processes a run on one machine
    leaves idle: the autoscaler's monitor (an embedded Ray has nothing to scale), the log monitor
    (it streams the workers' log files to a driver that asked for them, and this one did not:
    `log_to_driver=False`; the files stay in Ray's session folder), and the dashboard's API server
    (`include_dashboard=False` still starts it, to load Ray's usage-statistics module alone, and
    ray.init waits for it to come up).

    Each is a Python process booting beside the GCS, the raylet, its agents and the first workers on
    the same CPUs, and `ray.shutdown` has fewer processes to stop without them. `ray status` and
    Ray's state API (`ray list`), which read them, are not used by planner. Names missing in the
    installed Ray leave Ray's own start as it is.

    The raylet's dashboard agent (metrics, logs and events for the dashboard, which an embedded Ray
    does not run) starts `--minimal`, as it does where Ray is installed without its dashboard's
    packages: to decide, ray.init imports those packages (aiohttp, grpc, opencensus, opentelemetry,
    prometheus_client) into the driver, and where they are all installed the full agent imports them
    again while the raylet waits."""
    parameter = _module("ray._private.parameter")
    params_class = getattr(parameter, "RayParams", None)
    node_class = getattr(_module("ray._private.node"), "Node", None)
    if params_class is None or node_class is None or not hasattr(node_class, "start_api_server"):
        yield
        return

    def ray_params(*args, **kwargs):
        params = params_class(*args, **kwargs)
        if hasattr(params, "no_monitor") and hasattr(params, "include_log_monitor"):
            params.no_monitor = True
            params.include_log_monitor = bool(log_to_driver)
        return params

    def start_api_server(self, **kwargs):
        return (
            None  # `_webui_url` stays None, as a Node leaves it before the API server would set it
        )

    def no_dashboard_packages():
        return ImportError("an embedded Ray runs no dashboard: its agent starts --minimal")

    with (
        replaced(parameter, "RayParams", ray_params),
        replaced(node_class, "start_api_server", start_api_server),
        wrapped(
            _module("ray._private.utils"),
            "get_dashboard_dependency_error",
            lambda original: no_dashboard_packages,
        ),
    ):
        yield


# ---------------------------------------------------------------- Ray Tune and Optuna: a tuning's b


def forget_trial_result(trial: Any) -> None:
    """An ended Tune trial lets go of its last result's future (else an empty last result is fetched
    again from the actor) and of its unresolved config (kept for Tune's own restore, which planner
    never does)."""
    trial._default_result_or_future = None
    if hasattr(trial, "_Trial__unresolved_config"):
        trial._Trial__unresolved_config = {}


def cache_snapshot_entry(
    trial: Any, trial_entry: dict[str, Any], metadata_entry: dict[str, Any]
) -> None:
    """The JSON Tune caches for an ended trial's entry in its experiment snapshot, set to these."""
    trial._state_json = json.dumps(trial_entry)
    trial.run_metadata._cached_json = json.dumps(metadata_entry)


@contextmanager
def callbacks_tagged_without_integrations(custom: type) -> Iterator[None]:
    """While Tune runs, its usage tag for the run's callbacks is recorded without importing every
    logger integration Ray knows of.

    Tune's `tag_callbacks` imports the MLflow, W&B, Comet and Aim callbacks (and so MLflow, W&B...
    when they are installed) only to tell a built-in callback from a custom one, on every tuning
    phase's start. A callback list made only of `custom` (planner's `Recorder`, which Ray counts as
    a custom callback) gets that same tag here. Any other callback list goes to Ray's function
    unchanged; a Ray without the function is left alone."""
    usage = _module("ray.air._internal.usage")
    tag_key = getattr(getattr(usage, "TagKey", None), "AIR_CALLBACKS", None)
    record = getattr(usage, "record_extra_usage_tag", None)

    def tagged(original):
        def tag_callbacks(callbacks):
            if not callbacks or not all(type(callback) is custom for callback in callbacks):
                return original(callbacks)
            record(tag_key, json.dumps({"CustomCallback": len(callbacks)}))
            return True

        return tag_callbacks

    with wrapped(
        usage if record is not None and tag_key is not None else None, "tag_callbacks", tagged
    ):
        yield


@contextmanager
def cancelled_actors_forgotten() -> Iterator[None]:
    """While Tune runs, an actor request it cancels takes the tasks queued for that actor with it.

    With reused actors Tune requests a new actor for every trial and cancels the request when it
    hands the trial a cached actor instead; Ray's actor manager drops the request but keeps the
    tasks queued for it (the trial's setup, with its config) in
    `_pending_actors_to_enqueued_actor_tasks` until the run ends: a few KiB a trial. A queue is
    dropped only for a request that was pending and is no longer (never for an actor that started:
    its queue was handed to it). A Ray without that manager is left alone."""
    manager = getattr(_module("ray.air.execution._internal.actor_manager"), "RayActorManager", None)

    def with_queue(original):
        def remove_actor(self, tracked_actor, *args, **kwargs):
            pending = getattr(self, "_pending_actors_to_attrs", {})
            was_pending = tracked_actor in pending
            try:
                return original(self, tracked_actor, *args, **kwargs)
            finally:
                queues = getattr(self, "_pending_actors_to_enqueued_actor_tasks", None)
                if was_pending and tracked_actor not in pending and queues is not None:
                    queues.pop(tracked_actor, None)

        return remove_actor

    with wrapped(manager, "remove_actor", with_queue):
        yield


@contextmanager
def trainable_looked_up_once() -> Iterator[None]:
    """While Tune runs, its registry answers for the run's trainable from what it read first.

    Tune registers the trainable in Ray's GCS (key-value store) when the Tuner is built and then,
    for every trial, asks the GCS whether it is there (a new Trial) and reads and unpickles it again
    (twice more as the trial starts): three round trips to the GCS and a cloudpickle load a trial.
    Nothing re-registers it while the Tuner runs, so the first answer for each trainable is kept for
    the block (a lookup that found nothing is asked again). Other categories of the registry, and a
    Ray without it, are left alone."""
    registry = _module("ray.tune.registry")
    registry_class = getattr(registry, "_Registry", None)
    trainable_class = getattr(registry, "TRAINABLE_CLASS", None)
    if registry_class is None or trainable_class is None:
        yield
        return
    found: dict = {}

    def cached_get(original):
        def get(self, category, key):
            if category != trainable_class:
                return original(self, category, key)
            if (id(self), key) not in found:
                found[(id(self), key)] = original(self, category, key)
            return found[(id(self), key)]

        return get

    def cached_contains(original):
        def contains(self, category, key):
            return (category == trainable_class and (id(self), key) in found) or original(
                self, category, key
            )

        return contains

    with (
        wrapped(registry_class, "get", cached_get),
        wrapped(registry_class, "contains", cached_contains),
    ):
        yield


@contextmanager
def trial_actors_on_inherited_environment(inherited: dict[str, str] | None) -> Iterator[None]:
    """While Tune runs on an embedded Ray, its trial actors take a worker Ray has started already.

    Tune registers its trial actor class with a runtime_env of its own (`_ActorClassCache.get`:
    env_vars PL_DISABLE_FORK, and the driver's AWS_* and Ray Train variables when set); a worker
    serves only actors and tasks of its own runtime_env, so every first Tune actor waited for a new
    worker process to start with it. When each of those variables already has the same value in the
    environment the embedded Ray's workers inherited (`inherited`; WORKER_ENV carries Tune's
    defaults), the class is registered without a runtime_env: the actors run in the environment they
    would have had, on a worker that is up. Otherwise (a cluster: `inherited` is None; a variable
    that differs) Tune's own registration runs; a Ray without these names is left alone."""
    class_cache = _module("ray.tune.execution.class_cache")
    cache_class = getattr(class_cache, "_ActorClassCache", None)
    defaults = getattr(class_cache, "DEFAULT_ENV_VARS", None)
    propagated = getattr(class_cache, "ENV_VARS_TO_PROPAGATE", None)
    if inherited is None or cache_class is None or defaults is None or propagated is None:
        yield
        return

    def inheriting(original):
        def get(self, trainable_cls):
            env_vars = {
                **defaults,
                **{name: os.environ[name] for name in propagated if name in os.environ},
            }
            cache = getattr(self, "_cache", None)
            if (
                cache is None
                or trainable_cls in cache
                or any(inherited.get(k) != v for k, v in env_vars.items())
            ):
                return original(self, trainable_cls)
            cache[trainable_cls] = ray.remote(trainable_cls)
            return cache[trainable_cls]

        return get

    with wrapped(cache_class, "get", inheriting):
        yield
