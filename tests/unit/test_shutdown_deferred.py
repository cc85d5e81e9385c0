"""`plan run`'s Ray shutdown after its result: from the run's end until Ray is down,
SIGINT and SIGTERM are held off (they change neither the exit code nor the terminal), and given
back afterwards unless the process exits right after; a block that was left no Ray to shut down
changes no handler."""

from __future__ import annotations

import os
import signal

from planner._dispatch import ray_shutdown


def _handlers():
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def test_signals_are_held_off_from_the_first_shutdown_left_and_restored_after():
    before, ran = _handlers(), []
    with ray_shutdown.ray_shutdown_deferred():
        ray_shutdown._deferred.add(
            lambda: ran.append(_handlers())
        )  # what RunSession leaves it, as its end
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt without the hold
        os.kill(
            os.getpid(), signal.SIGTERM
        )  # would end the process (or raise, under a stop handler)
    assert len(ran) == 1 and ran[0] != before  # the shutdown ran under the hold
    assert _handlers() == before


def test_signals_stay_held_off_to_the_exit_when_asked():
    before = _handlers()
    try:
        with ray_shutdown.ray_shutdown_deferred(hold_signals_to_exit=True):
            ray_shutdown._deferred.add(lambda: None)
        os.kill(os.getpid(), signal.SIGINT)
        assert _handlers() != before
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_block_with_nothing_to_shut_down_changes_no_handler():
    before = _handlers()
    with ray_shutdown.ray_shutdown_deferred(hold_signals_to_exit=True):
        assert ray_shutdown._deferred.shutdowns == []
    assert ray_shutdown._deferred is None
    assert _handlers() == before
