"""The run folder's writes: atomic files, append-only lines, a torn last line, the lock."""

import json
import os
import socket

import pytest

from planner import RunLockedError
from planner._store.writer import RunStore, new_run_id, read_jsonl


def test_run_id_is_utc_time_and_four_hex():
    import re

    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", new_run_id())


def test_create_makes_a_fresh_folder_per_run(tmp_path):
    a, b = RunStore.create(tmp_path, "demo"), RunStore.create(tmp_path, "demo")
    assert a.root != b.root and a.root.parent == tmp_path / "demo"
    assert (a.root / "configs").is_dir() and (a.root / "trials").is_dir()


def test_appended_lines_survive_and_a_torn_last_line_is_skipped(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    store.record_trial({"trial_id": "x", "status": "completed"})
    store.record_trial({"trial_id": "y", "status": "failed"})
    store.close()
    with open(store.root / "trials.jsonl", "a") as handle:
        handle.write('{"trial_id": "z", "sta')  # a crash mid-write
    assert [r["trial_id"] for r in read_jsonl(store.root / "trials.jsonl")] == ["x", "y"]


def test_state_is_replaced_atomically_and_leaves_no_temporary_file(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    store.write_state("running", wall_time_s=1.5, trials_ended=2)
    store.write_state("completed", reason="done", wall_time_s=3.0, trials_ended=4)
    state = json.loads((store.root / "state.json").read_text())
    assert state["state"] == "completed" and state["budget"] == {
        "wall_time_s": 3.0,
        "trials_ended": 4,
    }
    assert not [p for p in os.listdir(store.root) if p.endswith(".tmp")]


def test_non_finite_numbers_never_reach_a_json_file(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    with pytest.raises(ValueError):
        store.record_trial({"x": float("nan")})


def test_a_second_run_on_the_same_folder_is_refused_naming_pid_and_host(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    store.lock()
    with pytest.raises(RunLockedError) as info:
        RunStore(store.root).lock()
    message = str(info.value)
    assert str(os.getpid()) in message and socket.gethostname() in message
    store.unlock()
    assert not (store.root / "lock").exists()
    RunStore(store.root).lock()  # free again


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    (store.root / "lock").write_text(
        json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname(), "started": "x"})
    )
    store.lock()
    assert json.loads((store.root / "lock").read_text())["pid"] == os.getpid()
