"""The synthetic training both log apps share: accuracy rises with the steps, peaks at lr 0.03,
is 0.1 higher with model.better, and moves a little with the seed."""

from __future__ import annotations

import math
import random


def accuracy(cfg, step: int, rng: random.Random) -> float:
    fit = max(
        0.0, 1.0 - abs(math.log10(cfg.optimizer.lr / 0.03))
    )  # 1 at lr 0.03, 0 two decades away
    return (
        0.4
        + 0.3 * fit * step / cfg.max_steps
        + (0.1 if cfg.model.better else 0.0)
        + rng.gauss(0, 0.005)
    )
