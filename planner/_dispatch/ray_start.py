"""Starting or joining Ray for a command: an embedded local Ray (its system config, its
environment, its authentication token kept out of a HOME it cannot write, retried starts) or a
cluster at an address (its runtime_env, a connection refused said in one sentence); and Ray Tune's
import beside an embedded Ray's start."""

from __future__ import annotations

import contextlib
import importlib
import os
import secrets
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

from planner._core.errors import RunError, disk_error
from planner._core.lazy import lazy_import
from planner._dispatch.cluster import resolve_address, resources_for, runtime_env_for, unfit_reason
from planner._dispatch.ray_logs import RAY_LOG, ray_logs_to_run_folder, stderr_to_ray_log
from planner._dispatch.worker import WORKER_ENV

ray = lazy_import("ray")  # imported when a command starts or joins Ray
# Ray's private names, checked against the installed Ray when first used (as Ray starts)
compat = lazy_import("planner._dispatch.compat")


def start_ray(
    address: str | None,
    search_path: list[str],
    runs_dir: Path,
    log_to_driver: bool = False,
    contract=None,
    contract_dir: Path | None = None,
    log_dir: Path | None = None,
) -> bool:
    """Connect to `address` (or RAY_ADDRESS) or start an embedded local Ray; True when we started
    it.

    With `log_dir` (the run folder), Ray's own log lines go to `log_dir/ray.log`
    (`ray_logs_to`), never to the terminal.

    On a cluster the workers get the code through runtime_env (planner._dispatch.cluster):
    the contract's folder as working_dir, the trainable's package and planner
    itself as py_modules; and a trial request no node can ever hold is refused
    here instead of waiting forever.
    """
    if ray.is_initialized():
        return False
    with ray_logs_to_run_folder(log_dir):
        address = resolve_address(address)
        if address:
            runtime_env = runtime_env_for(
                contract_dir or Path.cwd(),
                contract.trainable if contract else None,
                runs_dir=runs_dir,
                env_vars=WORKER_ENV,
            )
            with stderr_to_ray_log(log_dir):  # Ray's C++ core logs a refused connection on fd 2
                try:
                    ray.init(
                        address=address,
                        runtime_env=runtime_env,
                        log_to_driver=log_to_driver,
                        configure_logging=False,
                    )
                except Exception as error:  # ConnectionError and friends: a sentence, not a trace
                    raise RunError(connect_failure(address, error, log_dir=log_dir)) from None
            if contract is not None:
                problem = unfit_reason(resources_for(contract.budget), ray.nodes())
                if problem is not None:
                    raise RunError(problem)
            return True
        pythonpath = os.pathsep.join(
            search_path + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        # In the environment while the embedded Ray starts: its processes, and every worker the
        # raylet starts, inherit them. A job-level runtime_env would say the same, but a worker Ray
        # prestarts at its start (one per CPU) serves only jobs without one: with it, every first
        # trial waited for a worker to start.
        global _embedded_environ
        with environ({**WORKER_ENV, "PYTHONPATH": pythonpath, **token_outside_home()}):
            start_local_ray(log_to_driver=log_to_driver, _system_config=EMBEDDED_SYSTEM_CONFIG)
            _embedded_environ = dict(os.environ)
        return True


# An embedded Ray keeps an idle worker a minute, not a second, before it ends it as one too many
# (Ray ends idle workers beyond one per CPU): the workers warmed for the confirmation during the
# tuning's tail (the tuning's actors hold the CPUs meanwhile) are still there when its first trials
# are sent, instead of each first trial waiting for a new worker process to start. Idle
# workers hold memory only; Ray's shutdown ends them.
#
# Its local sockets are tried every 20 ms, not every second, as often as it takes for the same ten
# seconds Ray allows (RAY_CONNECT_WAIT_MS): the raylet connects to its object store, which it has
# just started in a thread of its own, and when the store is not yet listening Ray's client sleeps
# a whole second before it tries again, a loss common enough at an embedded Ray's start to be
# worth the tighter loop (docs/speed.md). The workers' and the driver's connections to the raylet
# go through the same client, with the same ten seconds.
RAY_CONNECT_WAIT_MS = (
    10 * 1000
)  # Ray's own: raylet_client_num_connect_attempts 10 x ..._timeout_milliseconds 1000
CONNECT_EVERY_MS = 20
EMBEDDED_SYSTEM_CONFIG = {
    "idle_worker_killing_time_threshold_ms": 60_000,
    "raylet_client_connect_timeout_milliseconds": CONNECT_EVERY_MS,
    "raylet_client_num_connect_attempts": RAY_CONNECT_WAIT_MS // CONNECT_EVERY_MS,
}


@contextmanager
def importing_meanwhile(module: str | None):
    """`module` imported in a thread while the block runs (an embedded Ray's start: the driver
    mostly waits for the GCS and the raylet to come up), joined when it ends: Ray Tune's import
    (0.6 s of the driver's CPU) no longer follows Ray's start (1 s) but runs beside it. Python's
    import locks are per module, so the two only wait for each other on a module both import; the
    ones they share today are imported here first. A failed import is left for the code that needs
    the module, which imports it again and fails as it would have without this (the error is not
    swallowed: it is raised there)."""
    if module is None:
        yield
        return
    for name in compat.SHARED_WITH_RAY_INIT:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    thread = threading.Thread(
        target=_import_quietly, args=(module,), name="planner-import", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import_quietly(module: str) -> None:
    with contextlib.suppress(BaseException):  # raised again where the module is used (above)
        importlib.import_module(module)


_embedded_environ: dict[str, str] | None = (
    None  # what the workers of the embedded Ray started here inherited
)


def forget_embedded_environ() -> None:
    """The embedded Ray is shut down: its workers' environment is no longer anyone's."""
    global _embedded_environ
    _embedded_environ = None


def embedded_worker_environ() -> dict[str, str] | None:
    """The environment every worker of the embedded Ray this process started inherits (None when
    none was started, or it joined a cluster, or that Ray was shut down)."""
    return _embedded_environ if ray.is_initialized() else None


@contextmanager
def environ(values: dict[str, str], *, override: bool = True):
    """`values` in this process's environment while the block runs, then every one of them as it was
    (unset again when it was unset). With `override=False` a variable already set keeps its
    value."""
    before = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if override or name not in os.environ:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, was in before.items():
            if was is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = was


# How Ray words a connection its GCS refused for the token: the ConnectionError ray.init raises


# carries the AuthenticationError only as text, in its cause's formatted traceback.
_REFUSED = ("InvalidAuthToken", "Authentication token is missing or incorrect")
# The driver's own token problems, raised before anything is sent (an AuthenticationError of its
# own).
_NO_TOKEN = "no authentication token was found"
_BAD_TOKEN_FILE = "RAY_AUTH_TOKEN_PATH is set but"


def _error_chain(error: BaseException | None):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def connect_failure(
    address: str, error: BaseException, environ=None, *, log_dir: Path | None = None
) -> str:
    """The one sentence for a `ray.init(address=...)` that failed with `error`.

    A refusal for authentication says so and what to set. With an explicit address Ray sends a
    token only when the driver's environment has RAY_AUTH_MODE set to token (RAY_AUTH_TOKEN alone
    sends nothing); the token comes from RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names,
    else ~/.ray/auth_token. Neither the token nor its file is printed (the redactor would cut them
    anyway), and no sentence writes NAME=value for these names, which the redactor would cut too.
    """
    environ = os.environ if environ is None else environ
    chain = list(_error_chain(error))
    texts = [f"{type(e).__name__}: {e}" for e in chain]
    where = f" (Ray's own lines: {Path(log_dir) / RAY_LOG})" if log_dir is not None else ""
    refused = any(mark in text for text in texts for mark in _REFUSED)
    if not refused and not any(type(e).__name__ == "AuthenticationError" for e in chain):
        return f"cannot connect to the Ray cluster at {address}: {error}{where}"
    if not refused:  # the driver had no token to send
        if any(_BAD_TOKEN_FILE in text for text in texts):
            problem = "RAY_AUTH_TOKEN_PATH names a file that cannot be read or is empty"
        elif any(_NO_TOKEN in text for text in texts):
            problem = (
                "no token was found in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
            )
        else:
            problem = f"Ray says: {str(error).split('. ')[0]}"
        return (
            f"cannot connect to the Ray cluster at {address}: token authentication is on "
            f"(RAY_AUTH_MODE is "
            f"token) but {problem}; set RAY_AUTH_TOKEN to the cluster's token, or "
            f"RAY_AUTH_TOKEN_PATH to a "
            "file that holds it"
        )
    # Ray itself sets RAY_AUTH_MODE to token in this process when it joins `auto` and finds a token.
    if environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return (
            f"the Ray cluster at {address} refused the connection: authentication failed, because "
            f"the cluster "
            "uses token authentication and the driver sent no token (Ray sends one only when "
            "RAY_AUTH_MODE is "
            "token); set RAY_AUTH_MODE to token, and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to "
            "the cluster's "
            f"token, in the environment of plan run{where}"
        )
    if environ.get("RAY_AUTH_TOKEN", "").strip():
        source = "RAY_AUTH_TOKEN"
    elif environ.get("RAY_AUTH_TOKEN_PATH", "").strip():
        source = "the file RAY_AUTH_TOKEN_PATH names"
    else:
        source = "~/.ray/auth_token"
    return (
        f"the Ray cluster at {address} refused the connection: authentication failed, because the "
        f"token the "
        f"driver sent (from {source}) is not the cluster's; set RAY_AUTH_TOKEN (or "
        f"RAY_AUTH_TOKEN_PATH) to the "
        f"token the cluster was started with (`ray get-auth-token` on the head prints it){where}"
    )


def token_outside_home() -> dict[str, str]:
    """The authentication token of an embedded Ray, in its environment, when Ray could not keep it
    in HOME (`~/.ray/auth_token`): a read-only or missing HOME, common in containers and clusters.

    Ray (its token authentication on by default) writes a new token there before it starts, and a
    HOME it cannot write failed every start; nothing of a run belongs in HOME. A token the user
    gives (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH`), a mode other than `token` and a token already
    in HOME are left to Ray; the token given here lives only in the environment of the embedded
    Ray's processes, never in a file (a variable of a credential's name: identity.json leaves it
    out, a worker's redactor cuts it from a trial's output)."""
    # A token of the user's is left to Ray, and so is a mode without tokens; RAY_AUTH_MODE=token
    # alone (which ray.init itself sets in its process) still has Ray write a new token to HOME.
    if "RAY_AUTH_TOKEN" in os.environ or "RAY_AUTH_TOKEN_PATH" in os.environ:
        return {}
    if os.environ.get("RAY_AUTH_MODE", "token") != "token":
        return {}
    try:
        folder = Path.home() / ".ray"
    except RuntimeError:  # no HOME and no entry in the password database
        return {"RAY_AUTH_TOKEN": secrets.token_hex(32)}
    if os.access(folder / "auth_token", os.R_OK) or _can_create_in(folder):
        return {}
    return {"RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _can_create_in(folder: Path) -> bool:
    """Whether `folder` can be written, or created in a HOME that is there and can be written (a
    HOME that is not there is not created: it is no place of the run's)."""
    if folder.is_dir():
        return os.access(folder, os.W_OK | os.X_OK)
    home = folder.parent
    return home.is_dir() and os.access(home, os.W_OK | os.X_OK)


def start_local_ray(attempts: int = 3, **options) -> None:
    """ray.init for an embedded local Ray, retried: on a loaded machine the raylet can miss Ray's
    fixed 30-second start-up wait.

    Its own Ray, always (`address="local"`): without an address, ray.init joins the cluster that
    `ray start` last started on this machine (/tmp/ray/ray_current_cluster), and refused to, with
    the embedded Ray's `_system_config` ("When connecting to an existing cluster, _system_config
    must not be provided"): a user's `plan run` without --address failed three times over while a
    cluster of theirs was up."""
    options.setdefault("address", "local")
    for attempt in range(1, attempts + 1):
        try:
            with (
                compat.node_registration_polled(),
                compat.without_idle_head_processes(bool(options.get("log_to_driver"))),
            ):
                ray.init(include_dashboard=False, configure_logging=False, **options)
            return
        except Exception as error:  # Ray raises a bare Exception for a start-up timeout
            ray.shutdown()
            # a disk that cannot be written (or may not be) fails every attempt alike: said at once
            if isinstance(error, OSError) and disk_error(error) is not None:
                raise RunError(
                    f"could not start a local Ray: {error}; Ray writes its session under "
                    f"{_ray_temp_root()} (set RAY_TMPDIR to move it): give it a disk it can write"
                ) from None
            if attempt == attempts:
                raise RunError(
                    f"could not start a local Ray after {attempts} attempts: {error}"
                ) from None


def _ray_temp_root() -> str:
    """Where an embedded Ray writes its session folders: RAY_TMPDIR, else the system's temporary
    folder (TMPDIR, /tmp), as Ray chooses it."""
    return os.environ.get("RAY_TMPDIR") or os.path.join(tempfile.gettempdir(), "ray")
