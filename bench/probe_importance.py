"""How many tuning trials PED-ANOVA needs before its ranking settles: the report tells Optuna at
most `planner._results.importance.MAX_TRIALS` trials per arm (docs/speed.md, "A large run read
again").

For each size, 10 simulated sweeps (3 parameters: a log-scaled learning rate that dominates, a
weight decay that matters a little, a dropout that does not; seeded noise) are told to an
in-memory study, and the ranks PED-ANOVA gives are counted.

    PYTHONPATH=. python bench/probe_importance.py [--sizes 100 150 200 300 1000] [--sweeps 10]
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter

import numpy as np
import optuna
from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

SPACE = {
    "lr": optuna.distributions.FloatDistribution(1e-4, 1, log=True),
    "wd": optuna.distributions.FloatDistribution(0, 0.1),
    "drop": optuna.distributions.FloatDistribution(0, 0.5),
}


def importances(n: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    trials = []
    for _ in range(n):
        p = {
            "lr": float(np.exp(rng.uniform(np.log(1e-4), 0))),
            "wd": float(rng.uniform(0, 0.1)),
            "drop": float(rng.uniform(0, 0.5)),
        }
        value = -((np.log10(p["lr"]) + 2) ** 2) - 100 * (p["wd"] - 0.05) ** 2 + rng.normal(0, 0.3)
        trials.append(optuna.trial.create_trial(params=p, distributions=SPACE, value=value))
    study = optuna.create_study(direction="maximize")
    study.add_trials(trials)
    return get_param_importances(study, evaluator=PedAnovaImportanceEvaluator())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 150, 200, 300, 1000])
    parser.add_argument("--sweeps", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    print("| trials | rank orders over the sweeps |")
    print("|---:|---|")
    for n in args.sizes:
        orders = Counter(tuple(importances(n, s)) for s in range(args.sweeps))
        said = ", ".join(f"{' > '.join(o)}: {c}" for o, c in orders.most_common())
        print(f"| {n} | {said} |")


if __name__ == "__main__":
    main()
