"""A trainable in a package's __init__ that reaches its submodule as an attribute in the trial
(tests/unit/test_trial_memory.py, tests/e2e/test_worker_memory_e2e.py): planner executes the
package anew for each trial, its submodule stays loaded."""

import time
import weakref

import tests.trainables.pkg_trainable.helper
from tests.trainables.cycles_left import LEFT


class Held:
    def __init__(self):
        self.me = self  # a cycle: only the cyclic collector frees it


HELD = Held()


def train(config, trial):
    LEFT.append(weakref.ref(HELD))
    time.sleep(
        config.get("sleep", 0.0)
    )  # long enough that the collection after it is cheap beside it
    trial.report(1, score=tests.trainables.pkg_trainable.helper.SCORE + trial.seed * 1e-6)
