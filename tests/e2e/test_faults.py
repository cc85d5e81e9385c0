"""Fault injection against a real local Ray: the faults a run meets, and what the run folder keeps.

Each test injects a real fault (a SIGKILLed driver or worker, a trainable that
raises, hangs, allocates or prints without end, a torn file, a second driver, a
full disk, hostile input) and checks that nothing finished was lost, nothing ran
twice, and, where it applies, that the decision is the one an unfaulted run gives.

Drivers that are killed run as `plan run` subprocesses with their own embedded Ray
under a private RAY_TMPDIR; their Ray processes are found by that folder (and
the process group) and ended afterwards. Everything else shares the session's
local Ray (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from planner import load_run, run
from planner._store.writer import read_jsonl
from tests._fault_runs import (
    TUNING,
    assert_each_planned_trial_once,
    by_id,
    contract,
    decisions,
    ids,
    planned,
)

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(900),
]  # generous: Ray starts slowly on a loaded machine

KINDS = [
    "raises",
    "no_report",
    "past_budget",
    "out_of_order",
    "non_numeric",
    "hangs_in_c",
    "hangs_in_python",
    "allocates",
    "prints_megabytes",
    "exits",
    "dies",
]
EXPECTED = {
    "raises": "failed",
    "no_report": "protocol_error",
    "past_budget": "protocol_error",
    "out_of_order": "protocol_error",
    "non_numeric": "protocol_error",
    "hangs_in_c": "timeout",
    "hangs_in_python": "timeout",
    "allocates": "oom",
    "prints_megabytes": "completed",
    "exits": "failed",
    "dies": "failed",
}


def fault_log(
    kind: str, injected: int, run_dir: Path, lost: int, duplicated: int, unchanged
) -> None:
    """One row of the fault table (bench/bench_faults.py reads these lines)."""
    target = os.environ.get("PLANNER_FAULT_LOG")
    if target:
        with open(target, "a") as handle:
            handle.write(
                json.dumps(
                    {
                        "fault": kind,
                        "injected": injected,
                        "lost": lost,
                        "duplicated": duplicated,
                        "decision_unchanged": unchanged,
                        "run_dir": str(run_dir),
                    }
                )
                + "\n"
            )


def lost_and_duplicated(run_dir: Path, before: dict[str, dict], skipped=()) -> tuple[int, int]:
    """(trials lost, trials duplicated): records that ended before the fault and are gone or
    changed after it, plus planned trials with no record at the end (but those the run skipped on
    purpose); ids twice."""
    after = by_id(run_dir)
    lost = sum(1 for k, r in before.items() if after.get(k) != r)
    lost += len(set(planned(run_dir)) - set(after) - set(before) - set(skipped))
    ended = ids(run_dir)
    return lost, len(ended) - len(set(ended))


# ------------------------------------------------------------------ a misbehaving trainable


def test_every_misbehaving_trainable_ends_as_a_logged_status_not_a_crashed_run(
    ray_local, in_repo, tmp_path
):
    arms = [{"name": kind, "overrides": [f"fault.kind={kind}"]} for kind in KINDS]
    path = contract(
        tmp_path,
        trainable="tests.trainables.faulty:by_kind",
        arms=arms,
        seeds=[0, 1],
        budget={"exposure": 3, "max_trial_time": "3s", "max_trial_memory": "400M"},
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result.reason
    assert_each_planned_trial_once(result.run_dir)
    records = by_id(result.run_dir)
    for kind in KINDS:
        for seed in (0, 1):
            record = records[f"confirm-{kind}-s{seed}"]
            assert record["status"] == EXPECTED[kind], (kind, record["status"], record["errors"])
            if EXPECTED[kind] != "completed":
                assert record["errors"] and record["errors"][-1]["message"], kind
    for seed in (0, 1):
        assert records[f"confirm-base-s{seed}"]["status"] == "completed"
    assert "max_trial_memory" in records["confirm-allocates-s0"]["errors"][0]["message"]
    assert "max_trial_time" in records["confirm-hangs_in_c-s0"]["errors"][0]["message"]
    assert records["confirm-dies-s0"]["errors"][0]["type"] == "WorkerDied"
    assert records["confirm-exits-s0"]["errors"][0]["type"] == "SystemExit"
    # the hang in C was killed by the worker's watchdog (its words), not by the driver's backstop
    # (which says only "stopped after budget.max_trial_time")
    hang = records["confirm-hangs_in_c-s0"]["errors"][0]["message"]
    assert "did not stop when asked, so its process was killed" in hang, hang
    # output: capped in trial.dir, never on the driver
    log = result.run_dir / "trials" / "confirm-prints_megabytes-s0" / "output.log"
    assert 1 << 20 <= log.stat().st_size < (1 << 20) + 4096
    assert "not kept" in log.read_text()[-200:]
    rows = {d["arm"]: d["decision"] for d in result.decisions}
    assert all(rows[k] == "incomplete" for k in KINDS if EXPECTED[k] != "completed")
    fault_log(
        "misbehaving trainable (raises, no report, past budget, out of order, non-numeric, hangs, "
        "allocates, prints, exits, dies)",
        len(KINDS) * 2,
        result.run_dir,
        *lost_and_duplicated(result.run_dir, {}),
        None,
    )


TUNE_KINDS = ["raises", "non_numeric", "hangs_in_c", "allocates", "dies"]


def test_misbehaving_trainables_in_tuning_end_as_logged_statuses(ray_local, in_repo, tmp_path):
    """The same faults inside Ray Tune (a function trainable in a reused actor) rather than plain
    tasks."""
    arms = [{"name": kind, "overrides": [f"fault.kind={kind}"]} for kind in TUNE_KINDS]
    values = {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.0, "lr": 0.01}}
    path = contract(
        tmp_path,
        trainable="tests.trainables.faulty:by_kind",
        arms=arms,
        seeds=[0, 1],
        config={"values": values},
        tuning={**TUNING, "trials_per_arm": 1},
        budget={"exposure": 3, "max_trial_time": "3s", "max_trial_memory": "400M"},
    )
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result.reason
    records = by_id(result.run_dir)
    ended = ids(result.run_dir)
    assert len(ended) == len(set(ended))
    for kind in TUNE_KINDS:
        record = records[f"tune-{kind}-s100-t000"]
        assert record["status"] == EXPECTED[kind], (kind, record["status"], record["errors"])
        assert record["errors"], kind
        assert (
            f"confirm-{kind}-s0" not in records
        )  # nothing completed in tuning: nothing to confirm
    assert records["tune-base-s100-t000"]["status"] == "completed"
    assert {records[f"confirm-base-s{s}"]["status"] for s in (0, 1)} == {"completed"}
    skipped = [e for e in load_run(result.run_dir).events if e["event"] == "trials_skipped"]
    assert sorted(skipped[0]["trial_ids"]) == sorted(
        f"confirm-{k}-s{s}" for k in TUNE_KINDS for s in (0, 1)
    )
    fault_log(
        "misbehaving trainable in tuning (Ray Tune)",
        len(TUNE_KINDS),
        result.run_dir,
        *lost_and_duplicated(result.run_dir, {}, skipped=skipped[0]["trial_ids"]),
        None,
    )


# ------------------------------------------------------------------ a `plan run` subprocess we can
# SIGKILL


class Driver:
    """`plan run` in a subprocess with its own embedded Ray under a private RAY_TMPDIR."""

    def __init__(self, path: Path, runs_dir: Path, *extra: str):
        import tempfile

        self.tmp = tempfile.mkdtemp(
            prefix="rf", dir="/tmp"
        )  # short: Ray's socket paths must fit 107 bytes
        self.runs_dir = runs_dir
        env = {**os.environ, "RAY_TMPDIR": self.tmp, "PYTHONPATH": str(REPO)}
        self.out = open(Path(self.tmp) / "driver.out", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "planner",
                "run",
                str(path),
                "--runs-dir",
                str(runs_dir),
                "--quiet",
                *extra,
            ],
            cwd=REPO,
            env=env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def run_dir(self, timeout: float = 300) -> Path:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = sorted(self.runs_dir.glob("*/*/run.json"))
            if found:
                return found[0].parent
            assert self.proc.poll() is None, self.output()
            time.sleep(0.05)
        raise AssertionError("the driver made no run folder")

    def wait_for(self, predicate, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            assert self.proc.poll() is None, (
                "the driver ended before the fault point:\n" + self.output()
            )
            time.sleep(0.02)
        raise AssertionError("the fault point was never reached:\n" + self.output())

    def kill(self) -> None:
        """SIGKILL the driver alone (its Ray goes down by fate-sharing), then clean up what is
        left."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.cleanup()

    def cleanup(self) -> None:
        import shutil

        import psutil

        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for _ in range(3):
            left = []
            for p in psutil.process_iter(["pid", "cmdline"]):
                try:
                    if (
                        self.tmp in " ".join(p.info["cmdline"] or [])
                        or os.getpgid(p.pid) == self.proc.pid
                    ):
                        left.append(p)
                except (psutil.Error, ProcessLookupError, OSError):
                    continue
            for p in left:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(left, timeout=5)
            if not left:
                break
        self.out.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def output(self) -> str:
        self.out.flush()
        return (Path(self.tmp) / "driver.out").read_text()[-3000:]


# The fault points poll a live run every 20 ms with the store's own reader of one file: load_run
# would build every table at each poll, on the cores the driver and its trials are running on.
def _records(run_dir: Path, phase: str) -> int:
    return sum(1 for r in read_jsonl(run_dir / "trials.jsonl") if r["phase"] == phase)


def _event(run_dir: Path, kind: str) -> bool:
    return any(e.get("event") == kind for e in read_jsonl(run_dir / "events.jsonl"))


def _started(run_dir: Path) -> int:
    return sum(1 for e in read_jsonl(run_dir / "events.jsonl") if e.get("event") == "trial_started")


KILL_POINTS = {
    # the first tuning trials running, none ended: on --resume each sweep has no finished trial and
    # its cut-short ones run again with their values; the sampler once started over from the
    # declared seed and drew them again
    "before a tuning trial ended": lambda d: _started(d) >= 2 and _records(d, "tune") == 0,
    "during tuning": lambda d: 2 <= _records(d, "tune") < 8,
    "between phases": lambda d: _event(d, "selected"),
    "during confirmation": lambda d: _records(d, "confirm") >= 2,
}


@pytest.fixture(scope="module")
def reference(ray_local, tmp_path_factory):
    """The unfaulted run of the kill tests' contract: its decisions are what every resumed run must
    give."""
    os.chdir(REPO)
    tmp = tmp_path_factory.mktemp("reference")
    path = contract(
        tmp,
        tuning=TUNING,
        config={"values": {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.15, "lr": 0.01}}},
    )
    result = run(path, runs_dir=tmp / "runs", quiet=True)
    assert result.state == "completed"
    return decisions(result.run_dir)


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_driver_killed_at_any_point_resumes_to_the_same_decision(
    point, reference, in_repo, tmp_path
):
    path = contract(
        tmp_path,
        tuning=TUNING,
        config={"values": {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.15, "lr": 0.01}}},
    )
    driver = Driver(path, tmp_path / "runs")
    try:
        run_dir = driver.run_dir()
        driver.wait_for(lambda: KILL_POINTS[point](run_dir))
        driver.kill()
    finally:
        driver.cleanup()
    before = by_id(run_dir)
    lock = json.loads((run_dir / "lock").read_text())
    assert lock["pid"] == driver.proc.pid  # the killed driver never released it

    result = run(path, runs_dir=tmp_path / "runs", resume=run_dir, quiet=True)
    assert result.state == "completed", result.reason
    assert_each_planned_trial_once(run_dir)
    lost, duplicated = lost_and_duplicated(run_dir, before)
    assert lost == 0 and duplicated == 0
    events = load_run(run_dir).events
    takeover = [e for e in events if e["event"] == "stale_lock_taken_over"]
    assert takeover and takeover[0]["pid"] == driver.proc.pid and "gone" in takeover[0]["reason"]
    records = by_id(run_dir)
    tune_counts = {}
    for r in records.values():
        if r["phase"] == "tune":
            tune_counts[r["arm"]] = tune_counts.get(r["arm"], 0) + 1
    assert tune_counts == {"base": TUNING["trials_per_arm"], "treat": TUNING["trials_per_arm"]}
    rerun = {t for e in events if e["event"] == "trials_rerun" for t in e["trial_ids"]}
    assert not rerun & set(before)  # nothing that ended ran again
    for (
        trial_id
    ) in rerun:  # run again with the tuned values it first started with, never a new draw
        started = [
            e["params"]
            for e in events
            if e["event"] == "trial_started" and e["trial_id"] == trial_id
        ]
        assert len(started) >= 2 and all(p == records[trial_id]["params"] for p in started), (
            trial_id,
            started,
        )
    for arm in (
        "base",
        "treat",
    ):  # each point tested once: a resumed sweep's sampler never draws its trials' again
        points = [
            r["params"]["fault.lr"]
            for r in records.values()
            if r["phase"] == "tune" and r["arm"] == arm
        ]
        assert len(set(points)) == len(points), (arm, points)
    recovered = {e["trial_id"] for e in events if e["event"] == "trial_recovered"}
    assert not recovered & rerun and not recovered & set(
        before
    )  # ended as the driver died: recorded, not rerun
    for (
        trial_id,
        r,
    ) in records.items():  # a trial continued from its checkpoint reports only what it had left
        resumed_from = run_dir / "trials" / trial_id / "resumed_from"
        if resumed_from.exists():
            assert r["resumed"] and trial_id in rerun
            assert r["reports"][0]["step"] == int(resumed_from.read_text().split()[0]) + 1
    same = _same_decisions(
        decisions(run_dir),
        reference,
        exact=point not in ("during tuning", "before a tuning trial ended"),
    )
    assert same, (decisions(run_dir), reference)
    fault_log(f"driver SIGKILL {point}", 1, run_dir, lost, duplicated, same)


def _same_decisions(got: list[dict], want: list[dict], exact: bool) -> bool:
    """The decisions an unfaulted run gives. Killed during tuning, the resumed sweeps draw new
    params (docs/reliability.md: the remaining suggestions can differ from an uninterrupted run's),
    so the tuned values selected, and the effect's last digits with them, may differ: the decision
    and its counts may not."""
    if exact:
        return got == want
    keys = ("arm", "decision", "n_arm", "n_baseline")
    return [{k: d.get(k) for k in keys} for d in got] == [
        {k: d.get(k) for k in keys} for d in want
    ] and all(abs(g["effect"] - w["effect"]) < 0.01 for g, w in zip(got, want, strict=True))


# ------------------------------------------------------------------ a Ray worker killed mid-trial


class WorkerKiller:
    """Runs `run()` in a thread; kills (SIGKILL) each worker that writes `pid.<attempt>` in a
    trial.dir of `arm`, once per attempt listed in `attempts`."""

    def __init__(self, runs_dir: Path, arm: str, attempts=(1,)):
        self.runs_dir, self.arm, self.attempts = runs_dir, arm, set(attempts)
        self.killed: dict[tuple[str, int], int] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.done.is_set():
            for pid_file in self.runs_dir.glob(f"*/*/trials/*-{self.arm}-*/pid.*"):
                if not pid_file.suffix[1:].isdigit():  # pid.1.tmp: being written
                    continue
                attempt = int(pid_file.suffix[1:])
                key = (pid_file.parent.name, attempt)
                if attempt in self.attempts and key not in self.killed:
                    try:
                        pid = int(pid_file.read_text())
                    except (OSError, ValueError):
                        continue
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed[key] = pid
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        return False


def test_a_worker_killed_mid_trial_is_retried_against_failures_retries(
    ray_local, in_repo, tmp_path
):
    """Tuning (Tune restarts the trial) and confirmation (the task is resubmitted): each kill uses
    one retry."""
    values = {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.0, "lr": 0.01}}
    tuning = {**TUNING, "trials_per_arm": 2}
    reference = run(
        contract(
            tmp_path,
            file="ref.yaml",
            config={"values": values},
            tuning=tuning,
            failures={"retries": 1},
        ),
        runs_dir=tmp_path / "ref",
        quiet=True,
    )
    path = contract(
        tmp_path,
        trainable="tests.trainables.faulty:by_kind",
        config={"values": values},
        tuning=tuning,
        failures={"retries": 1},
        arms=[{"name": "treat", "overrides": ["fault.level=0.7", "fault.kind=waits_to_be_killed"]}],
    )
    with WorkerKiller(tmp_path / "runs", "treat") as killer:
        result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed", result.reason
    assert_each_planned_trial_once(result.run_dir)
    treat = [r for r in by_id(result.run_dir).values() if r["arm"] == "treat"]
    assert len(treat) == 2 + 3 and len(killer.killed) == len(treat)
    for r in treat:
        assert r["status"] == "completed" and r["attempts"] == 2, r
        assert [e["type"] for e in r["errors"]] == ["WorkerDied"]
        assert (
            str(killer.killed[(r["trial_id"], 1)])
            in r["errors"][0]["message"] + r["errors"][0]["traceback"]
            or "died" in r["errors"][0]["message"]
        )
    same = [{k: v for k, v in d.items()} for d in decisions(result.run_dir)]
    assert same == decisions(reference.run_dir)
    fault_log(
        "Ray worker SIGKILL mid-trial (retried)",
        len(killer.killed),
        result.run_dir,
        *lost_and_duplicated(result.run_dir, {}),
        same == decisions(reference.run_dir),
    )


def test_a_worker_killed_on_every_attempt_fails_the_trial_and_the_run_goes_on(
    ray_local, in_repo, tmp_path
):
    values = {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.0, "always": True}}
    path = contract(
        tmp_path,
        trainable="tests.trainables.faulty:by_kind",
        config={"values": values},
        seeds=[0, 1],
        failures={"retries": 1},
        arms=[{"name": "treat", "overrides": ["fault.level=0.7", "fault.kind=waits_to_be_killed"]}],
    )
    with WorkerKiller(tmp_path / "runs", "treat", attempts=(1, 2)) as killer:
        result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed"
    assert_each_planned_trial_once(result.run_dir)
    records = by_id(result.run_dir)
    for seed in (0, 1):
        r = records[f"confirm-treat-s{seed}"]
        assert r["status"] == "failed" and r["attempts"] == 2
        assert [e["type"] for e in r["errors"]] == ["WorkerDied", "WorkerDied"]
        assert records[f"confirm-base-s{seed}"]["status"] == "completed"
    assert len(killer.killed) == 4
    assert {d["arm"]: d["decision"] for d in result.decisions} == {"treat": "incomplete"}
    fault_log(
        "Ray worker SIGKILL on every attempt (failed)",
        len(killer.killed),
        result.run_dir,
        *lost_and_duplicated(result.run_dir, {}),
        None,
    )


# ------------------------------------------------------------------ two drivers on one run folder:
# the lock

HOLD = (
    "import sys, time; from planner._store.lock import acquire; lock = acquire(sys.argv[1]); "
    "print('held', flush=True); time.sleep(60)"
)


def _finished_run(tmp_path, file="contract.yaml", **patch):
    path = contract(tmp_path, file=file, **patch)
    result = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed"
    return path, result.run_dir


def test_a_second_driver_is_refused_by_the_lock_naming_pid_and_host(
    ray_local, in_repo, tmp_path, capsys
):
    import socket

    from planner import RunLockedError
    from planner._cli.main import main

    path, run_dir = _finished_run(tmp_path)
    before = (run_dir / "trials.jsonl").read_bytes()
    before_records = by_id(run_dir)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline().strip() == b"held"
        with pytest.raises(
            RunLockedError, match=rf"pid {holder.pid} on host {socket.gethostname()}"
        ):
            run(path, runs_dir=tmp_path / "runs", resume=run_dir, quiet=True)
        assert (
            main(
                [
                    "run",
                    str(path),
                    "--runs-dir",
                    str(tmp_path / "runs"),
                    "--resume",
                    str(run_dir),
                    "--quiet",
                ]
            )
            == 3
        )
        err = capsys.readouterr().err
        assert f"pid {holder.pid}" in err and "Traceback" not in err
        # the holder dies by SIGKILL: its lock is stale, and the next driver takes it over with a
        # note
        holder.kill()
        holder.wait()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert (run_dir / "trials.jsonl").read_bytes() == before  # the refused drivers wrote nothing
    result = run(path, runs_dir=tmp_path / "runs", resume=run_dir, quiet=True)
    assert result.state == "completed"
    taken = [e for e in load_run(run_dir).events if e["event"] == "stale_lock_taken_over"]
    assert taken[-1]["pid"] == holder.pid
    assert not (run_dir / "lock").exists()
    fault_log(
        "second driver on one run folder",
        2,
        run_dir,
        *lost_and_duplicated(run_dir, before_records),
        None,
    )


def test_locks_after_a_reboot_are_stale_and_a_lock_from_another_host_is_not(tmp_path):
    from planner import RunLockedError
    from planner._store.lock import acquire

    (tmp_path / "lock").write_text(
        json.dumps(
            {
                "pid": 1,
                "host": os.uname().nodename,
                "boot_id": "another-boot",
                "started": "2026-01-01T00:00:00Z",
            }
        )
    )
    os.utime(tmp_path / "lock", (0, 0))
    lock = acquire(tmp_path)  # pid 1 is alive, but the machine rebooted since
    assert lock.took_over["reason"] == "the machine rebooted since it was taken"
    lock.release()
    assert not (tmp_path / "lock").exists()
    (tmp_path / "lock").write_text(
        json.dumps({"pid": 4242, "host": "gpu-node-7", "started": "2026-01-01T00:00:00Z"})
    )
    with pytest.raises(RunLockedError, match=r"pid 4242 on host gpu-node-7.*another host"):
        acquire(tmp_path)
    (tmp_path / "lock").write_text('{"pid": 12')  # torn by a driver killed while writing it
    os.utime(tmp_path / "lock", (0, 0))
    acquire(tmp_path).release()


# ------------------------------------------------------------------ torn writes


def test_a_torn_last_record_is_tolerated_and_its_trial_recorded_from_what_its_worker_kept(
    ray_local, in_repo, tmp_path, capsys
):
    """The trial had ended; only its line in trials.jsonl was torn: the record its worker kept in
    its folder is written on --resume (a `trial_recovered` event), and the trial does not run a
    second time."""
    from planner._cli.main import main

    path, run_dir = _finished_run(tmp_path)
    reference = decisions(run_dir)
    lines = (run_dir / "trials.jsonl").read_bytes().splitlines(keepends=True)
    torn_id = json.loads(lines[-1])["trial_id"]
    (run_dir / "trials.jsonl").write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    before = by_id(run_dir)
    assert torn_id not in before and len(before) == len(lines) - 1
    assert main(["status", str(run_dir)]) == 0
    assert main(["report", str(run_dir), "--format", "json"]) == 0
    capsys.readouterr()
    result = run(path, runs_dir=tmp_path / "runs", resume=run_dir, quiet=True)
    assert result.state == "completed"
    assert_each_planned_trial_once(run_dir)
    assert lost_and_duplicated(run_dir, before) == (0, 0)
    assert (run_dir / "trials.jsonl").read_bytes().endswith(b"\n")
    events = load_run(run_dir).events
    torn = [e for e in events if e["event"] == "torn_record_dropped"]
    assert torn and torn[0]["file"] == "trials.jsonl"
    assert [e["trial_id"] for e in events if e["event"] == "trial_recovered"] == [torn_id]
    assert not [e for e in events if e["event"] == "trials_rerun"]
    assert sum(1 for e in events if e["event"] == "trial_started" and e["trial_id"] == torn_id) == 1
    assert decisions(run_dir) == reference
    fault_log(
        "torn last record (truncated mid-line)",
        1,
        run_dir,
        *lost_and_duplicated(run_dir, before),
        decisions(run_dir) == reference,
    )


def test_no_file_is_written_in_place(tmp_path):
    """Atomic files go through a temporary name; a failing append leaves no half record behind."""
    from planner._store.jsonl import AppendFile
    from planner._store.writer import write_json

    target = tmp_path / "state.json"
    write_json(target, {"state": "running"})
    inode = target.stat().st_ino
    write_json(target, {"state": "completed"})
    assert target.stat().st_ino != inode  # replaced, not rewritten
    assert not list(tmp_path.glob(".*.tmp"))

    handle = AppendFile(tmp_path / "t.jsonl")
    handle.write_line('{"a": 1}\n')
    real_write = os.write

    def half_then_full(fd, data):  # the disk fills in the middle of a record
        os.write = real_write
        real_write(fd, bytes(data[:5]))
        raise OSError(28, "No space left on device")

    os.write = half_then_full
    try:
        with pytest.raises(OSError):
            handle.write_line('{"b": 2}\n')
    finally:
        os.write = real_write
    handle.close()
    assert (tmp_path / "t.jsonl").read_text() == '{"a": 1}\n'


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (root only); skipped where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_the_run_cleanly_and_resume_finishes_it(
    ray_local, in_repo, tmp_path, tiny_disk, capsys
):
    from planner._cli.main import main

    marker = tmp_path / "filled"
    values = {
        "fault": {
            "kind": "steady",
            "level": 0.5,
            "sleep": 0.0,
            "marker": str(marker),
            "fill_seed": 2,
        }
    }
    path = contract(
        tmp_path, trainable="tests.trainables.faulty:fills_the_disk", config={"values": values}
    )
    code = main(["run", str(path), "--runs-dir", str(tiny_disk), "--quiet"])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err and "No space left" in err, err
    run_dir = next(p for p in tiny_disk.glob("faults/*") if p.is_dir())
    before = by_id(run_dir)
    assert 0 < len(before) < 6
    assert all(line.endswith("}") for line in (run_dir / "trials.jsonl").read_text().splitlines())
    assert not (run_dir / "lock").exists()
    for filler in run_dir.glob("trials/*/filler"):
        filler.unlink()
    result = run(path, runs_dir=tiny_disk, resume=run_dir, quiet=True)
    assert result.state == "completed"
    assert_each_planned_trial_once(run_dir)
    assert lost_and_duplicated(run_dir, before) == (0, 0)
    fault_log("full disk", 1, run_dir, *lost_and_duplicated(run_dir, before), None)


# ------------------------------------------------------------------ security

SECRET_TOKEN = "tok-3f9a1c7e55d2"


def test_no_secret_reaches_the_run_folder_or_the_terminal(tmp_path):
    """A password and a token in the environment (a contract cannot hold one: P230): grep the whole
    run folder."""
    values = {"fault": {"kind": "steady", "level": 0.5, "sleep": 0.0}}
    path = contract(
        tmp_path,
        trainable="tests.trainables.faulty:by_kind",
        config={"values": values},
        seeds=[0, 1],
        arms=[
            {"name": "treat", "overrides": ["fault.level=0.7", "fault.kind=leaks_secret"]},
            {"name": "loud", "overrides": ["fault.level=0.6", "fault.kind=prints_megabytes"]},
        ],
    )
    os.environ["API_TOKEN"], os.environ["DB_PASSWORD"] = SECRET_TOKEN, "hunter2"
    try:
        driver = Driver(path, tmp_path / "runs")
    finally:
        del os.environ["API_TOKEN"], os.environ["DB_PASSWORD"]
    try:
        # treat fails on every seed: the run completes with no usable value for it (exit 4, issue
        # 11 item 5)
        assert driver.proc.wait(timeout=600) == 4, driver.output()
        output = driver.output()
    finally:
        driver.cleanup()
    assert (
        "error:      RuntimeError: could not log in with <redacted> / <redacted> (in 2 trials"
        in output
    )
    run_dir = next(p for p in (tmp_path / "runs").glob("faults/*") if p.is_dir())
    failed = by_id(run_dir)["confirm-treat-s0"]
    assert failed["status"] == "failed" and "<redacted>" in failed["errors"][0]["message"]
    assert failed["config"]["fault"]["kind"] == "leaks_secret" and "<redacted>" not in json.dumps(
        failed["config"]
    )
    assert "<redacted>" in (run_dir / "trials" / "confirm-treat-s0" / "output.log").read_text()
    seen = 0
    for file in run_dir.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            seen += 1
            assert b"hunter2" not in data and SECRET_TOKEN.encode() not in data, file
    assert seen > 10
    assert "hunter2" not in output and SECRET_TOKEN not in output
    assert len(output) < 20_000  # 2 x 20 MiB printed by `loud` never reached the driver's terminal
    loud = run_dir / "trials" / "confirm-loud-s0" / "output.log"
    assert (
        by_id(run_dir)["confirm-loud-s0"]["status"] == "completed"
        and loud.stat().st_size < (1 << 20) + 4096
    )
    identity = json.loads((run_dir / "identity.json").read_text())
    assert "API_TOKEN" not in identity["env"] and "DB_PASSWORD" not in identity["env"]
    fault_log(
        "secrets in config and environment", 2, run_dir, *lost_and_duplicated(run_dir, {}), None
    )
    fault_log(
        "trainable prints megabytes (subprocess driver)",
        2,
        run_dir,
        *lost_and_duplicated(run_dir, {}),
        None,
    )


HOSTILE = {
    "env resolver in values": {
        "config": {"values": {"fault": {"kind": "steady", "level": 0.5, "home": "${oc.env:HOME}"}}}
    },
    "decode resolver in an override": {
        "arms": [{"name": "treat", "overrides": ["fault.level=${oc.decode:0.7}"]}]
    },
    "custom resolver": {
        "config": {
            "values": {"fault": {"kind": "steady", "level": 0.5, "x": "${planner_custom:rm -rf}"}}
        }
    },
    "env resolver in the baseline": {
        "baseline": {"name": "base", "overrides": ["fault.level=${oc.env:HOME,0.5}"]}
    },
    "a name that climbs": {"name": "../../etc"},
    "an absolute name": {"name": "/tmp/evil"},
    "an arm that climbs": {"arms": [{"name": "../../x", "overrides": ["fault.level=0.7"]}]},
    "an arm with a slash": {"arms": [{"name": "a/b", "overrides": ["fault.level=0.7"]}]},
    "code as trainable": {"trainable": "__import__('os').system('touch /tmp/pwned')"},
    "a callable path": {"trainable": "os.path:join(1)"},
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_contracts_are_refused_before_anything_runs(case, tmp_path, capsys, monkeypatch):
    from planner._cli.main import main

    monkeypatch.chdir(REPO)
    marker = tmp_path / "pwned"
    path = contract(tmp_path, **HOSTILE[case])
    assert main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()
    assert not (tmp_path / "runs").exists() and not marker.exists()
    assert not list(tmp_path.parent.glob("etc")) and not Path("/tmp/evil").exists()


def test_yaml_tags_never_run_code(tmp_path, capsys, monkeypatch):
    from planner._cli.main import main

    monkeypatch.chdir(REPO)
    marker = tmp_path / "pwned"
    path = contract(tmp_path)
    text = path.read_text().replace(
        "hypothesis: The treatment raises val_acc.",
        f"hypothesis: !!python/object/apply:os.system ['touch {marker}']",
    )
    path.write_text(text)
    assert main(["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--quiet"]) == 1
    assert "tag" in capsys.readouterr().err and not marker.exists()


def test_resume_refuses_what_is_not_this_contracts_run_folder(tmp_path, capsys, monkeypatch):
    from planner._cli.main import main

    monkeypatch.chdir(REPO)
    path = contract(tmp_path)
    fake = tmp_path / "runs" / "faults" / "20260101-000000-abcd"
    fake.mkdir(parents=True)
    (fake / "run.json").write_text(
        json.dumps(
            {"run_id": "20260101-000000-abcd", "name": "faults", "contract_sha256": "0" * 64}
        )
    )
    other = tmp_path / "runs" / "other" / "20260101-000000-abcd"
    other.mkdir(parents=True)
    (other / "run.json").write_text(json.dumps({"run_id": other.name, "name": "other"}))
    link = tmp_path / "link"
    link.symlink_to(fake)
    cases = {
        "/etc": "not a run folder",
        str(tmp_path): "not a run folder",
        str(tmp_path / "nope"): "no such folder",
        str(link): "not a run folder",
        str(other): "not of 'faults'",
        str(fake): "another contract",
        str(fake / ".." / ".." / ".."): "not a run folder",
    }
    for target, message in cases.items():
        code = main(
            ["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--resume", target, "--quiet"]
        )
        err = capsys.readouterr().err
        assert code == 3 and message in err and "Traceback" not in err, (target, err)
    assert not (fake / "lock").exists() and not (fake / "trials.jsonl").exists()


# ------------------------------------------------------------------ the checkpoint convention, in
# the worker


def _spec(tmp_path, session="now", **extra):
    from planner._trial.spec import TrialSpec

    return TrialSpec(
        trial_id="confirm-base-s0",
        phase="confirm",
        arm="base",
        seed=0,
        index=0,
        params={},
        config={"fault": {"kind": "steady", "level": 0.5, "sleep": 0.0}},
        budget=4,
        dir=str(tmp_path / "trial"),
        trainable="tests.trainables.faulty:steady",
        metric="val_acc",
        path=(str(REPO),),
        extra={"session": session, **extra},
    )


def test_a_trial_cut_short_continues_from_its_checkpoint_and_a_finished_one_starts_over(
    tmp_path, monkeypatch
):
    from planner._trial.attempts import Ledger
    from planner._trial.protocol import run_trial

    monkeypatch.chdir(REPO)
    uninterrupted = run_trial(_spec(tmp_path / "clean"))
    assert [r["step"] for r in uninterrupted["reports"]] == [1, 2, 3, 4] and not uninterrupted[
        "resumed"
    ]

    spec = _spec(tmp_path, session="after-the-kill")
    old = Ledger.load(spec.dir, "killed-driver")
    old.start(1)  # the killed driver's attempt never ended
    (tmp_path / "trial" / "checkpoint.json").write_text('{"step": 2}')
    record = run_trial(spec)
    assert record["status"] == "completed" and record["resumed"] and record["attempts"] == 1
    assert [r["step"] for r in record["reports"]] == [3, 4]
    assert [r["metrics"] for r in record["reports"]] == [
        r["metrics"] for r in uninterrupted["reports"][2:]
    ]
    assert record["errors"] == []  # a killed driver is not the trial's fault: no retry used

    again = run_trial(
        _spec(tmp_path, session="after-a-torn-record")
    )  # the last attempt ran to its end
    assert not again["resumed"] and [r["step"] for r in again["reports"]] == [1, 2, 3, 4]
    assert [r["metrics"] for r in again["reports"]] == [
        r["metrics"] for r in uninterrupted["reports"]
    ]
