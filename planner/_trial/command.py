"""Bring your own script: run a contract's `command:` once per trial, as a subprocess.

The protocol (docs/command-trainables.md), in short:

- argv: `shlex.split(command)` (no shell), then the arm's overrides and the
  trial's sampled values in Hydra's override syntax, then
  `hydra.run.dir=<attempt dir>/hydra` so Hydra's outputs land with the trial
  (planner._trial.command_line); with `args: argparse`, the trial's config as
  `--key=value` flags instead (planner._trial.command_args).
- environment: the planner's own, plus `PLANNER_SEED`, `PLANNER_BUDGET`,
  `PLANNER_ARM`, `PLANNER_PHASE`, `PLANNER_TRIAL_ID`, `PLANNER_TRIAL_DIR` and
  `PLANNER_REPORT_FILE`.
- reports: JSON lines `{"step": 3, "metrics": {"val_acc": 0.9}}` appended to
  `$PLANNER_REPORT_FILE` (what `planner.report` writes), or the script's own
  metrics log (planner._trial.reports), forwarded to `trial.report` as they
  arrive, so a scheduler can stop the trial early.
- end: exit 0 is success; anything else fails the trial with the last lines of
  stderr. A timeout, a memory ceiling, or `trial.report` raising stops the
  whole process group (SIGTERM, then SIGKILL after a grace period;
  planner._trial.processes, bounded by one `CommandLimits`).

Each run of the command gets a fresh `<trial.dir>/attempt-<n>/` holding
`stdout.log`, `stderr.log` (each capped, head and tail kept), `reports.jsonl`
and Hydra's `hydra/` output folder, so a retry never reads a stale report and
the earlier attempt's logs stay for the post-mortem.

This module is the adapter: `run_command` (one run, from its start to its
verdict), `CommandTrainable` (the `train(config, trial)` Ray ships to a worker)
and `command_trainable` (that trainable for a contract).
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from planner._contract.command_help import ScriptHelp
from planner._contract.command_source import script_options as read_script_options
from planner._contract.paths import apply_params
from planner._core.errors import (  # the command trainable's errors live in the one tree
    CommandArgumentsError,
    CommandError,
    CommandFailedError,
    CommandMemoryError,
    CommandMetricsError,
    CommandNoReportError,
    CommandTimeoutError,
    PlannerError,
)
from planner._core.records import stored_metric
from planner._core.redact import Redactor
from planner._store.files import rewrite_tree
from planner._store.identity import command_script, files_read
from planner._trial import checkpoints
from planner._trial.command_args import argparse_flags, literal_flags
from planner._trial.command_line import (
    checkpoint_override,
    command_argv,
    config_changes_as_overrides,
    hydra_run_dir_override,
    overrides_for,
)
from planner._trial.config_check import ConfigCheck
from planner._trial.metrics_files import MetricsSpec
from planner._trial.processes import (
    BoundedLog,
    CommandLimits,
    CommandProcesses,
    LimitFields,
    Sink,
    describe_exit,
)
from planner._trial.reports import Line, WithSplits, attempt_reports, nearest_name, report_source
from planner._trial.script_report import REPORT_FILE_ENV

if TYPE_CHECKING:  # pragma: no cover
    from planner._contract.model import Contract

ENV_SEED = "PLANNER_SEED"
ENV_BUDGET = "PLANNER_BUDGET"
ENV_ARM = "PLANNER_ARM"
ENV_PHASE = "PLANNER_PHASE"
ENV_TRIAL_ID = "PLANNER_TRIAL_ID"
ENV_TRIAL_DIR = "PLANNER_TRIAL_DIR"

STDERR_TAIL_LINES = 50
# The last line of a Python script that died of an uncaught OSError ("OSError: [Errno N] ...")
_OSERROR_LINE = re.compile(r"(?:[\w.]+\.)?\w*Error: \[Errno (\d{1,5})\] ")


class CommandTrial(Protocol):
    """What a run of a command needs of its trial (planner._trial.trial.Trial, or a test's
    stand-in)."""

    dir: str
    seed: int
    budget: int
    arm: str
    phase: str
    id: str
    notes: list[str]
    log_reached: int | None  # set: the furthest step the script's own metrics log held a row at
    resumed_from: dict[str, Any] | None  # set: the checkpoint a cut-short trial continues from

    @property
    def last_step(self) -> int | None: ...

    def report(self, step: int, **metrics: float) -> None: ...

    def add_split_summary(self, name: str, summary: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class CommandResult:
    """How one run of the command went (it exited 0)."""

    argv: list[str]
    returncode: int
    reports: int
    duration_s: float
    attempt_dir: str
    torn_line: str | None = None  # an incomplete last report line, skipped


def run_command(
    command: str | Sequence[str],
    overrides: Sequence[str] | Callable[[Path], Sequence[str]],
    trial: CommandTrial,
    *,
    cwd: str | os.PathLike,
    limits: CommandLimits | None = None,
    env: Mapping[str, str] | None = None,
    hydra_run_dir: bool = True,
    expected_config: Mapping[str, Any] | None = None,
    metrics: MetricsSpec | None = None,
    redactor: Redactor | None = None,
    files_roots: Sequence[str] = (),
    **limit_fields: Unpack[LimitFields],
) -> CommandResult:
    """Run `command` once for `trial` and forward its reports to `trial.report`.

    `command` is split with `shlex` (no shell); `overrides` (see `overrides_for`)
    follow it on the command line; given as a function, it is called with the
    attempt's output folder (`<attempt>/hydra`) and returns them (argparse flags
    that name that folder: planner._trial.command_args). `limits` bounds the run (its time, memory,
    logs, the grace before SIGKILL); a field of it given by name (`timeout_s=60`) replaces that
    field. `env` replaces the inherited environment when given; the PLANNER_* variables are always
    set. With `expected_config`, the config the Hydra app composed (`.hydra/config.yaml`) must equal
    it, or the trial fails with CommandConfigMismatchError before any report is forwarded. With
    `metrics`, the reports come from the script's own log in its Hydra output folder
    (planner._trial.metrics_files) instead of $PLANNER_REPORT_FILE.

    Raises CommandFailedError (non-zero exit, or the command cannot start),
    CommandTimeoutError, CommandMemoryError, TrialProtocolError (a malformed
    report line, no report at all), or whatever `trial.report` raises; in every
    case the process group is stopped first. Reports that arrived before a
    failure are forwarded before the failure is raised.

    With `redactor`, stdout.log and stderr.log are scrubbed as they are written
    (a secret split across writes included), and Hydra's own files of the
    attempt (`hydra/.hydra/*.yaml`, its job log) are scrubbed when the command
    has ended.
    """
    limits = replace(limits or CommandLimits(), **limit_fields)
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise CommandFailedError(f"cannot run {command!r}: its working folder {cwd} does not exist")
    argv = command_argv(command)
    attempt_dir = _new_attempt_dir(Path(trial.dir).resolve())  # absolute: the child runs elsewhere
    argv += list(overrides(attempt_dir / "hydra") if callable(overrides) else overrides)
    if (
        redactor is not None
    ):  # an earlier attempt killed before its own scrub (SIGKILL, OOM) is scrubbed now
        for earlier in sorted(attempt_dir.parent.glob("attempt-*/hydra")):
            if earlier.parent != attempt_dir:
                scrub_files(earlier, redactor)
    report_path = attempt_dir / "reports.jsonl"
    report_path.touch()
    if hydra_run_dir:
        argv.append(hydra_run_dir_override(attempt_dir / "hydra"))
    run = _Run(
        argv,
        trial,
        attempt_dir,
        limits,
        metrics=metrics,
        expected_config=expected_config,
        redactor=redactor,
        workdir=cwd,
    )
    child_env = _child_env(env, trial, report_path)
    files_log = attempt_dir / FILES_READ_LOG
    if files_roots:
        trial_dir = Path(trial.dir).resolve()
        pythonpath = child_env.get("PYTHONPATH", "")
        child_env.update(files_read_env(files_log, files_roots, trial_dir, pythonpath))
    processes = run.start(cwd, child_env)
    try:
        run.watch(processes)
        return run.verdict(processes)
    finally:
        processes.close(limits.kill_grace_s)
        run.close()
        if redactor is not None:
            scrub_files(attempt_dir / "hydra", redactor)
        # what the trial read (its config file, an exec'd configurator, a local module) and the
        # flags it was given, for its record
        trial.inputs = {  # type: ignore[attr-defined]
            "argv": argv[len(command_argv(command)) :],
            "files": files_read(files_log, cwd.resolve()) if files_roots else {},
        }


class _Run:
    """One run of the command: its logs, its reports, the config check, what it forwarded."""

    def __init__(
        self,
        argv: list[str],
        trial: CommandTrial,
        attempt_dir: Path,
        limits: CommandLimits,
        *,
        metrics: MetricsSpec | None,
        expected_config: Mapping[str, Any] | None,
        redactor: Redactor | None,
        workdir: Path | None = None,
    ):
        self.argv, self.trial, self.attempt_dir, self.limits, self.metrics = (
            argv,
            trial,
            attempt_dir,
            limits,
            metrics,
        )
        self.stdout = BoundedLog(
            attempt_dir / "stdout.log", limits.max_log_bytes, redactor=redactor
        )
        self.stderr = BoundedLog(
            attempt_dir / "stderr.log", limits.max_log_bytes, redactor=redactor
        )
        self.reports = report_source(
            attempt_dir / "reports.jsonl", attempt_dir / "hydra", metrics, workdir=workdir
        )
        self.config_check = ConfigCheck(
            attempt_dir / "hydra" / ".hydra" / "config.yaml", expected_config
        )
        self.forwarded = 0
        self.last_step: int | None = None  # the last step forwarded to the trial
        self.names: set[str] = set()  # every metric name forwarded
        self.lingered: str | None = (
            None  # the script reported its whole budget, then ran past its time limit
        )
        # and was stopped: the note that says so
        self.started = time.monotonic()

    def failure(
        self, cls: type[CommandError], message: str, returncode: int | None = None
    ) -> CommandError:
        tail = self.stderr.tail_text(STDERR_TAIL_LINES)
        died_of = None
        if returncode:  # the script's own last word (its exception's line) in the message
            last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")
            if last and last not in message:
                message = f"{message}: {last[:300]}"
            # a Python script that died of an OSError says its errno only in that line
            died_of = _OSERROR_LINE.match(last)
        return cls(
            message,
            argv=self.argv,
            returncode=returncode,
            stderr_tail=tail,
            attempt_dir=str(self.attempt_dir),
            errno=int(died_of.group(1)) if died_of else None,
        )

    def start(self, cwd: Path, env: Mapping[str, str]) -> CommandProcesses:
        self.started = time.monotonic()
        stdout, stderr = self.sinks()
        try:
            return CommandProcesses.start(
                self.argv,
                cwd=cwd,
                env=env,
                stdout=stdout,
                stderr=stderr,
                grace_s=self.limits.kill_grace_s,
            )
        except OSError as error:
            self.close()
            raise self.failure(
                CommandFailedError,
                f"cannot start {shlex.join(self.argv[:1])} in {cwd}: {error.strerror or error}",
            ) from None

    def sinks(self) -> tuple[Sink, Sink]:
        """Where the two streams go: their logs, and with `format: stdout` the named one to its
        metrics too."""
        printed = self.reports.printed if isinstance(self.reports, WithSplits) else None
        if printed is None:
            return self.stdout, self.stderr
        if printed.stream == "stderr":
            return self.stdout, Tee(self.stderr, printed)
        return Tee(self.stdout, printed), self.stderr

    def forward(self, lines: list[Line]) -> None:
        """Pass reports to the trial (the config check first) and logged splits to its split
        summaries."""
        for step, metrics in lines:
            self.config_check.run()
            if step is None:  # a planner.log_split line: (None, (name, summary))
                self.trial.add_split_summary(*metrics)
                continue
            self.trial.report(step, **metrics)
            self.forwarded += 1
            self.last_step = step
            self.names.update(metrics)

    def fail_fast_on_a_misnamed_metric(self) -> None:
        """Before any report: a log holding the metric only under another name (`eval_accuracy` for
        `accuracy`) ends the trial now, not after the script has spent its whole budget."""
        if self.forwarded or not isinstance(self.reports, WithSplits):
            return
        misnamed = self.reports.misnamed()
        if misnamed is None:
            return
        if (
            misnamed.step is not None and misnamed.metrics
        ):  # the exposure it spent stays on the record
            try:
                self.trial.report(misnamed.step, **misnamed.metrics)
            except (KeyboardInterrupt, SystemExit):  # a stop from outside (Tune's included) stands
                raise
            except (
                BaseException
            ):  # the report's own check of a first report without metric.name advises
                if (
                    self.trial.last_step != misnamed.step
                ):  # metric.name; with the step on the record, the fix is
                    raise  # metrics.names, as the message below says
        raise self.failure(CommandMetricsError, misnamed.message)

    def watch(self, processes: CommandProcesses) -> None:
        """Pump and forward until the command exits; stop it at its time or memory limit."""
        limits = self.limits
        next_memory_check = self.started
        while processes.running():
            processes.pump(limits.poll_interval_s)
            self.forward(self.reports.read_new())
            self.fail_fast_on_a_misnamed_metric()
            now = time.monotonic()
            if limits.over_time(now - self.started):
                self._stop_at_limit(processes)
                if self._decided_by_now():
                    # its training and evaluation are on the record: what kept the process alive is
                    # no result
                    self.lingered = (
                        f"the script reported every step of its budget ({self.last_step}), then "
                        f"did "
                        f"not exit within its time limit of {limits.timeout_s:g} s (a thread or "
                        f"child "
                        "process that kept it alive) and was stopped: its reports stand"
                    )
                    return
                raise self.failure(
                    CommandTimeoutError,
                    f"command ran past its time limit of {limits.timeout_s:g} s and was stopped"
                    + (
                        ""
                        if self.last_step is None
                        else f" (its last report was step {self.last_step} of {self.trial.budget})"
                    ),
                )
            if limits.max_memory_bytes is not None and now >= next_memory_check:
                next_memory_check = now + limits.memory_check_s
                used = processes.memory_bytes()
                if used > limits.max_memory_bytes:
                    self._stop_at_limit(processes)
                    raise self.failure(
                        CommandMemoryError,
                        f"command used {used / 2**20:.0f} MiB, over its limit "
                        f"of {limits.max_memory_bytes / 2**20:.0f} MiB, and was stopped",
                    )

    def _decided_by_now(self) -> bool:
        """The script reported every step of its budget and the metric the decision reads (outside
        tuning the held-out one, which a script often evaluates after its last step): nothing it
        could still do counts."""
        trial = self.trial
        heldout = getattr(trial, "heldout", None)
        needed = (
            heldout
            if heldout and getattr(trial, "phase", None) != "tune"
            else getattr(trial, "metric", None)
        )
        return (
            self.last_step is not None
            and self.last_step >= trial.budget
            and (needed is None or needed in self.names)
        )

    def _stop_at_limit(self, processes: CommandProcesses) -> None:
        processes.stop(self.limits.kill_grace_s)
        processes.drain(1.0)
        self.forward(self.reports.read_new())  # what finished before the limit is kept

    def verdict(self, processes: CommandProcesses) -> CommandResult:
        """After the command exited: its last reports forwarded, then how it went (or why it
        failed)."""
        processes.drain(2.0)  # what the process wrote before exiting
        processes.stop(self.limits.kill_grace_s)  # anything it left behind in its group
        self.forward(self.reports.read_new())
        final, torn = self.reports.finish()
        self.forward(final)
        if isinstance(
            self.reports, WithSplits
        ):  # a declared name no row held: said on the record, never dropped
            self.trial.notes[:] = self.reports.metrics.notes()
            self.trial.log_reached = self.reports.metrics.reached
        if self.lingered:
            self.trial.notes.append(self.lingered)
        returncode = processes.returncode
        if returncode is None:  # the supervisor has ended; its status is always known by now
            raise self.failure(CommandFailedError, "the command ended without an exit status", -1)
        if returncode != 0 and not self.lingered:
            raise self.failure(
                CommandFailedError, f"command exited with {describe_exit(returncode)}", returncode
            )
        if isinstance(self.reports, WithSplits) and self.reports.reported:
            raise self.failure(
                CommandMetricsError,
                f"the script called planner.report and the contract reads its metrics from "
                f"{self.metrics.described if self.metrics else 'a file'}: use one or the other "
                f"(remove `metrics:` from the "
                "command, "
                "or the planner.report calls)",
            )
        self.config_check.run()
        if self.forwarded == 0 and isinstance(self.reports, WithSplits):
            self.fail_fast_on_a_misnamed_metric()
            tail = self.reports.metrics
            near = (
                nearest_name(tail.spec.names[tail.spec.require], tail.reader.columns)
                if tail.reader and self.reports.printed is None
                else ""
            )
            raise self.failure(
                CommandMetricsError, f"command exited 0 but {tail.nothing_read()}{near}", returncode
            )
        if self.forwarded == 0:
            raise self.failure(
                CommandNoReportError,
                f"command exited 0 without reporting anything; call planner.report(step, "
                f"metric=value) "
                f"in the script (reports go to ${REPORT_FILE_ENV})",
                returncode,
            )
        return CommandResult(
            argv=self.argv,
            returncode=returncode,
            reports=self.forwarded,
            duration_s=time.monotonic() - self.started,
            attempt_dir=str(self.attempt_dir),
            torn_line=torn,
        )

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()
        self.reports.close()


@dataclass(frozen=True)
class Tee:
    """One stream to two sinks: its log, and the metrics read from its lines."""

    first: Sink
    second: Sink

    def write(self, data: bytes) -> None:
        self.first.write(data)
        self.second.write(data)


def scrub_files(folder: Path, redactor: Redactor) -> None:
    """Rewrite every text file under `folder` (Hydra's outputs of one attempt,
    trials/<id>/attempt-N/hydra) with its secrets cut; no link is followed
    (`_store.files.rewrite_tree`: a linked folder on the way is a RunError, a linked file below is
    skipped, a hard link's other name keeps its bytes)."""
    rewrite_tree(folder.parent.parent, folder, redactor.text)


def _new_attempt_dir(trial_dir: Path) -> Path:
    trial_dir.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        candidate = trial_dir / f"attempt-{n}"
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1


FILES_READ_LOG = "files_read.tsv"  # the bootstrap's lines: what the trial's processes read
BOOTSTRAP = (
    Path(__file__).resolve().parent / "bootstrap"
)  # holds the sitecustomize that records them


def files_read_env(
    log: Path, roots: Sequence[str], trial_dir: Path, pythonpath: str
) -> dict[str, str]:
    """The environment that makes every Python the command starts record the files it reads below
    `roots` (planner/_trial/bootstrap/sitecustomize.py), outside the run folder holding `trial_dir`;
    `pythonpath` is the child's PYTHONPATH so far."""
    run_folder = trial_dir.parent.parent if trial_dir.parent.name == "trials" else trial_dir
    paths = [p for p in pythonpath.split(os.pathsep) if p]
    return {
        "PLANNER_FILES_READ": str(log),
        "PLANNER_FILES_ROOTS": os.pathsep.join(str(Path(r).resolve()) for r in roots),
        "PLANNER_FILES_SKIP": str(run_folder),
        "PYTHONPATH": os.pathsep.join([str(BOOTSTRAP), *paths]),
    }


def _child_env(
    env: Mapping[str, str] | None, trial: CommandTrial, report_path: Path
) -> dict[str, str]:
    base = dict(os.environ if env is None else env)
    out = {key: value for key, value in base.items() if not key.startswith("PLANNER_")}
    out.update(
        {
            ENV_SEED: str(int(trial.seed)),
            ENV_BUDGET: str(int(trial.budget)),
            ENV_ARM: str(trial.arm),
            ENV_PHASE: str(trial.phase),
            ENV_TRIAL_ID: str(trial.id),
            ENV_TRIAL_DIR: str(Path(trial.dir).resolve()),
            REPORT_FILE_ENV: str(report_path.resolve()),
        }
    )
    out["PYTHONUNBUFFERED"] = "1"  # so stdout.log keeps up with the script
    out.setdefault("HYDRA_FULL_ERROR", "1")  # the whole traceback in stderr.log
    # `import planner` in the script must find this planner even when it is not installed.
    root = str(Path(__file__).resolve().parents[2])
    if not root.rstrip("/").endswith(("site-packages", "dist-packages")):
        paths = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            out["PYTHONPATH"] = os.pathsep.join([*paths, root])
    return out


# ------------------------------------------------------------ the trainable


@dataclass(frozen=True)
class CommandTrainable:
    """`train(config, trial)` for a contract with `command:`; plain data, so Ray can ship it.

    `arm_overrides[arm]` is config.overrides + the arm's overrides. The trial's
    sampled values reach the command as overrides: taken as the difference
    between the config the trainable receives and `arm_configs[arm]` (the
    arm's composed config, from `compose_arms`) when given, else from
    `trial.params`. Either way the config check (`check_config`) catches a
    sampled value that did not arrive. With `seed_key` / `budget_key` the seed
    and budget are also passed as overrides of those config keys, for an app
    that reads them from its config rather than from PLANNER_SEED.
    """

    command: str
    cwd: str
    arm_overrides: Mapping[str, tuple[str, ...]]
    arm_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    timeout_s: float | None = None
    max_memory_bytes: int | None = None
    seed_key: str | None = None
    budget_key: str | None = None
    check_config: bool = True
    metrics: Mapping[str, Any] | None = None  # MetricsSpec.to_dict(): read the script's own log
    heldout: str | None = None  # the held-out metric: not read from the log during tuning
    args: str = (
        "hydra"  # "argparse": the config goes as --key value flags (planner._trial.command_args)
    )
    script_help: Mapping[str, str] | None = (
        None  # an argparse script's options, from its --help (ScriptHelp)
    )
    checkpoint: Mapping[str, Any] | None = None  # {file, resume_key, keep}: command.checkpoint
    # the folders (the contract's, the command's, its script's) below which the files a trial reads
    # are recorded (planner/_trial/bootstrap); () records none
    roots: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able data (for a TrialSpec's `extra`); `from_dict` restores it."""
        return {
            "command": self.command,
            "cwd": self.cwd,
            "arm_overrides": {arm: list(items) for arm, items in self.arm_overrides.items()},
            "arm_configs": {arm: dict(config) for arm, config in self.arm_configs.items()},
            "timeout_s": self.timeout_s,
            "max_memory_bytes": self.max_memory_bytes,
            "seed_key": self.seed_key,
            "budget_key": self.budget_key,
            "check_config": self.check_config,
            "metrics": dict(self.metrics) if self.metrics else None,
            "heldout": self.heldout,
            "args": self.args,
            "script_help": dict(self.script_help) if self.script_help is not None else None,
            "checkpoint": dict(self.checkpoint) if self.checkpoint else None,
            "roots": list(self.roots),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommandTrainable:
        data = dict(data)
        data["arm_overrides"] = {arm: tuple(items) for arm, items in data["arm_overrides"].items()}
        data["roots"] = tuple(data.get("roots") or ())
        return cls(**data)

    @property
    def limits(self) -> CommandLimits:
        """What bounds each run: budget.max_trial_time and budget.max_trial_memory."""
        return CommandLimits(timeout_s=self.timeout_s, max_memory_bytes=self.max_memory_bytes)

    def trial_overrides(self, config: Mapping[str, Any], trial: CommandTrial) -> list[str]:
        out = overrides_for(self.arm_overrides[trial.arm])
        if trial.arm in self.arm_configs:
            out += config_changes_as_overrides(self.arm_configs[trial.arm], config)
        else:
            out = overrides_for(out, getattr(trial, "params", None) or {})
        if self.seed_key:
            out.append(f"{self.seed_key}={int(trial.seed)}")
        if self.budget_key:
            out.append(f"{self.budget_key}={int(trial.budget)}")
        return out

    def expected_config(self, config: Mapping[str, Any], trial: CommandTrial) -> dict[str, Any]:
        fixed = {}
        if self.seed_key:
            fixed[self.seed_key] = int(trial.seed)
        if self.budget_key:
            fixed[self.budget_key] = int(trial.budget)
        return apply_params(dict(config), fixed)

    def __call__(self, config: Mapping[str, Any], trial: CommandTrial) -> None:
        if trial.arm not in self.arm_overrides:
            raise PlannerError(
                f"no arm named {trial.arm!r} in this contract; arms: "
                f"{', '.join(self.arm_overrides)}"
            )
        metrics = None
        if self.metrics:
            metrics = MetricsSpec.from_dict(self.metrics)
            if trial.phase == "tune":
                metrics = metrics.without(self.heldout)
        redactor = Redactor.for_run(config, self.arm_configs.get(trial.arm) or {})
        expected, found = self.expected_config(config, trial), self.resume_from(trial)
        if found is None:
            self._run(config, expected, trial, metrics, redactor)
            return
        # a cut-short trial continues from its newest checkpoint, of any attempt
        expected = apply_params(expected, self.continuation(found))
        trial.resumed_from = checkpoints.describe(found, trial.dir)
        earlier = _attempt_dirs(Path(trial.dir))
        try:
            self._run(config, expected, trial, metrics, redactor, found)
        finally:  # what the earlier attempts trained, for the selection (held_reports)
            trial.resumed_from["reports"] = _held_reports(
                earlier, metrics, getattr(trial, "reports", None)
            )

    def _run(
        self,
        config: Mapping[str, Any],
        expected: Mapping[str, Any],
        trial: CommandTrial,
        metrics: MetricsSpec | None,
        redactor: Redactor,
        found: Path | None = None,
    ) -> None:
        try:
            self._run_once(config, expected, trial, metrics, redactor, found)
        except CommandFailedError as error:
            refused = self._seed_refused(error, trial)
            if refused is None:
                raise
            raise CommandArgumentsError(
                refused,
                argv=error.argv,
                returncode=error.returncode,
                stderr_tail=error.stderr_tail,
                attempt_dir=error.attempt_dir,
            ) from None

    def _seed_refused(self, error: CommandFailedError, trial: CommandTrial) -> str | None:
        """The sentence for a script that refused the seed the planner passed it (nanoGPT's `Unknown
        config key: seed`, argparse's `unrecognized arguments: --seed=3`, Hydra's `Key 'seed' is not
        in struct`): the two ways out; None for any other failure."""
        key = self.seed_key
        if not key or not error.returncode:
            return None
        last = [line.strip() for line in (error.stderr_tail or "").splitlines() if line.strip()]
        said = next((line for line in reversed(last) if _names_key(line, key)), None)
        if said is None:
            return None
        return (
            f"the script refused the seed it was given as {key}={int(trial.seed)} ({said[:200]}): "
            f"give the script a {key!r} setting it reads and uses to seed its random generators, "
            "or "
            "remove seed_key from the contract and have the script read its seed from the "
            "environment, int(os.environ['PLANNER_SEED'])"
        )

    def _run_once(
        self,
        config: Mapping[str, Any],
        expected: Mapping[str, Any],
        trial: CommandTrial,
        metrics: MetricsSpec | None,
        redactor: Redactor,
        found: Path | None = None,
    ) -> None:
        if self.args != "hydra":  # the resume key, a config key, is one of the flags
            self._run_flags(expected, trial, metrics, redactor)
            return
        overrides = self.trial_overrides(config, trial)
        if found is not None:
            for key, value in self.continuation(found).items():
                overrides += checkpoint_override(key, value)
        run_command(
            self.command,
            overrides,
            trial,
            cwd=self.cwd,
            limits=self.limits,
            expected_config=expected if self.check_config else None,
            metrics=metrics,
            redactor=redactor,
            files_roots=self.roots,
        )

    def _run_flags(
        self,
        received: Mapping[str, Any],
        trial: CommandTrial,
        metrics: MetricsSpec | None,
        redactor: Redactor,
    ) -> None:
        """Run a script on the config it receives, as flags (argparse's, or Python literals); exit
        status 2 (argparse's "error:") is its usage error, shown in the trial's error and not
        retried."""
        help = ScriptHelp(dict(self.script_help)) if self.script_help is not None else None

        def flags(output_dir: Path) -> list[str]:
            output_dir.mkdir(parents=True, exist_ok=True)
            if self.args == "literal":
                return literal_flags(received, output_dir)
            return argparse_flags(received, help, output_dir)

        try:
            run_command(
                self.command,
                flags,
                trial,
                cwd=self.cwd,
                limits=self.limits,
                hydra_run_dir=False,
                metrics=metrics,
                redactor=redactor,
                files_roots=self.roots,
            )
        except CommandFailedError as error:
            usage = _usage_error(error)
            if usage is None:
                raise
            raise CommandArgumentsError(
                f"the script refused its flags (exit status 2): {usage}",
                argv=error.argv,
                returncode=error.returncode,
                stderr_tail=error.stderr_tail,
                attempt_dir=error.attempt_dir,
            ) from None

    def continuation(self, found: Path) -> dict[str, Any]:
        """The config keys that make the script continue from the checkpoint `found`: `resume_key`
        set to its path; or `folder_key` set to the output folder of the attempt that saved it, with
        the `resume_flags` (nanoGPT: out_dir=<that folder>, init_from=resume)."""
        checkpoint = self.checkpoint or {}
        out: dict[str, Any] = {}
        if checkpoint.get("resume_key"):
            out[checkpoint["resume_key"]] = str(found)
        if checkpoint.get("folder_key"):
            out[checkpoint["folder_key"]] = str(checkpoints.output_folder_of(found))
            out.update(checkpoint.get("resume_flags") or {})
        return out

    def resume_from(self, trial: CommandTrial) -> Path | None:
        """The checkpoint to continue from when the trial's previous attempt was cut short, or
        None."""
        if not (
            self.checkpoint
            and (self.checkpoint.get("resume_key") or self.checkpoint.get("folder_key"))
            and getattr(trial, "resumed", False)
        ):
            return None
        found = checkpoints.newest(trial.dir, self.checkpoint["file"])
        return found.resolve() if found is not None else None


# how scripts say they do not know a setting: nanoGPT's configurator, argparse, Hydra, click
_UNKNOWN = re.compile(
    r"unknown config key|unrecognized arguments|not in struct|could not override|no such option|"
    r"unknown (?:option|argument|key|flag)",
    re.IGNORECASE,
)


def _names_key(line: str, key: str) -> bool:
    """Whether a script's error line refuses the setting `key` (`Unknown config key: seed`)."""
    return (
        bool(_UNKNOWN.search(line))
        and re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", line) is not None
    )


def _attempt_dirs(trial_dir: Path) -> list[Path]:
    """The trial's attempt folders (`attempt-N`, real folders, not links), in the order they ran."""
    found = []
    for path in trial_dir.glob("attempt-*") if trial_dir.is_dir() else ():
        number = path.name.removeprefix("attempt-")
        if number.isdigit() and path.is_dir() and not path.is_symlink():
            found.append((int(number), path))
    return [path for _, path in sorted(found)]


def _held_reports(
    earlier: list[Path], metrics: MetricsSpec | None, reports: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """The reports the earlier attempts made before the step this attempt continued at, as a record
    stores them: each attempt's own, where a later attempt (itself a continuation) reported a step
    again from its first step on; then only the steps before this attempt's first report (the
    checkpoint's)."""
    held: list[tuple[int, dict[str, float]]] = []
    for attempt in earlier:
        made = attempt_reports(attempt, metrics)
        if made:
            held = [r for r in held if r[0] < made[0][0]] + made
    first = reports[0].get("step") if reports else None
    if isinstance(first, int):
        held = [r for r in held if r[0] < first]
    return [
        {"step": step, "metrics": {k: stored_metric(float(v)) for k, v in values.items()}}
        for step, values in held
    ]


def _usage_error(error: CommandFailedError) -> str | None:
    """argparse's own last lines (`usage: ...` and `...: error: ...`) when the script exited 2 on
    them, else None."""
    if error.returncode != 2 or isinstance(error, CommandArgumentsError):
        return None
    lines = [line for line in (error.stderr_tail or "").splitlines() if line.strip()]
    at = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("usage:")), None)
    if at is None or not any(": error: " in line for line in lines[at:]):
        return None
    shown = lines[at:]
    return " ".join(shown[:2] + ["..."] + shown[-2:]) if len(shown) > 6 else " ".join(shown)


def command_trainable(
    contract: Contract,
    contract_dir: str | os.PathLike,
    arm_configs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    seed_key: str | None = None,
    budget_key: str | None = None,
    script_options: tuple[ScriptHelp | None, str] | None = None,
) -> CommandTrainable:
    """The trainable for `contract.command`, run in the contract's folder.

    `arm_configs` is `compose_arms(contract, contract_dir).configs`; without it
    the sampled values are read from `trial.params`. The time and memory limits
    come from `budget.max_trial_time` and `budget.max_trial_memory`; the seed
    and budget keys and the metrics file from `command:` in its mapping form
    (`seed_key`/`budget_key` given here win). `script_options` is what the contract's check read of
    an argparse script's options (`(options or None, why)`, kept by validation); without it they
    are read here.
    """
    spec = contract.command_spec
    if spec is None:
        raise PlannerError("this contract names a `trainable:`, not a `command:`")
    metrics = None
    if spec.metrics is not None:
        m, metric = spec.metrics, contract.metric
        metrics = MetricsSpec(
            file=m.file,
            format=m.format,
            step=m.step,
            require=metric.name,
            heldout=metric.heldout,
            heldout_file=m.heldout_file,
            names=m.columns(metric.name, metric.heldout),
            step_base=1 if m.step_base is None else m.step_base,
            pattern=m.pattern,
            stream=m.stream,
        ).to_dict()
    base = list(contract.config.overrides) if contract.config is not None else []
    script_help = None
    if spec.args == "argparse":  # read once, in the driver: every trial's flags are written from it
        if script_options is None:
            script_options = read_script_options(
                command_argv(spec.run), contract.command_dir(contract_dir)
            )
        found = script_options[0]
        script_help = found.to_dict() if found is not None else None
    return CommandTrainable(
        command=spec.run,
        cwd=str(contract.command_dir(contract_dir)),
        arm_overrides={arm.name: tuple(base + list(arm.overrides)) for arm in contract.all_arms},
        arm_configs={name: dict(config) for name, config in (arm_configs or {}).items()},
        timeout_s=contract.budget.max_trial_time_s,
        max_memory_bytes=contract.budget.max_trial_memory_bytes,
        seed_key=seed_key or spec.seed_key,
        budget_key=budget_key or spec.budget_key,
        check_config=contract.config is not None
        and contract.config.dir is not None
        and spec.args == "hydra",
        metrics=metrics,
        heldout=contract.metric.heldout,
        args=spec.args,
        script_help=script_help,
        checkpoint=spec.checkpoint.model_dump() if spec.checkpoint is not None else None,
        roots=_roots(spec.run, Path(contract_dir), contract.command_dir(contract_dir)),
    )


def _roots(command_line: str, contract_dir: Path, command_dir: Path) -> tuple[str, ...]:
    """The folders below which a trial's reads are its identity: the contract's, the one the command
    runs in, and its script's (`python ../nanoGPT/train.py` reads that folder's model.py)."""
    script = command_script(command_line, command_dir)
    folders = [contract_dir.resolve(), command_dir.resolve()]
    if script is not None:
        folders.append(script.parent)
    return tuple(dict.fromkeys(str(folder) for folder in folders))
