"""plan estimate's ASHA figure against Ray Tune's own scheduler code (imports Ray, so not in the
unit tier)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from planner._plan.estimate import asha_expected_steps


def ray_bracket_steps(n, max_t, grace, rf, reps, seed):
    """Steps of `reps` sweeps under Ray Tune's own ASHA bracket, trials in random order of value."""
    from ray.tune.schedulers.async_hyperband import _Bracket

    rng = np.random.default_rng(seed)
    totals = []
    for _ in range(reps):
        bracket, values, total = _Bracket(grace, max_t, rf, 0), rng.random(n), 0
        for i in range(n):
            trial = types.SimpleNamespace(trial_id=str(i))
            for step in range(1, max_t + 1):
                if bracket.on_result(trial, step, values[i]) == "STOP":
                    break
            total += step
        totals.append(total)
    return float(np.mean(totals)), float(np.std(totals, ddof=1)) / reps**0.5


@pytest.mark.parametrize(
    ("n", "max_t", "grace", "rf"), [(9, 9, 1, 3), (12, 8, 2, 3), (16, 10, 1, 2)]
)
def test_asha_expected_steps_match_ray_tunes_own_scheduler(n, max_t, grace, rf):
    """Ray's _Bracket run on random orders; a wrong formula (the synchronous one, or ranks
    reshuffled at every rung) is several steps off, far outside the Monte-Carlo error."""
    figure = asha_expected_steps(n, max_t, grace, rf)
    measured, se = ray_bracket_steps(n, max_t, grace, rf, reps=800, seed=n)
    tolerance = 4 * (se**2 + (figure.spread / 4000**0.5) ** 2) ** 0.5
    assert abs(figure.expected - measured) <= tolerance
    assert abs(figure.synchronous - measured) > tolerance and figure.full > measured + tolerance
