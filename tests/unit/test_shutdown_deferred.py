"""`plan run`'s Ray shutdown after its result (issue #23.1): while Ray shuts down, SIGINT and SIGTERM are held
off (they change neither the exit code nor the terminal), and given back afterwards unless the process exits
right after; a block that started no Ray changes no handler."""

from __future__ import annotations

import os
import signal

from planner._dispatch import session


def test_signals_are_held_off_inside_and_restored_after():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with session._signals_held():
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt outside
        os.kill(os.getpid(), signal.SIGTERM)  # would end the process outside (or raise, under a stop handler)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_signals_stay_held_off_to_the_exit_when_asked():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with session._signals_held(restore=False):
            pass
        os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is not before[0]
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_block_with_nothing_to_shut_down_changes_no_handler():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with session.ray_shutdown_deferred(hold_signals_to_exit=True):
        assert session._deferred == []
    assert session._deferred is None
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
