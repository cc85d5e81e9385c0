"""The session `plan run` and `plan reeval` share: the lock, the stop signals, the end's
bookkeeping (no Ray)."""

from __future__ import annotations

import errno
import os
import signal
import sys

import pytest

from planner import RunError, UsageError
from planner._core.status import RunState, StopReason
from planner._dispatch.session import HANDLED, RunSession, final_state
from planner._store.lock import acquire
from planner._store.writer import RunStore


def _store(tmp_path) -> RunStore:
    return RunStore.create(tmp_path / "runs", "exp")


def _lock_is_free(store: RunStore) -> bool:
    held = acquire(store.root)  # raises RunLockedError while another holder has it
    held.release()
    return True


def test_a_refusal_inside_the_session_only_unlocks(tmp_path):
    store = _store(tmp_path)
    with pytest.raises(UsageError, match="refused"), RunSession(store) as session:
        assert session.took_over is None
        raise UsageError("refused")
    assert _lock_is_free(store)


def test_the_bookkeeping_runs_before_the_unlock_and_handles_an_interrupt(tmp_path):
    store = _store(tmp_path)
    seen = []
    previous = signal.getsignal(signal.SIGTERM)

    def bookkeeping(error):
        seen.append((type(error).__name__, final_state(error)[:2]))
        with pytest.raises(Exception):  # noqa: B017 - still held: a second holder is refused
            acquire(store.root)
        return final_state(error)[2]

    with RunSession(store) as session:
        session.stop_on_signals()
        assert signal.getsignal(signal.SIGTERM) is not previous
        session.on_end(bookkeeping)
        raise KeyboardInterrupt  # handled: the command returns its result
    assert seen == [
        ("KeyboardInterrupt", (RunState.INTERRUPTED, "stopped by the user (Ctrl-C or SIGTERM)"))
    ]
    assert signal.getsignal(signal.SIGTERM) is previous
    assert _lock_is_free(store)


def test_a_full_disk_becomes_one_sentence_and_other_errors_stay_what_they_are(tmp_path):
    store = _store(tmp_path)
    with (
        pytest.raises(RunError, match=r"\(or mend the disk\) and resume with --resume") as raised,
        RunSession(store) as session,
    ):
        session.on_end(lambda error: final_state(error, run_dir=store.root)[2])
        raise OSError(errno.ENOSPC, "No space left on device")
    assert raised.value.__suppress_context__ and raised.value.__cause__ is None
    with pytest.raises(ZeroDivisionError), RunSession(store) as session:
        session.on_end(lambda error: final_state(error)[2])
        raise ZeroDivisionError("x")
    assert final_state(ZeroDivisionError("x"))[:2] == (
        RunState.FAILED,
        "internal error: ZeroDivisionError: x",
    )
    assert _lock_is_free(store)


def test_a_phase_that_stopped_early_gives_the_run_state():
    assert final_state(None, StopReason.BUDGET, budget="1h")[:2] == (
        RunState.BUDGET_EXHAUSTED,
        "budget.max_wall_time of 1h reached",
    )
    assert final_state(None, StopReason.INTERRUPTED)[0] == RunState.INTERRUPTED
    assert final_state(None)[:2] == (RunState.COMPLETED, "all planned trials ended")
    assert final_state(None)[2] is None and final_state(KeyboardInterrupt())[2] == HANDLED


def test_the_workers_environment_is_set_only_while_ray_starts(monkeypatch):
    from planner._dispatch.ray_start import environ

    monkeypatch.setenv("PYTHONPATH", "/before")
    monkeypatch.delenv("RAY_CHDIR_TO_TRIAL_DIR", raising=False)
    with environ({"PYTHONPATH": "/contract:/before", "RAY_CHDIR_TO_TRIAL_DIR": "0"}):
        assert (
            os.environ["PYTHONPATH"] == "/contract:/before"
            and os.environ["RAY_CHDIR_TO_TRIAL_DIR"] == "0"
        )
    assert os.environ["PYTHONPATH"] == "/before" and "RAY_CHDIR_TO_TRIAL_DIR" not in os.environ


def test_tunes_variables_keep_a_value_the_user_set_and_are_unset_after(monkeypatch):
    from planner._dispatch.ray_start import environ

    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "7")
    monkeypatch.delenv("TUNE_GLOBAL_CHECKPOINT_S", raising=False)
    with environ(
        {"TUNE_MAX_PENDING_TRIALS_PG": "2", "TUNE_GLOBAL_CHECKPOINT_S": "1000000"}, override=False
    ):
        assert (
            os.environ["TUNE_MAX_PENDING_TRIALS_PG"] == "7"
            and os.environ["TUNE_GLOBAL_CHECKPOINT_S"] == "1000000"
        )
    assert (
        os.environ["TUNE_MAX_PENDING_TRIALS_PG"] == "7"
        and "TUNE_GLOBAL_CHECKPOINT_S" not in os.environ
    )


def test_a_module_imported_beside_the_block_is_ready_after_it_and_its_failure_is_raised_where_it_is_used(  # noqa: E501
    tmp_path, monkeypatch
):
    """Issue 23: Ray Tune is imported in a thread while an embedded Ray starts. After the block the
    module is imported (by that thread, not the main one); a module whose import fails leaves
    nothing swallowed: importing it where it is needed raises its own error."""
    import importlib
    import threading

    from planner._dispatch.ray_start import importing_meanwhile

    (tmp_path / "beside_ok.py").write_text(
        "import threading\nIMPORTED_BY = threading.current_thread().name\n"
    )
    (tmp_path / "beside_bad.py").write_text("raise ValueError('the import itself fails')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with importing_meanwhile("beside_ok"):
        main = threading.current_thread().name
    assert sys.modules["beside_ok"].IMPORTED_BY not in (main, None)
    with importing_meanwhile("beside_bad"):
        pass
    assert "beside_bad" not in sys.modules
    with pytest.raises(ValueError, match="the import itself fails"):
        importlib.import_module("beside_bad")
    with importing_meanwhile(None):  # nothing to import: the block runs alone
        pass
