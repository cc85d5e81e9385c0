"""A resumed sweep's study learns every trial that ended before, whatever its status (docs/reliability.md,
"Resume"): completed ones with their final value, those stopped early as pruned, failed ones as failed; a
grid sweep knows the points that ran, so it never runs one again. Without Ray running (Tune's searcher is
asked directly)."""

from __future__ import annotations

import itertools

import optuna

from planner._contract.model import Dimension, Sampler
from planner._dispatch.hooks import Hooks
from planner._dispatch.search import finished_trial, make_sampler
from planner._dispatch.tune import Sweep, SweepSearch, TuneState
from planner._plan.space import to_optuna
from planner._trial.protocol import TrialSpec

SPACE = {
    "opt.lr": Dimension(choice=[0.1, 0.01, 0.001]),
    "opt.name": Dimension(choice=["sgd", "adam"]),
}
GRID = [
    dict(zip(("opt.lr", "opt.name"), point, strict=True))
    for point in itertools.product((0.1, 0.01, 0.001), ("sgd", "adam"))
]


def record(index, params, status, values=(0.5, 0.6)):
    reports = [
        {"step": step, "metrics": {"acc": value}, "time_s": 0.0}
        for step, value in enumerate(values, 1)
    ]
    return {
        "trial_id": f"tune-a-s0-t{index:03d}",
        "status": status,
        "params": params,
        "reports": reports,
    }


def test_every_finished_status_is_told_with_what_its_record_holds():
    space = to_optuna(SPACE)
    done = finished_trial(record(0, GRID[0], "completed"), "acc", space)
    stopped = finished_trial(record(1, GRID[1], "early_stopped", values=(0.2,)), "acc", space)
    failed = finished_trial(record(2, GRID[2], "failed", values=()), "acc", space)
    diverged = finished_trial(record(3, GRID[3], "diverged", values=(0.3, "nan")), "acc", space)
    state = optuna.trial.TrialState
    assert (done.state, done.value, done.intermediate_values) == (
        state.COMPLETE,
        0.6,
        {1: 0.5, 2: 0.6},
    )
    assert (stopped.state, stopped.value, stopped.intermediate_values) == (
        state.PRUNED,
        None,
        {1: 0.2},
    )
    assert (failed.state, failed.value) == (state.FAIL, None)
    assert (diverged.state, diverged.intermediate_values) == (
        state.FAIL,
        {1: 0.3},
    )  # a NaN is no value
    assert (
        finished_trial(record(4, {"opt.lr": 7.0, "opt.name": "sgd"}, "completed"), "acc", space)
        is None
    )


def _sweep(finished, sampler_name="grid", seed=3):
    template = TrialSpec(
        trial_id="tune-a-s0-t000",
        phase="tune",
        arm="a",
        seed=0,
        index=0,
        params={},
        config={"opt": {"lr": 1.0, "name": "x"}},
        budget=2,
        dir="/nowhere",
        trainable="m:f",
        metric="acc",
    )
    todo = [
        TrialSpec(**{**template.__dict__, "trial_id": f"tune-a-s0-t{i:03d}", "index": i})
        for i in range(len(finished), len(GRID))
    ]
    sampler = make_sampler(Sampler(name=sampler_name, seed=seed), SPACE, drawn=len(finished))
    return Sweep("a", 0, todo, to_optuna(SPACE), sampler, finished)


def test_a_resumed_grid_sweep_runs_only_the_points_no_finished_trial_ran():
    """Whatever the statuses of the finished trials (failed and stopped early too), and for every seed the
    resumed sampler may get, the rest of the grid is run, each point once."""
    statuses = ["failed", "early_stopped", "completed", "failed"]
    for seed in range(8):
        finished = [record(i, GRID[(0, 2, 4, 5)[i]], status) for i, status in enumerate(statuses)]
        sweep = _sweep(finished, seed=seed)
        search = SweepSearch(TuneState([sweep], "acc", "max", 2, Hooks(print, print, print)))
        suggested = [
            search.suggest(f"trial_{i}")["planner_spec"]["params"] for i in range(len(sweep.specs))
        ]
        ran = [r["params"] for r in finished] + suggested
        assert sorted(map(repr, ran)) == sorted(map(repr, GRID)), (seed, suggested)
        assert search.suggest("one_more") == SweepSearch.FINISHED


def test_the_points_left_of_a_large_resumed_grid_are_found_by_lookup_and_a_record_of_lists_still_compares():
    """grid_left looks each point up among those that ran: a set when every value hashes (a 10,000-point grid
    resumed after 9,000 trials was quadratic), else one by one (a record whose params hold a list)."""
    from planner._dispatch.search import grid_left

    space = to_optuna(SPACE)
    sampler = make_sampler(Sampler(name="grid", seed=0), SPACE, drawn=0)
    ran = [record(i, GRID[i], "completed") for i in (0, 3)]
    left = grid_left(sampler, space, ran)
    assert sorted(map(str, left)) == sorted(str(p) for i, p in enumerate(GRID) if i not in (0, 3))
    odd = [
        *ran,
        record(9, {"opt.lr": [0.1], "opt.name": "sgd"}, "failed"),
    ]  # unhashable: compared one by one
    assert sorted(map(str, grid_left(sampler, space, odd))) == sorted(map(str, left))


def test_a_trial_run_again_runs_the_values_it_started_with_and_the_rest_of_the_grid_runs_once():
    """A trial cut short (a --resume, a second pass of the phase) is asked first and gets the tuned values its
    `trial_started` event logged, in a random sweep and in a grid one, where its point is not run twice; values
    that are not the space's (an altered events.jsonl) are drawn anew."""
    for name in ("random", "grid"):
        finished = [record(0, GRID[0], "completed")]
        sweep = _sweep(finished, sampler_name=name)
        first, second = sweep.specs[0].trial_id, sweep.specs[1].trial_id
        sweep.again = {
            second: GRID[4],
            first: GRID[5],
        }  # specs put the trials run again first, in spec order
        search = SweepSearch(TuneState([sweep], "acc", "max", 2, Hooks(print, print, print)))
        suggested = [search.suggest(f"trial_{i}")["planner_spec"] for i in range(len(sweep.specs))]
        assert [(s["trial_id"], s["params"]) for s in suggested[:2]] == [
            (first, GRID[5]),
            (second, GRID[4]),
        ]
        if name == "grid":
            ran = [r["params"] for r in finished] + [s["params"] for s in suggested]
            assert sorted(map(repr, ran)) == sorted(map(repr, GRID))
    for altered in ({"opt.lr": 7.0, "opt.name": "sgd"}, {"opt.lr": 0.1}, "0.1"):
        sweep = _sweep([], sampler_name="random")
        sweep.again = {sweep.specs[0].trial_id: altered}
        search = SweepSearch(TuneState([sweep], "acc", "max", 2, Hooks(print, print, print)))
        assert search.suggest("t")["planner_spec"]["params"] in GRID
    sweep = _sweep(
        [], sampler_name="random"
    )  # an altered value ahead of a good one: each trial gets its own
    altered, kept = sweep.specs[0].trial_id, sweep.specs[2].trial_id
    sweep.again = {altered: {"opt.lr": 7.0, "opt.name": "sgd"}, kept: GRID[3]}
    search = SweepSearch(TuneState([sweep], "acc", "max", 2, Hooks(print, print, print)))
    suggested = {
        s["trial_id"]: s["params"]
        for s in (search.suggest(f"trial_{i}")["planner_spec"] for i in range(len(sweep.specs)))
    }
    assert (
        next(iter(suggested)) == kept and suggested[kept] == GRID[3] and suggested[altered] in GRID
    )
