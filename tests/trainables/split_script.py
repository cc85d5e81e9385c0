"""`splits.train` as a `command:` script: overrides `key=value` on argv, PLANNER_* in the
environment."""

from __future__ import annotations

import copy
import os
import sys

import yaml

import planner
from tests.trainables.splits import DEFAULTS, curve, split_ids


def main(argv: list[str]) -> None:
    config = copy.deepcopy(DEFAULTS)
    for item in argv:
        key, _, value = item.partition("=")
        if key.startswith("hydra."):
            continue
        *parents, leaf = key.lstrip("+").split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
    seed, budget = int(os.environ["PLANNER_SEED"]), int(os.environ["PLANNER_BUDGET"])
    d = config["data"]
    presented, val, test, patient = split_ids(d, seed)
    planner.log_split("train", presented, groups={"patient": patient[presented]})
    planner.log_split("val", val, groups={"patient": patient[val]})
    if d["log_test"]:
        planner.log_split("test", list(test), groups={"patient": list(patient[test])})
    for step, value in curve(config, seed, budget):
        planner.report(step, val_acc=value)


if __name__ == "__main__":
    main(sys.argv[1:])
