"""The one reader of a run folder (format: docs/run-folder.md).

`plan status`, `plan report`, `load_run`, export, MLflow, reeval, resume and
the pilot all read a run folder through here. Everything here only reads: a
run may be running while it is read. Every file is opened through
planner._store.files (a regular file inside the folder, no link followed,
size-capped) and checked against its schema (planner._store.schema) before
anything uses it. JSON lines follow one policy (`iter_jsonl`, documented in
docs/run-folder.md); a missing optional file reads as None. What cannot be
read raises `UsageError` (no such folder, not a run folder) or `RunError`
(exit 3: a file that is not valid JSON, of the wrong shape, a link, a FIFO,
...), each with one sentence naming the file and, for a wrong shape, the field.
No pandas here: `plan status` uses these readers alone.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner._core.errors import RunError, UsageError
from planner._store.files import LINE_CAP, open_stream, read_inside

try:  # optional: about twice as fast on trials.jsonl; the standard library is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

RUN_MARKERS = ("run.json", "contract.yaml")


def _loads(line: bytes, where: str = "a JSON value") -> Any:
    """One JSON value; NaN and Infinity (as Python's json writes them) are accepted.

    Within the limits of planner._store.bounds (depth, 64-bit integers), else RunError naming `where`."""
    from planner._store.bounds import check_value, long_digits, quick_ok, too_deep

    data = line if isinstance(line, bytes) else str(line).encode()
    value: Any = _NOTHING
    if _orjson is not None and not long_digits(data):  # orjson reads a huge integer as a float: not here
        try:
            value = _orjson.loads(line)
        except _orjson.JSONDecodeError:
            pass  # NaN / Infinity, which orjson refuses: the standard library reads them
    if value is _NOTHING:
        try:
            value = json.loads(line)
        except RecursionError:
            raise too_deep(where) from None
    if not quick_ok(data):
        check_value(value, where)
    return value


_NOTHING = object()


@dataclass
class JsonLines:
    """The records of a JSON lines file and what was skipped while reading it."""

    records: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    torn: bool = False


def _recover(line: bytes, where: str = "a JSON value") -> dict[str, Any] | None:
    """The whole JSON object that ends a damaged line, if there is one.

    A run that crashed mid-append and then resumed glues its next record onto
    the torn one: `{"trial_id": "a", "pha{"trial_id": "b", ...}`. Only the start
    of a top-level object parses through to the end of the line (a nested one
    leaves its enclosing brackets over), so the last whole record is found by
    trying each `{` from the right.
    """
    line = line.rstrip()
    pos = len(line)
    for _ in range(100_000):
        pos = line.rfind(b"{", 0, pos)
        if pos <= 0:
            return None
        try:
            value = _loads(line[pos:], where)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def iter_jsonl(path: Path, notes: list[str], *, root: Path | None = None,
               check: Any = None) -> Iterator[dict[str, Any]]:
    """Stream the records of an append-only JSON lines file (none when it is missing).

    A last line that does not parse is a torn write: it is skipped, and a note
    says so. A line inside the file that does not parse is a torn write that a
    resumed run appended after: the whole record at its end is kept and the torn
    part skipped (noted); a line with no whole record is skipped (noted). A line
    that holds JSON but not an object is a RunError: that is not a trials log.
    The file is read line by line: memory stays flat. It must be a regular file inside `root` (default: its
    folder), reached without following a link; a line longer than 256 MiB is refused (RunError).
    `check(record, where)` (a schema check from planner._store.schema) is run on every record kept.
    """
    f = open_stream(path.parent if root is None else root, path)
    if f is None:
        return
    bad: tuple[int, bytes] | None = None  # a line that did not parse: torn if nothing follows it
    with f:
        for number, line in enumerate(iter(lambda: f.readline(LINE_CAP + 1), b""), start=1):
            if len(line) > LINE_CAP:
                raise RunError(f"line {number} of {path} is longer than {LINE_CAP >> 20} MiB: it is not a record a "
                               "run wrote")
            if not line.strip():
                continue
            if bad is not None:
                recovered = _recover(bad[1], f"line {bad[0]} of {path}")
                if recovered is None:
                    notes.append(f"line {bad[0]} of {path.name} is damaged (not valid JSON) and was skipped")
                else:
                    notes.append(f"line {bad[0]} of {path.name} starts with a write cut short (a crash before a "
                                 "resume): that part was skipped, the whole record after it kept")
                    if check is not None:
                        check(recovered, f"line {bad[0]} of {path}")
                    yield recovered
                bad = None
            try:
                value = _loads(line, f"line {number} of {path}")
            except ValueError:
                bad = (number, line)
                continue
            if not isinstance(value, dict):
                raise RunError(f"line {number} of {path} is not a JSON object: this is not a run's log")
            if check is not None:
                check(value, f"line {number} of {path}")
            yield value
    if bad is not None:
        notes.append(f"the last line of {path.name} (line {bad[0]}) is incomplete, as a write cut short "
                     "leaves it, and was skipped")


def read_jsonl(path: Path, *, slim: dict[str, Any] | None = None, root: Path | None = None) -> JsonLines:
    """Every record of a JSON lines file, each checked against the schema of its file (by its name).

    With `slim` (a contract), trial records are slimmed.
    """
    from planner._store.schema import checker

    notes: list[str] = []
    records = iter_jsonl(path, notes, root=root, check=checker(path.name))
    if slim is None:
        records = list(records)
    else:
        records = [slim_record(r, slim) for r in records]
    return JsonLines(records, notes, torn=bool(notes))


def read_json(path: Path, *, required: bool = False, root: Path | None = None) -> dict[str, Any] | None:
    """A JSON object file (written atomically); None when absent and not required.

    The file must be a regular file inside `root` (default: its folder), reached without following a link,
    of at most 64 MiB, and its content must match the schema of its name (planner._store.schema).
    """
    from planner._store.schema import checker

    text = read_inside(path.parent if root is None else root, path)
    if text is None:
        if required:
            raise RunError(f"{path} is missing: the run folder is incomplete")
        return None
    try:
        value = _loads(text, str(path))
    except ValueError:
        raise RunError(f"{path} is not valid JSON: the file is damaged") from None
    if not isinstance(value, dict):
        raise RunError(f"{path} does not hold a JSON object")
    check = checker(path.name)
    if check is not None:
        check(value, str(path))
    return value


def read_yaml(path: Path, *, required: bool = False, root: Path | None = None) -> dict[str, Any] | None:
    """A YAML mapping file of the run (contract.yaml, configs/<arm>.yaml), opened as `read_json` opens one."""
    import yaml

    data = read_inside(path.parent if root is None else root, path)
    if data is None:
        if required:
            raise RunError(f"{path} is missing: the run folder is incomplete")
        return None
    try:
        value = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RunError(f"{path} is not UTF-8 text: the file is damaged") from None
    except yaml.YAMLError:
        raise RunError(f"{path} is not valid YAML: the file is damaged") from None
    except RecursionError:
        from planner._store.bounds import too_deep

        raise too_deep(str(path)) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RunError(f"{path} does not hold a mapping")
    return value


class RunFolder:
    """A run folder on disk: paths and small, tolerant reads of its files."""

    def __init__(self, path: Path):
        self.path = path

    def file(self, name: str) -> Path:
        return self.path / name

    def json(self, name: str) -> dict[str, Any] | None:
        """A JSON file of the run, checked (None when absent)."""
        return read_json(self.file(name), root=self.path)

    def run_info(self) -> dict[str, Any]:
        info = self.json("run.json") or {}
        info.setdefault("run_id", self.path.name)
        return info

    def contract(self) -> dict[str, Any]:
        """The frozen contract as plain data ({} when a run wrote none yet)."""
        return read_yaml(self.file("contract.yaml"), root=self.path) or {}

    def state(self) -> dict[str, Any] | None:
        return self.json("state.json")

    def identity(self) -> dict[str, Any] | None:
        return self.json("identity.json")

    def plan(self) -> dict[str, Any] | None:
        return self.json("plan.json")

    def selection(self) -> dict[str, Any] | None:
        return self.json("selection.json")

    def decisions(self) -> dict[str, Any] | None:
        return self.json("decisions.json")

    def lock(self) -> dict[str, Any] | None:
        """The lock's holder, or None. A lock that does not parse is still a lock; a link or a FIFO is refused."""
        from planner._store.schema import check_lock

        data = read_inside(self.path, self.file("lock"), cap=1 << 20)
        if data is None:
            return None
        try:
            value = _loads(data, str(self.file("lock")))
        except ValueError:
            value = None
        if not isinstance(value, dict):
            return {"pid": None, "host": None, "started": None}
        check_lock(value, str(self.file("lock")))
        return value

    def trials(self, *, slim: dict[str, Any] | None = None) -> JsonLines:
        """trials.jsonl; pass the contract as `slim` to drop reports not needed for the facts below."""
        return read_jsonl(self.file("trials.jsonl"), slim=slim, root=self.path)

    def iter_trials(self, notes: list[str]) -> Iterator[dict[str, Any]]:
        """trials.jsonl streamed, each record checked (memory stays flat)."""
        from planner._store.schema import checker

        return iter_jsonl(self.file("trials.jsonl"), notes, root=self.path, check=checker("trials.jsonl"))

    def events(self) -> JsonLines:
        return read_jsonl(self.file("events.jsonl"), root=self.path)

    def reevals(self) -> JsonLines:
        return read_jsonl(self.file("reevals.jsonl"), root=self.path)

    def configs(self) -> dict[str, dict[str, Any]]:
        """Each arm's effective config from configs/<arm>.yaml, by arm name."""
        folder = self.file("configs")
        if folder.is_symlink():
            raise RunError(f"{folder} is a symbolic link, not a folder inside the run folder: planner follows no "
                           "link there; replace it with the folder the run wrote, or remove it")
        if not folder.is_dir():
            return {}
        return {p.stem: read_yaml(p, root=self.path) or {} for p in sorted(folder.glob("*.yaml"))}

    def unresolved_configs(self) -> dict[str, dict[str, Any]]:
        """The arms whose config has interpolations: configs/unresolved/<arm>.yaml, before resolving."""
        folder = self.file("configs") / "unresolved"
        return {p.stem: read_yaml(p) or {} for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def open_run(run_dir: str | os.PathLike) -> RunFolder:
    """Check that `run_dir` is a run folder and return it; a clear UsageError otherwise."""
    path = Path(run_dir)
    if not path.exists():
        raise UsageError(f"{path} does not exist: give the path of a run folder, like runs/<name>/<run id>")
    if not path.is_dir():
        raise UsageError(f"{path} is a file, not a run folder: give the folder that holds run.json")
    if not any((path / marker).is_file() for marker in RUN_MARKERS):
        subruns = sorted(p.name for p in path.iterdir() if p.is_dir() and (p / "run.json").is_file())
        hint = f"; it holds runs: {', '.join(subruns[-3:])}" if subruns else ""
        raise UsageError(f"{path} is not a run folder: it has no run.json or contract.yaml{hint}")
    return RunFolder(path)


# Small accessors for the frozen contract, tolerant of a partial one.


def contract_get(contract: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """The value at a dotted path of the frozen contract; `default` when it is absent or null."""
    from planner._contract.paths import get_path

    value = get_path(contract, dotted, None)
    return default if value is None else value


def arm_names(contract: dict[str, Any]) -> list[str]:
    """The baseline first, then the treatment arms, in contract order."""
    names = [contract_get(contract, "baseline.name")]
    names += [a.get("name") for a in contract.get("arms") or [] if isinstance(a, dict)]
    return [n for n in names if n]


def planned_count(plan: dict[str, Any] | None) -> int | None:
    """The planned number of trials: plan.json's `planned_count`, else its trials counted."""
    if not plan:
        return None
    for key in ("planned_count", "planned_trials"):
        if isinstance(plan.get(key), int):
            return plan[key]
    return len(planned_trials(plan)) or None


def planned_trials(plan: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The planned trials of plan.json, each with its phase, in plan order."""
    if not plan:
        return []
    out: list[dict[str, Any]] = []
    for phase in plan.get("phases") or []:
        name = phase.get("phase") or phase.get("name")
        for trial in phase.get("trials") or []:
            out.append({"phase": trial.get("phase", name), **trial})
    for trial in plan.get("trials") or []:  # a flat list is accepted too
        out.append(trial)
    return out


# Facts computed from trial records, without pandas (shared by status and results).

FAILED_STATUSES = ("failed", "diverged", "protocol_error", "timeout", "oom")


def reports_of(record: dict[str, Any]) -> list[Any]:
    """The record's reports; anything but a list (a damaged record) reads as none."""
    reports = record.get("reports")
    return reports if isinstance(reports, list) else []


def record_last_step(record: dict[str, Any]) -> Any:
    if "_last_step" in record:
        return record["_last_step"]
    reports = reports_of(record)
    return reports[-1].get("step") if reports and isinstance(reports[-1], dict) else None


def report_timing(record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """(first step, its time_s, last step, its time_s) of the record's reports (cached as `_timing`)."""
    if "_timing" in record:
        return record["_timing"]
    reports = reports_of(record)
    first = reports[0] if reports and isinstance(reports[0], dict) else {}
    last = reports[-1] if reports and isinstance(reports[-1], dict) else {}
    return first.get("step"), first.get("time_s"), last.get("step"), last.get("time_s")


def seconds_per_step(record: dict[str, Any]) -> float | None:
    """Seconds per step of one trial: the slope of its reports' time_s over their steps.

    Set-up inside the trainable (before the first report) is not a step. A trial
    with one report: its time_s over its step. None without timed reports.
    """
    if "_s_per_step" in record:
        return record["_s_per_step"]
    s0, t0, s1, t1 = report_timing(record)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (s0, t0, s1, t1)):
        slope = None
    elif s1 > s0:
        slope = max(0.0, (t1 - t0) / (s1 - s0))
    else:
        slope = t1 / s1 if s1 > 0 else None
    record["_s_per_step"] = slope  # cached: the report's cost and the audit both ask
    return slope


def metric_names(record: dict[str, Any]) -> set[str]:
    """The names of the metrics a trial reported (cached in the record under `_metric_names`)."""
    names = record.get("_metric_names")
    if names is None:
        names = set().union(*[p.get("metrics") or {} for p in reports_of(record) if isinstance(p, dict)])
        record["_metric_names"] = names
    return names


def slim_record(record: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
    """The record without its reports, unless they show a violation (kept for `violations`).

    What the facts below need from the reports is cached first: the metric names
    and the last step. A run of 10k trials x 100 reports then fits in little memory.
    """
    reports = reports_of(record)
    names = metric_names(record)
    last = reports[-1] if reports and isinstance(reports[-1], dict) else {}
    record["_last_step"] = last.get("step")
    record["_timing"] = report_timing(record)
    exposure = contract_get(contract, "budget.exposure")
    heldout = contract_get(contract, "metric.heldout")
    steps = [s for s in (record.get("exposure"), record["_last_step"]) if isinstance(s, int | float)]
    anomalous = (exposure is not None and any(s > exposure for s in steps)) or (
        heldout is not None and record.get("phase") == "tune" and heldout in names)
    if not anomalous:
        record["reports"] = []
    return record


def traceback_line(traceback: str | None) -> str:
    """The line of a traceback that says where it broke: its innermost `File ...` line."""
    if not traceback:
        return ""
    frames = [line.strip() for line in traceback.splitlines() if line.strip().startswith("File ")]
    if frames:
        return frames[-1]
    lines = [line.strip() for line in traceback.splitlines() if line.strip()]
    return lines[0] if lines else ""


def failures(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trials that did not end well, and trials that needed retries, with their last error."""
    out = []
    for r in records:
        errors = r.get("errors") or []
        status = r.get("status")
        if status not in FAILED_STATUSES and not errors:
            continue
        last = errors[-1] if errors and isinstance(errors[-1], dict) else {}
        message = last.get("message") or ""
        if not last and status == "diverged":
            message = "the decision metric went NaN or infinite"
        out.append({
            "trial_id": r.get("trial_id"), "phase": r.get("phase"), "arm": r.get("arm"), "seed": r.get("seed"),
            "status": status, "attempts": r.get("attempts", 1), "error_type": last.get("type") or "",
            "message": message, "where": traceback_line(last.get("traceback")),
            "retried": len(errors) > 0 and status not in FAILED_STATUSES,
        })
    return out


NOT_VIOLATIONS = {"diverged"}  # logged as notes by the runner, but a result (see failures), not a broken rule
_PAST_BUDGET = re.compile(r"step (\d+) is past the budget", re.IGNORECASE)


def violations(records: list[dict[str, Any]], contract: dict[str, Any]) -> list[dict[str, Any]]:
    """Every protocol violation: logged ones, plus what the records show unlogged.

    Kinds: `heldout_in_tuning` (the held-out metric reported while tuning: test
    exposure), `report_past_budget` (a report after step budget.exposure), and
    whatever other kinds the run logged. `source` says where it was found:
    `logged` (the record's violations), `reports` (its reports show it) or
    `error` (its protocol error says so; a protocol_error trial is always listed).
    """
    exposure = contract_get(contract, "budget.exposure")
    heldout = contract_get(contract, "metric.heldout")
    out = []
    for r in records:
        base = {"trial_id": r.get("trial_id"), "phase": r.get("phase"), "arm": r.get("arm"), "seed": r.get("seed")}
        kinds = set()
        for v in r.get("violations") or []:
            if not isinstance(v, dict) or v.get("kind") in NOT_VIOLATIONS:
                continue
            kind = str(v.get("kind", "unknown"))
            if kind == "heldout_in_tuning" and kind in kinds:  # one per trial, at its first step (older runs
                continue  # logged one per step)
            kinds.add(kind)
            detail = ", ".join(f"{k}={v[k]}" for k in v if k not in ("kind", "step"))
            out.append({**base, "kind": kind, "step": v.get("step"), "detail": detail, "source": "logged"})
        reports = [p for p in reports_of(r) if isinstance(p, dict)]
        last_step = record_last_step(r)
        if (exposure is not None and "report_past_budget" not in kinds
                and any(isinstance(s, int | float) and s > exposure for s in (r.get("exposure"), last_step))):
            past = [p.get("step") for p in reports if isinstance(p.get("step"), int | float) and p["step"] > exposure]
            kinds.add("report_past_budget")
            out.append({**base, "kind": "report_past_budget", "step": past[0] if past else r.get("exposure"),
                        "detail": f"budget={exposure}", "source": "reports"})
        if heldout and r.get("phase") == "tune" and "heldout_in_tuning" not in kinds and heldout in metric_names(r):
            steps = [p.get("step") for p in reports if heldout in (p.get("metrics") or {})]
            if steps:
                kinds.add("heldout_in_tuning")
                out.append({**base, "kind": "heldout_in_tuning", "step": steps[0],
                            "detail": f"metric={heldout}", "source": "reports"})
        if r.get("status") == "protocol_error" and not kinds:
            errors = r.get("errors") or [{}]
            message = str((errors[-1] or {}).get("message", ""))
            past = _PAST_BUDGET.search(message)
            out.append({**base, "kind": "report_past_budget" if past else "protocol_error",
                        "step": int(past.group(1)) if past else r.get("exposure"), "detail": message,
                        "source": "error"})
    return out


def heldout_tuning_trials(records: list[dict[str, Any]], heldout: str | None) -> list[dict[str, Any]]:
    """Tuning trials that reported the held-out metric (test exposure): one entry per trial, the last
    record of a trial logged twice. Their reports show it, or (reports the driver rebuilt from what Tune
    streamed, where the held-out metric is never sent) their logged `heldout_in_tuning` violation."""
    if not heldout:
        return []
    latest = {r.get("trial_id"): r for r in records if r.get("phase") == "tune"}
    return [r for r in latest.values() if heldout in metric_names(r) or any(
        isinstance(v, dict) and v.get("kind") == "heldout_in_tuning" for v in r.get("violations") or [])]


def heldout_ledger(records: list[dict[str, Any]], contract: dict[str, Any]) -> dict[str, Any]:
    """How often the held-out metric was evaluated, against its cap.

    Evaluations are the confirmation and reeval trials that reported it; a
    tuning trial that reported it is test exposure, counted apart.
    """
    metric = contract_get(contract, "metric.heldout")
    cap = contract_get(contract, "budget.max_heldout_evaluations")
    by_phase = {"confirm": 0, "reeval": 0, "tune": 0}
    by_arm: dict[str, int] = {}
    if metric:
        for r in records:
            phase = r.get("phase")
            if phase not in by_phase:
                continue
            if metric in metric_names(r):
                by_phase[phase] += 1
                if phase != "tune":
                    by_arm[r.get("arm")] = by_arm.get(r.get("arm"), 0) + 1
    evaluations = by_phase["confirm"] + by_phase["reeval"]
    return {
        "metric": metric, "evaluations": evaluations, "confirm": by_phase["confirm"],
        "reeval": by_phase["reeval"], "tuning_exposures": len(heldout_tuning_trials(records, metric)),
        "by_arm": by_arm,
        "cap": cap, "over_cap": cap is not None and evaluations > cap,
    }


def _finite(value: Any) -> float:
    """A number from a record, 0 when it is absent or not a finite number."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value and abs(value) != float("inf"):
        return float(value)
    return 0.0


def _seconds(value: Any) -> float | None:
    """'90', '20m', '2h', '1d' or a number -> seconds; None when absent or unreadable.

    The same grammar as planner._contract.model.parse_duration, without importing pydantic.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    unit = text[-1:] if text[-1:] in "smhd" else ""
    try:
        number = float(text[: len(text) - len(unit)])
    except ValueError:
        return None
    return number * {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}[unit]


def budget_used(records: list[dict[str, Any]], contract: dict[str, Any], state: dict[str, Any] | None,
                plan: dict[str, Any] | None) -> dict[str, Any]:
    """Trials, steps of exposure and wall time used, against what was planned and allowed.

    `plan reeval` trials are not part of the plan: they are counted apart (`reeval_trials`, `reeval_steps`).
    """
    reeval = [r for r in records if r.get("phase") == "reeval"]
    records = [r for r in records if r.get("phase") != "reeval"]
    exposure = contract_get(contract, "budget.exposure")
    n_planned = planned_count(plan)
    steps = int(sum(_finite(r.get("exposure")) for r in records))
    st_budget = (state or {}).get("budget") or {}
    max_wall = contract_get(contract, "budget.max_wall_time")
    max_wall_s = _seconds(max_wall)
    return {
        "trials_ended": len(records), "trials_planned": n_planned,
        "max_trials": contract_get(contract, "budget.max_trials"),
        "steps": steps, "steps_planned": None if not (n_planned and exposure) else n_planned * exposure,
        "unit": contract_get(contract, "budget.unit", "step"),
        "wall_time_s": st_budget.get("wall_time_s"), "max_wall_time_s": max_wall_s,
        "trial_time_s": round(sum(_finite(r.get("duration_s")) for r in records), 3),
        "reeval_trials": len(reeval), "reeval_steps": int(sum(_finite(r.get("exposure")) for r in reeval)),
    }
