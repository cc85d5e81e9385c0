"""Bring your own script: run a contract's `command:` once per trial, as a subprocess.

The protocol (docs/command-trainables.md), in short:

- argv: `shlex.split(command)` (no shell), then the arm's overrides and the
  trial's sampled values in Hydra's override syntax, then
  `hydra.run.dir=<attempt dir>/hydra` so Hydra's outputs land with the trial.
  A leading `python`/`python3` means the interpreter running the planner.
- environment: the planner's own, plus `PLANNER_SEED`, `PLANNER_BUDGET`,
  `PLANNER_ARM`, `PLANNER_PHASE`, `PLANNER_TRIAL_ID`, `PLANNER_TRIAL_DIR` and
  `PLANNER_REPORT_FILE`.
- reports: JSON lines `{"step": 3, "metrics": {"val_acc": 0.9}}` appended to
  `$PLANNER_REPORT_FILE` (what `planner.report` writes), forwarded to
  `trial.report` as they arrive, so a scheduler can stop the trial early.
- end: exit 0 is success; anything else fails the trial with the last lines of
  stderr. A timeout, a memory ceiling, or `trial.report` raising stops the
  whole process group (SIGTERM, then SIGKILL after a grace period).

Each run of the command gets a fresh `<trial.dir>/attempt-<n>/` holding
`stdout.log`, `stderr.log` (each capped, head and tail kept), `reports.jsonl`
and Hydra's `hydra/` output folder, so a retry never reads a stale report and
the earlier attempt's logs stay for the post-mortem.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._core.errors import (  # the command trainable's errors live in the one tree
    CommandConfigMismatchError,
    CommandFailedError,
    CommandMemoryError,
    CommandMetricsError,
    CommandNoReportError,
    CommandTimeoutError,
    PlannerError,
    TrialProtocolError,
)
from planner._trial.metrics_files import MetricsFileTail, MetricsSpec
from planner._trial.script_report import REPORT_FILE_ENV

ENV_SEED = "PLANNER_SEED"
ENV_BUDGET = "PLANNER_BUDGET"
ENV_ARM = "PLANNER_ARM"
ENV_PHASE = "PLANNER_PHASE"
ENV_TRIAL_ID = "PLANNER_TRIAL_ID"
ENV_TRIAL_DIR = "PLANNER_TRIAL_DIR"

DEFAULT_MAX_LOG_BYTES = 8 * 1024 * 1024  # per stream, kept from the head of the output
TAIL_BYTES = 64 * 1024  # per stream, the end of the output, always kept
STDERR_TAIL_LINES = 50
MAX_REPORT_LINE_BYTES = 1024 * 1024


# ------------------------------------------------------------------- overrides


_PLAIN_STRING = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-./]*$")
_GRAMMAR_WORDS = {"true", "false", "null", "nan", "inf", "+inf", "-inf"}


def format_override_value(value: Any) -> str:
    """A value written in Hydra's override grammar, so that the script receives `value` back.

    Strings are quoted unless plainly safe (`adam`, `relu`); quotes, backslashes
    before quotes, and `${` (which OmegaConf would read as an interpolation)
    are escaped. Lists and dicts are written element by element.
    """
    if hasattr(value, "item") and not isinstance(value, str | bytes | list | tuple | dict):
        value = value.item()  # numpy scalars
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return "nan"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return repr(number)
    if isinstance(value, str):
        if _PLAIN_STRING.match(value) and value.lower() not in _GRAMMAR_WORDS:
            return value
        return _quote(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(format_override_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not (isinstance(key, str) and _PLAIN_STRING.match(key)):
                raise ValueError(f"cannot write the mapping key {key!r} as a Hydra override; keys must be identifiers")
            items.append(f"{key}:{format_override_value(item)}")
        return "{" + ",".join(items) + "}"
    raise ValueError(f"cannot write a {type(value).__name__} ({value!r}) as a Hydra override value")


def _quote(text: str) -> str:
    # OmegaConf: a literal `${` is written `\${`, and backslashes right before it doubled.
    text = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", text)
    # Hydra's quoted strings: backslashes right before a quote (or the closing one) doubled.
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    return "'" + text.replace("'", "\\'") + "'"


def overrides_for(arm_overrides: Sequence[str], params: Mapping[str, Any] | None = None) -> list[str]:
    """The argv overrides for one trial: the arm's overrides (config.overrides, then the
    arm's own) as written in the contract, then each sampled value as `key=value`.

    Hydra applies the last value given for a key, so a sampled value wins over an
    arm's fixed one.
    """
    out = [str(item) for item in arm_overrides]
    for key, value in (params or {}).items():
        out.append(f"{key}={format_override_value(value)}")
    return out


def config_changes_as_overrides(arm_config: Mapping[str, Any], trial_config: Mapping[str, Any]) -> list[str]:
    """Overrides that turn the arm's composed config into the trial's config.

    The trainable receives the effective config with the sampled tuning values
    applied; the difference from the arm's config is exactly those values. A
    leaf that is new is written `+key=value`, one that is gone `~key`.
    """
    from planner._contract.paths import MISSING, config_diff

    out = []
    for path, before, after in config_diff(dict(arm_config), dict(trial_config)):
        if after is MISSING:
            out.append(f"~{path}")
        elif before is MISSING:
            out.append(f"+{path}={format_override_value(after)}")
        else:
            out.append(f"{path}={format_override_value(after)}")
    return out


# -------------------------------------------------------------------- running


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
    overrides: Sequence[str],
    trial: Any,
    *,
    cwd: str | os.PathLike,
    timeout_s: float | None = None,
    max_memory_bytes: int | None = None,
    env: Mapping[str, str] | None = None,
    hydra_run_dir: bool = True,
    expected_config: Mapping[str, Any] | None = None,
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    kill_grace_s: float = 5.0,
    poll_interval_s: float = 0.05,
    metrics: MetricsSpec | None = None,
    redactor: Any = None,
) -> CommandResult:
    """Run `command` once for `trial` and forward its reports to `trial.report`.

    `command` is split with `shlex` (no shell); `overrides` (see `overrides_for`)
    follow it on the command line. `env` replaces the inherited environment when
    given; the PLANNER_* variables are always set. With `expected_config`, the
    config the Hydra app composed (`.hydra/config.yaml`) must equal it, or the
    trial fails with CommandConfigMismatchError before any report is forwarded.
    With `metrics`, the reports come from the script's own log in its Hydra
    output folder (planner._trial.metrics_files) instead of $PLANNER_REPORT_FILE.

    Raises CommandFailedError (non-zero exit, or the command cannot start),
    CommandTimeoutError, CommandMemoryError, TrialProtocolError (a malformed
    report line, no report at all), or whatever `trial.report` raises; in every
    case the process group is stopped first. Reports that arrived before a
    failure are forwarded before the failure is raised.

    With `redactor` (a planner._core.redact.Redactor), stdout.log and stderr.log are scrubbed as they
    are written (a secret split across writes included), and Hydra's own files of the attempt
    (`hydra/.hydra/*.yaml`, its job log) are scrubbed when the command has ended.
    """
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise CommandFailedError(f"cannot run {command!r}: its working folder {cwd} does not exist")
    argv = command_argv(command) + list(overrides)
    attempt_dir = _new_attempt_dir(Path(trial.dir).resolve())  # absolute: the child runs elsewhere
    if redactor is not None:  # an earlier attempt killed before its own scrub (SIGKILL, OOM) is scrubbed now
        for earlier in sorted(attempt_dir.parent.glob("attempt-*/hydra")):
            if earlier.parent != attempt_dir:
                scrub_files(earlier, redactor)
    report_path = attempt_dir / "reports.jsonl"
    report_path.touch()
    if hydra_run_dir:
        argv.append(f"hydra.run.dir={format_override_value(str(attempt_dir / 'hydra'))}")
    child_env = _child_env(env, trial, report_path)

    stdout = _BoundedLog(attempt_dir / "stdout.log", max_log_bytes, redactor=redactor)
    stderr = _BoundedLog(attempt_dir / "stderr.log", max_log_bytes, redactor=redactor)
    reports: _ReportTail | MetricsFileTail | _WithSplits = (
        _ReportTail(report_path) if metrics is None
        else _WithSplits(MetricsFileTail(attempt_dir / "hydra", metrics), _ReportTail(report_path)))
    config_check = _ConfigCheck(attempt_dir / "hydra" / ".hydra" / "config.yaml", expected_config)

    def failure(cls, message, returncode=None):
        return cls(message, argv=argv, returncode=returncode,
                   stderr_tail=stderr.tail_text(STDERR_TAIL_LINES), attempt_dir=str(attempt_dir))

    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=child_env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as error:
        for opened in (stdout, stderr, reports):
            opened.close()
        raise failure(CommandFailedError, f"cannot start {shlex.join(argv[:1])} in {cwd}: {error.strerror or error}") from None

    forwarded = 0

    def forward(lines):
        nonlocal forwarded
        for step, metrics in lines:
            config_check.run()
            if step is None:  # a planner.log_split line: (None, (name, summary))
                trial.add_split_summary(*metrics)
                continue
            trial.report(step, **metrics)
            forwarded += 1

    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, stdout)
    selector.register(proc.stderr, selectors.EVENT_READ, stderr)
    next_memory_check = started
    try:
        while proc.poll() is None:
            _pump(selector, poll_interval_s)
            forward(reports.read_new())
            now = time.monotonic()
            if timeout_s is not None and now - started > timeout_s:
                _stop_group(proc, kill_grace_s)
                _drain(selector, 1.0)
                forward(reports.read_new())  # what finished before the limit is kept
                raise failure(CommandTimeoutError, f"command ran past its time limit of {timeout_s:g} s and was stopped")
            if max_memory_bytes is not None and now >= next_memory_check:
                next_memory_check = now + 0.5
                used = _group_memory(proc.pid)
                if used > max_memory_bytes:
                    _stop_group(proc, kill_grace_s)
                    _drain(selector, 1.0)
                    forward(reports.read_new())
                    raise failure(CommandMemoryError,
                                  f"command used {used / 2**20:.0f} MiB, over its limit of {max_memory_bytes / 2**20:.0f} MiB, and was stopped")
        _drain(selector, 2.0)  # what the process wrote before exiting
        _stop_group(proc, kill_grace_s)  # anything it left behind in its group
        forward(reports.read_new())
        final, torn = reports.finish()
        forward(final)
        returncode = proc.returncode
        if returncode != 0:
            raise failure(CommandFailedError, f"command exited with {_describe_exit(returncode)}", returncode)
        if isinstance(reports, _WithSplits) and reports.reported:
            raise failure(CommandMetricsError,
                          f"the script called planner.report and the contract reads its metrics from {metrics.file!r}: "
                          "use one or the other (remove `metrics:` from the command, or the planner.report calls)")
        if forwarded == 0 and isinstance(reports, _WithSplits):
            config_check.run()
            raise failure(CommandMetricsError, f"command exited 0 but {reports.metrics.nothing_read()}", returncode)
        if forwarded == 0:
            config_check.run()
            raise failure(CommandNoReportError,
                          f"command exited 0 without reporting anything; call planner.report(step, metric=value) "
                          f"in the script (reports go to ${REPORT_FILE_ENV})", returncode)
        config_check.run()
        return CommandResult(argv=argv, returncode=returncode, reports=forwarded,
                             duration_s=time.monotonic() - started, attempt_dir=str(attempt_dir), torn_line=torn)
    finally:
        if proc.poll() is None:
            _stop_group(proc, kill_grace_s)
        selector.close()
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        stdout.close()
        stderr.close()
        reports.close()
        if redactor is not None:
            scrub_files(attempt_dir / "hydra", redactor)


def scrub_files(folder: Path, redactor: Any) -> None:
    """Rewrite every text file under `folder` (Hydra's outputs of one attempt) with its secrets cut."""
    from planner._store.files import write_atomic

    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 << 20:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        clean = redactor.text(text)
        if clean != text:
            write_atomic(path, clean)


def command_argv(command: str | Sequence[str]) -> list[str]:
    """`shlex.split(command)`, with a leading `python`/`python3` made the planner's own interpreter."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as error:  # an unbalanced quote
            raise CommandFailedError(f"the command {command!r} does not parse: {error}; quote as in a shell") from None
    else:
        argv = [str(part) for part in command]
    if not argv:
        raise CommandFailedError("the command is empty; write one like `python train.py`")
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def command_problems(command: str, cwd: str | os.PathLike) -> list[str]:
    """What would stop `command` from starting in `cwd`, as sentences; [] when it looks runnable.

    For `plan validate`: cheap, runs nothing. Checks that it parses, that the
    program exists (on PATH, or as a path relative to `cwd`), and that a
    `python script.py` names a script that is there.
    """
    try:
        argv = command_argv(command)
    except CommandFailedError as error:
        return [str(error)]
    cwd = Path(cwd)
    problems = []
    program = argv[0]
    if os.sep in program:
        if not (cwd / program).exists():
            problems.append(f"the command's program {program} does not exist (looked from {cwd})")
    elif shutil.which(program) is None:
        problems.append(f"the command's program {program!r} is not on PATH")
    if program == sys.executable and len(argv) > 1 and argv[1].endswith(".py") and not (cwd / argv[1]).is_file():
        problems.append(f"the command runs {argv[1]}, which is not in {cwd}; the command runs in the contract's folder")
    return problems


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


def _child_env(env: Mapping[str, str] | None, trial: Any, report_path: Path) -> dict[str, str]:
    base = dict(os.environ if env is None else env)
    out = {key: value for key, value in base.items() if not key.startswith("PLANNER_")}
    out.update({
        ENV_SEED: str(int(trial.seed)),
        ENV_BUDGET: str(int(trial.budget)),
        ENV_ARM: str(trial.arm),
        ENV_PHASE: str(trial.phase),
        ENV_TRIAL_ID: str(trial.id),
        ENV_TRIAL_DIR: str(Path(trial.dir).resolve()),
        REPORT_FILE_ENV: str(report_path.resolve()),
    })
    out["PYTHONUNBUFFERED"] = "1"  # so stdout.log keeps up with the script
    out.setdefault("HYDRA_FULL_ERROR", "1")  # the whole traceback in stderr.log
    # `import planner` in the script must find this planner even when it is not installed.
    root = str(Path(__file__).resolve().parents[2])
    if not root.rstrip("/").endswith(("site-packages", "dist-packages")):
        paths = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            out["PYTHONPATH"] = os.pathsep.join([*paths, root])
    return out


def _pump(selector: selectors.BaseSelector, timeout: float) -> None:
    if not selector.get_map():
        time.sleep(timeout)
        return
    for key, _ in selector.select(timeout):
        data = os.read(key.fd, 65536)
        if data:
            key.data.write(data)
        else:
            selector.unregister(key.fileobj)


def _drain(selector: selectors.BaseSelector, limit_s: float) -> None:
    """Read the pipes to their end, for at most `limit_s` (a child left behind may hold them open)."""
    deadline = time.monotonic() + limit_s
    while selector.get_map() and time.monotonic() < deadline:
        _pump(selector, 0.05)


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the process group, SIGKILL what is left after `grace_s`, reap the leader."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        if wait_s is None:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _group_alive(proc):
            time.sleep(0.02)
        if not _group_alive(proc):
            break
    proc.wait()


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # reap the leader if it exited
    try:
        os.killpg(proc.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_memory(pid: int) -> int:
    import psutil

    try:
        leader = psutil.Process(pid)
        processes = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            pass
    return total


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (the kernel's out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else ""
        return f"{name}{hint}"
    return f"status {returncode}"


@dataclass
class _BoundedLog:
    """A log file that keeps the first `max_bytes` and the last TAIL_BYTES of a stream."""

    path: Path
    max_bytes: int
    written: int = 0
    dropped: int = 0
    tail: bytearray = field(default_factory=bytearray)
    redactor: Any = None

    def __post_init__(self):
        import codecs

        self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stream = self.redactor.stream() if self.redactor is not None else None

    def write(self, data: bytes) -> None:
        if self._stream is not None:  # scrubbed line by line: a secret split across reads is still cut
            data = self._stream.feed(self._decoder.decode(data)).encode("utf-8")
        self._keep(data)

    def _keep(self, data: bytes) -> None:
        room = max(self.max_bytes - self.written, 0)
        if room:
            self._file.write(data[:room])
            self.written += min(room, len(data))
        self.dropped += max(len(data) - room, 0)
        self.tail += data
        if len(self.tail) > TAIL_BYTES:
            del self.tail[: len(self.tail) - TAIL_BYTES]

    def tail_text(self, lines: int) -> str:
        text = self.tail.decode("utf-8", errors="replace")
        if self._stream is not None and self._stream.pending:  # a last line still held: scrubbed too
            text += self._stream.redactor.text(self._stream.pending)
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        if self._file.closed:
            return
        if self._stream is not None:
            self._keep(self._stream.feed(self._decoder.decode(b"", final=True)).encode("utf-8"))
            self._keep(self._stream.flush().encode("utf-8"))
        if self.dropped:
            kept = bytes(self.tail[-min(self.dropped, len(self.tail)):])
            omitted = self.dropped - len(kept)
            self._file.write(f"\n[planner: {omitted} bytes of output omitted here; the last {len(kept)} follow]\n".encode())
            self._file.write(kept)
        self._file.close()


class _ReportTail:
    """Reads the report file as it grows; yields (step, metrics) per whole line."""

    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._partial = b""
        self._line_no = 0

    def read_new(self) -> list[tuple[int, dict[str, float]]]:
        data = self._file.read()
        if not data:
            return []
        *lines, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > MAX_REPORT_LINE_BYTES:
            raise TrialProtocolError(f"{self.path}: a report line is longer than {MAX_REPORT_LINE_BYTES} bytes")
        out = []
        for line in lines:
            self._line_no += 1
            if line.strip():
                out.append(parse_report_line(line, f"{self.path} line {self._line_no}"))
        return out

    def finish(self) -> tuple[list[tuple[int, dict[str, float]]], str | None]:
        """The last lines; an unterminated last line is kept if it parses, else returned as torn."""
        out = self.read_new()
        partial, self._partial = self._partial, b""
        if not partial.strip():
            return out, None
        try:
            out.append(parse_report_line(partial, f"{self.path} last line"))
            return out, None
        except TrialProtocolError:
            return out, partial.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._file.close()


class _WithSplits:
    """A script's own metrics log, plus the report file for its planner.log_split lines (docs/data.md)."""

    def __init__(self, metrics: MetricsFileTail, report_file: _ReportTail):
        self.metrics, self.report_file = metrics, report_file
        self.reported = False  # the script also called planner.report: refused, the metrics come from its log

    def _splits(self, lines: list) -> list:
        self.reported = self.reported or any(line[0] is not None for line in lines)
        return [line for line in lines if line[0] is None]

    def read_new(self) -> list:
        return self._splits(self.report_file.read_new()) + self.metrics.read_new()

    def finish(self) -> tuple[list, str | None]:
        splits = self._splits(self.report_file.finish()[0])
        final, torn = self.metrics.finish()
        return splits + final, torn

    def close(self) -> None:
        self.metrics.close()
        self.report_file.close()


def parse_report_line(line: bytes | str, where: str = "report") -> tuple[int | None, Any]:
    """`{"step": 3, "metrics": {"val_acc": 0.9}}` -> (3, {"val_acc": 0.9}); a planner.log_split line
    `{"split": "train", "data": {...}}` -> (None, ("train", {...})); TrialProtocolError otherwise."""
    expected = 'expected {"step": <int>, "metrics": {"<name>": <number>, ...}}'
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        raise TrialProtocolError(f"{where} is not JSON ({error}); {expected}") from None
    if isinstance(record, dict) and set(record) == {"split", "data"}:
        return _split_line(record, where)
    if not isinstance(record, dict) or set(record) != {"step", "metrics"}:
        raise TrialProtocolError(f"{where}: {_short(line)}; {expected}")
    step, metrics = record["step"], record["metrics"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise TrialProtocolError(f"{where}: step must be an int, got {step!r}")
    if not isinstance(metrics, dict) or not metrics:
        raise TrialProtocolError(f"{where}: metrics must be a non-empty mapping of names to numbers, got {metrics!r}")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TrialProtocolError(f"{where}: metric {name!r} must be a number, got {value!r}")
    return step, {name: float(value) for name, value in metrics.items()}


def _split_line(record: dict, where: str) -> tuple[None, Any]:
    """A `planner.log_split` line -> (None, (name, summary)); TrialProtocolError when it is malformed."""
    name, data = record["split"], record["data"]
    if not isinstance(name, str) or not name or not isinstance(data, dict) or not isinstance(
            data.get("fingerprint"), str) or not isinstance(data.get("distinct"), int):
        raise TrialProtocolError(f"{where}: a split line must be what planner.log_split writes: "
                                 '{"split": "<name>", "data": {"presentations": ..., "distinct": ..., "fingerprint": ...}}')
    return None, (name, data)


def _short(line: bytes | str, limit: int = 200) -> str:
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    return text if len(text) <= limit else text[:limit] + "..."


class _ConfigCheck:
    """Compares the config the Hydra app composed with the one the contract composed, once.

    Leaves that are interpolations in the app's config (`${optimizer.lr}`) are
    derived, not chosen, and are left out: the planner's configs carry them
    resolved against the untuned values.
    """

    def __init__(self, path: Path, expected: Mapping[str, Any] | None):
        self.path = path
        self.expected = expected
        self.done = expected is None

    def run(self) -> None:
        if self.done or not self.path.is_file():
            return
        self.done = True
        from omegaconf import OmegaConf

        from planner._contract.paths import config_diff, flatten

        loaded = OmegaConf.load(self.path)
        derived = {path for path, value in flatten(OmegaConf.to_container(loaded, resolve=False)).items()
                   if isinstance(value, str) and "${" in value}
        composed = OmegaConf.to_container(loaded, resolve=True)
        differences = [d for d in config_diff(dict(self.expected), composed) if d[0] not in derived]
        if differences:
            shown = "; ".join(f"{path}: contract {a!r}, script {b!r}" for path, a, b in differences[:5])
            more = f" (and {len(differences) - 5} more)" if len(differences) > 5 else ""
            raise CommandConfigMismatchError(
                f"the script composed a different config from the contract's ({self.path}): {shown}{more}. "
                "Point the contract's `config: {dir, name}` at the app's config folder and primary config")


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

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able data (for a TrialSpec's `extra`); `from_dict` restores it."""
        return {
            "command": self.command, "cwd": self.cwd,
            "arm_overrides": {arm: list(items) for arm, items in self.arm_overrides.items()},
            "arm_configs": {arm: dict(config) for arm, config in self.arm_configs.items()},
            "timeout_s": self.timeout_s, "max_memory_bytes": self.max_memory_bytes,
            "seed_key": self.seed_key, "budget_key": self.budget_key, "check_config": self.check_config,
            "metrics": dict(self.metrics) if self.metrics else None, "heldout": self.heldout,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommandTrainable:
        data = dict(data)
        data["arm_overrides"] = {arm: tuple(items) for arm, items in data["arm_overrides"].items()}
        return cls(**data)

    def trial_overrides(self, config: Mapping[str, Any], trial: Any) -> list[str]:
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

    def expected_config(self, config: Mapping[str, Any], trial: Any) -> dict[str, Any]:
        from planner._contract.paths import apply_params

        fixed = {}
        if self.seed_key:
            fixed[self.seed_key] = int(trial.seed)
        if self.budget_key:
            fixed[self.budget_key] = int(trial.budget)
        return apply_params(dict(config), fixed)

    def __call__(self, config: Mapping[str, Any], trial: Any) -> None:
        if trial.arm not in self.arm_overrides:
            raise PlannerError(f"no arm named {trial.arm!r} in this contract; arms: {', '.join(self.arm_overrides)}")
        from planner._core.redact import Redactor

        metrics = None
        if self.metrics:
            metrics = MetricsSpec.from_dict(self.metrics)
            if trial.phase == "tune":
                metrics = metrics.without(self.heldout)
        run_command(self.command, self.trial_overrides(config, trial), trial, cwd=self.cwd,
                    timeout_s=self.timeout_s, max_memory_bytes=self.max_memory_bytes,
                    expected_config=self.expected_config(config, trial) if self.check_config else None,
                    metrics=metrics, redactor=Redactor.for_run(config, self.arm_configs.get(trial.arm) or {}))


def command_trainable(contract: Any, contract_dir: str | os.PathLike,
                      arm_configs: Mapping[str, Mapping[str, Any]] | None = None, *,
                      seed_key: str | None = None, budget_key: str | None = None) -> CommandTrainable:
    """The trainable for `contract.command`, run in the contract's folder.

    `arm_configs` is `compose_arms(contract, contract_dir).configs`; without it
    the sampled values are read from `trial.params`. The time and memory limits
    come from `budget.max_trial_time` and `budget.max_trial_memory`; the seed
    and budget keys and the metrics file from `command:` in its mapping form
    (`seed_key`/`budget_key` given here win).
    """
    spec = contract.command_spec
    if spec is None:
        raise PlannerError("this contract names a `trainable:`, not a `command:`")
    metrics = None
    if spec.metrics is not None:
        m, metric = spec.metrics, contract.metric
        metrics = MetricsSpec(file=m.file, format=m.format, step=m.step, require=metric.name,
                              names=m.columns(metric.name, metric.heldout),
                              step_base=1 if m.step_base is None else m.step_base).to_dict()
    base = list(contract.config.overrides)
    return CommandTrainable(
        command=spec.run,
        cwd=str(Path(contract_dir).resolve()),
        arm_overrides={arm.name: tuple(base + list(arm.overrides)) for arm in contract.all_arms},
        arm_configs={name: dict(config) for name, config in (arm_configs or {}).items()},
        timeout_s=contract.budget.max_trial_time_s,
        max_memory_bytes=contract.budget.max_trial_memory_bytes,
        seed_key=seed_key or spec.seed_key,
        budget_key=budget_key or spec.budget_key,
        check_config=contract.config.dir is not None,
        metrics=metrics,
        heldout=contract.metric.heldout,
    )
