"""A trainable whose module holds state in a cycle (tests/e2e/test_worker_memory_e2e.py): planner
executes the module anew for each trial, so each trial's copy must be freed once the next trial has
its own."""

import time
import weakref

from tests.trainables.cycles_left import LEFT


class Held:
    def __init__(self):
        self.me = self  # a cycle: only the cyclic collector frees it
        self.payload = bytearray(1 << 20)  # what a module-level dataset would be


HELD = Held()


def train(config, trial):
    LEFT.append(weakref.ref(HELD))
    time.sleep(
        config.get("sleep", 0.0)
    )  # long enough that the collection after it is cheap beside it
    trial.report(1, score=0.5 + trial.seed * 1e-6)
