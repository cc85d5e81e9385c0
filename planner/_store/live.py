"""What a running `plan run` shows before its trials end: the live reports, its progress, `latest`.

A trial's record (trials.jsonl) is written when the trial ends; until then its reports exist only
in the driver. So the driver appends each report as Tune hands it over to `live/reports.jsonl` (one
`LiveReport` a line, flushed, not fsync'd: a trial's record supersedes them at its end, and a lost
line costs a point of a live curve), and rewrites `live/progress.json` (`LiveProgress`: the phase,
the steps done and expected, the ETA) as trials start, report and end. `plan status` and `plan
report` read both for the trials that have no record yet. Every file is opened through
planner._store.files (no link followed).

`runs/<contract name>/latest` is a small file (never a link) holding the id of the run that started
last there; `follow_latest` turns it, or a run folder, into the run folder every command reads.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from pathlib import Path
from typing import Any

import msgspec

from planner._core.errors import RunError, UsageError
from planner._core.text import shown_path, utc_now
from planner._store.files import JSONL_CAP, open_inside, read_inside, write_atomic

LIVE_REPORTS = "live/reports.jsonl"
LIVE_PROGRESS = "live/progress.json"
LATEST = "latest"
# the arms' tuning studies: an Optuna journal file the driver writes, one study per arm
STUDIES_FILE = "studies.log"
RUN_ID_CAP = 200  # a run id is a timestamp and four hex digits; anything longer is not a pointer


def dashboard_command(run_dir: str | os.PathLike) -> str | None:
    """The command that opens a run's tuning studies in optuna-dashboard (it reads the journal file
    while the run writes it), or None while the run has none."""
    path = Path(run_dir) / STUDIES_FILE
    if path.is_symlink() or not path.is_file():
        return None
    return f"optuna-dashboard {shlex.quote(shown_path(path))}"


class LiveReport(msgspec.Struct, forbid_unknown_fields=False):
    """One report of a running trial, as the driver received it (a non-finite value is written
    null)."""

    trial_id: str
    step: int
    time_s: float
    metrics: dict[str, float | None]


class LiveProgress(msgspec.Struct, forbid_unknown_fields=False):
    """The driver's progress as it last wrote it: what `plan status` cannot count from the
    records."""

    phase: str
    updated: str
    elapsed_s: float
    steps_done: int
    steps_expected: float | None = None
    eta_s: float | None = None


_report_decoder = msgspec.json.Decoder(LiveReport)
_progress_decoder = msgspec.json.Decoder(LiveProgress)
_encoder = msgspec.json.Encoder()


def _finite_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None


class LiveWriter:
    """The driver's appender of live reports and writer of its progress, in one run folder."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.fd = -1

    def report(self, trial_id: str, step: int, time_s: float, metrics: dict) -> None:
        """Append one report as one whole line (a torn line is read as not yet written)."""
        line = LiveReport(
            trial_id=str(trial_id),
            step=int(step),
            time_s=float(time_s),
            metrics={str(k): _finite_or_none(v) for k, v in metrics.items()},
        )
        if self.fd < 0:
            self.fd = open_inside(
                self.root, self.root / LIVE_REPORTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT
            )
        os.write(self.fd, _encoder.encode(line) + b"\n")

    def progress(self, progress: LiveProgress) -> None:
        # made here when no report came first; a link in its place is refused by write_atomic below
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.root / LIVE_PROGRESS.split("/")[0])
        write_atomic(
            self.root / LIVE_PROGRESS, _encoder.encode(progress), root=self.root, durable=False
        )

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def new_progress(
    phase: str, elapsed_s: float, steps_done: int, expected: float | None, eta_s: float | None
) -> LiveProgress:
    return LiveProgress(phase, utc_now(), round(elapsed_s, 3), steps_done, expected, eta_s)


def read_live_reports(root: str | os.PathLike) -> dict[str, list[LiveReport]]:
    """trial id -> its live reports in the order they came; {} when the run wrote none.

    A line that is not a whole `LiveReport` (the last one, torn while it was written) is left
    out."""
    data = read_inside(root, Path(root) / LIVE_REPORTS, cap=JSONL_CAP)
    out: dict[str, list[LiveReport]] = {}
    for line in (data or b"").splitlines():
        try:
            report = _report_decoder.decode(line)
        except msgspec.DecodeError:
            continue
        out.setdefault(report.trial_id, []).append(report)
    return out


RUNNING = "running"  # the status of a trial read from its live reports: started, no record yet


def running_records(
    root: str | os.PathLike, planned: list[dict], ended: set[str]
) -> list[dict[str, Any]]:
    """A record-shaped dict for each trial with live reports and no record among `ended`: its plan
    entry's trial_id, phase, arm and seed, status `running`, exposure its latest step, its reports
    so far. Only for readers that show a running run (a curve); never written, never a fact of the
    run."""
    by_id = {p.get("trial_id"): p for p in planned}
    out: list[dict[str, Any]] = []
    for trial_id, reports in read_live_reports(root).items():
        if trial_id in ended or trial_id not in by_id:
            continue
        entry = by_id[trial_id]
        out.append(
            {
                "trial_id": trial_id,
                "phase": entry.get("phase"),
                "arm": entry.get("arm"),
                "seed": entry.get("seed"),
                "status": RUNNING,
                "exposure": reports[-1].step,
                "reports": [
                    {"step": r.step, "time_s": r.time_s, "metrics": dict(r.metrics)}
                    for r in reports
                ],
            }
        )
    return out


def read_live_progress(root: str | os.PathLike) -> LiveProgress | None:
    data = read_inside(root, Path(root) / LIVE_PROGRESS)
    if not data:
        return None
    try:
        return _progress_decoder.decode(data)
    except msgspec.DecodeError:
        return None


def write_latest(runs_dir: str | os.PathLike, name: str, run_id: str) -> None:
    """Point runs/<name>/latest at `run_id` (replaced atomically; a link there is replaced, not
    followed)."""
    base = Path(runs_dir) / name
    write_atomic(base / LATEST, run_id + "\n", root=base, durable=False)


def follow_latest(run_dir: str | os.PathLike) -> Path:
    """The run folder a command reads: `run_dir` itself, or the run a `latest` pointer file names.

    A `latest` that is a plain file holds a run id: the folder of that name beside it. Anything
    else in it is refused with a sentence; a folder (or any other path) is returned as it is, for
    the reader to check."""
    path = Path(run_dir)
    if path.name != LATEST or path.is_symlink() or not path.is_file():
        return path
    try:
        data = read_inside(path.parent, path, cap=RUN_ID_CAP)
    except (RunError, OSError) as error:  # a pointer past the cap, or unreadable: say what it is
        raise UsageError(f"{path} is not a run pointer: {error}") from None
    text = (data or b"").decode("utf-8", "replace").strip()
    if not text or "/" in text or text in (".", "..") or not text.isprintable():
        raise UsageError(
            f"{path} should hold the id of a run beside it (as `plan run` writes it), not "
            f"{text[:40]!r}: give the run folder itself, like {path.parent}/<run id>"
        )
    target = path.parent / text
    if not target.is_dir():
        raise UsageError(
            f"{path} names run {text!r}, but {target} is not a folder: the run was moved or "
            "removed; "
            f"give the run folder itself"
        )
    return target
