"""A trainable that leaves cyclic garbage behind (tests/unit/test_trial_memory.py)."""

import time
import weakref

from tests.trainables.cycles_left import LEFT  # weak references to what each trial left in a cycle


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the cyclic collector frees it
        self.payload = bytearray(1 << 20)


def train(config, trial):
    node = Node()
    LEFT.append(weakref.ref(node))
    time.sleep(config.get("sleep", 0.0))
    trial.report(1, score=0.5 + trial.seed * 1e-6)
