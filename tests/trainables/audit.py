"""A trainable with known pathologies, for the `plan audit` tests: the config says which.

recipe keys (config["recipe"]):
    level          the plateau the curve reaches (the arm's true score)
    shape          plateau (rises in 2 steps, then flat), rising (linear to the end), flat, decline
    (peaks at 60 %, ends above its start) noise          sd of the seed noise added at every report
    (default 0.005) offset         sd of a noise drawn once per seed and added to every report
    (default 0) lr, best_lr    the score drops by 0.05 per decade between lr and best_lr
    diverge_above  lr above this reports NaN from step 2 on
    ignore_seed    every seed gives the same curve
    crash_seed     this seed raises
    leak           report the held-out metric while tuning too
    tune_offset    sd of an offset drawn per tuning trial (tuning scores that confirmation does not
    repeat) sleep          seconds each step takes
"""

import math
import random
import time


def value(recipe, step, budget, noise_draw):
    level = recipe["level"] - 0.05 * abs(
        math.log10(recipe.get("lr", 0.01)) - math.log10(recipe.get("best_lr", 0.01))
    )
    x = step / budget
    shape = recipe.get("shape", "plateau")
    if shape == "plateau":
        v = level - 0.3 * math.exp(-2.0 * (step - 1))
    elif shape == "rising":
        v = level - 0.3 * (1 - x)
    elif shape == "decline":
        v = level - (0.4 * (0.6 - x) if x < 0.6 else 0.2 * (x - 0.6))
    else:
        v = level
    return v + noise_draw


def train(config, trial):
    recipe = config["recipe"]
    if recipe.get("crash_seed") == trial.seed:
        raise RuntimeError(f"seed {trial.seed} always crashes")
    seed = 0 if recipe.get("ignore_seed") else trial.seed
    rng = random.Random(f"{seed}-{recipe.get('lr')}")
    noise = recipe.get("noise", 0.005)
    offset = rng.gauss(0, recipe.get("offset", 0.0))
    if trial.phase == "tune" and recipe.get("tune_offset"):
        offset += random.Random(f"tune-{trial.arm}-{sorted(trial.params.items())}").gauss(
            0, recipe["tune_offset"]
        )
    for step in range(1, trial.budget + 1):
        time.sleep(recipe.get("sleep", 0.0))
        v = value(recipe, step, trial.budget, offset + rng.gauss(0, noise))
        if recipe.get("lr", 0.0) > recipe.get("diverge_above", math.inf) and step >= 2:
            v = float("nan")
        metrics = {"val_acc": v, "train_loss": 1.0 - v if math.isfinite(v) else v}
        if trial.phase != "tune" or recipe.get("leak"):
            metrics["test_acc"] = v + rng.gauss(0, noise) if math.isfinite(v) else v
        trial.report(step, **metrics)
