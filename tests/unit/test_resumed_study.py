"""A sweep's study draws the configuration of tuning index i from (sampler seed, i), and a resumed
sweep's study learns every trial that ended before, in index order, whatever its status
(docs/running.md, "Resume"): a run interrupted anywhere and resumed draws, index by index, what an
uninterrupted run drew, and the arms draw alike where the sampler allows. The studies live in the
run folder's Optuna journal. Without Ray running (Tune's searcher is asked and told directly)."""

from __future__ import annotations

import itertools
import math
import warnings

import optuna
import pytest

from planner._contract.model import Dimension, Sampler
from planner._dispatch.hooks import Hooks
from planner._dispatch.search import finished_trial, run_studies
from planner._dispatch.tune import Sweep, SweepSearch, TuneState
from planner._plan.space import to_optuna
from planner._trial.spec import TrialSpec

LR = {"opt.lr": Dimension(log_uniform=[1e-4, 1.0]), "opt.wd": Dimension(uniform=[0.0, 0.1])}
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


def _spec(arm, i):
    return TrialSpec(
        trial_id=f"tune-{arm}-s0-t{i:03d}",
        phase="tune",
        arm=arm,
        seed=0,
        index=i,
        params={},
        config={"opt": {"lr": 1.0, "wd": 0.0, "name": "x"}},
        budget=2,
        dir="/nowhere",
        trainable="m:f",
        metric="acc",
    )


def _score(params):
    """A deterministic objective: the sampler's history, and so TPE's next draw, depend only on
    it."""
    return -abs(math.log10(params.get("opt.lr", 0.01)) + 2) + float(params.get("opt.wd", 0.0))


def _record(spec, params, status="completed"):
    return {
        "trial_id": spec["trial_id"],
        "index": spec["index"],
        "arm": spec["arm"],
        "status": status,
        "params": params,
        "reports": [{"step": 2, "metrics": {"acc": _score(params)}, "time_s": 0.0}],
    }


def _search(arms, space, sampler, n, storage=None, finished=None, again=None, at=None):
    """The searcher of `arms`' sweeps, each with `n` trials less those `finished` (arm ->
    records)."""
    finished, again = finished or {}, again or {}
    sweeps = []
    for arm in arms:
        done = {r["index"] for r in finished.get(arm, [])}
        specs = [_spec(arm, i) for i in range(n) if i not in done]
        sweeps.append(
            Sweep(arm, 0, specs, to_optuna(space), sampler, finished.get(arm, []), again=again)
        )
    state = TuneState(sweeps, "acc", "max", 2, Hooks(print, print, print))
    return state, SweepSearch(state, storage, at)


def _drive(state, search, stop_after=None):
    """Tune's loop, one trial at a time: ask, run, tell. (drawn index -> params per arm, records,
    asked)."""
    drawn, records, asked = {}, {}, {}
    count = 0
    while (out := search.suggest(f"tune_{count}")) != SweepSearch.FINISHED:
        spec = out["planner_spec"]
        drawn.setdefault(spec["arm"], {})[spec["index"]] = spec["params"]
        asked[spec["trial_id"]] = spec["params"]
        if stop_after is not None and count >= stop_after:  # asked, never ended: cut short
            break
        record = _record(spec, spec["params"])
        state.records[f"tune_{count}"] = record
        records.setdefault(spec["arm"], []).append(record)
        search.on_trial_complete(f"tune_{count}")
        count += 1
    return drawn, records, asked


@pytest.mark.parametrize("name", ["random", "tpe", "grid"])
def test_a_run_interrupted_anywhere_and_resumed_draws_what_an_uninterrupted_run_drew(
    tmp_path, name
):
    """TPE past its random start-up (14 trials an arm) reads the finished trials, so its draws at
    the later indices test the replay; random and grid draw by (seed, index) alone. A trial cut
    short runs again with the values it started with. The arms draw alike at every index where the
    sampler allows it (random, grid, and TPE's start-up)."""
    space, n = (SPACE, 6) if name == "grid" else (LR, 14)
    sampler = Sampler(name=name, seed=7)
    whole, _, _ = _drive(*_search(["a", "b"], space, sampler, n))
    for cut in (0, 3, 9, 2 * n - 3):
        storage = run_studies(tmp_path / f"cut{cut}.log")
        _, records, asked = _drive(*_search(["a", "b"], space, sampler, n, storage), stop_after=cut)
        ended = {r["trial_id"] for rs in records.values() for r in rs}
        again = {t: p for t, p in asked.items() if t not in ended}
        resumed, _, _ = _drive(
            *_search(["a", "b"], space, sampler, n, storage, records, again, at="2026-01-01T00:00Z")
        )
        for arm in ("a", "b"):
            drawn = {r["index"]: r["params"] for r in records.get(arm, [])} | resumed.get(arm, {})
            assert drawn == whole[arm], (name, cut, arm)
        studies = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
        assert set(studies) == {"a", "b"}
        study = optuna.load_study(study_name="a", storage=storage)
        assert [t.user_attrs["index"] for t in study.trials] == list(range(n))
        assert [t.params for t in study.trials] == [whole["a"][i] for i in range(n)]
        assert study.user_attrs["resumed"]["at"] == "2026-01-01T00:00Z" or not records
    alike = range(n) if name != "tpe" else range(10)  # TPE's start-up: 10 trials drawn at random
    assert all(whole["a"][i] == whole["b"][i] for i in alike), whole
    if name == "grid":
        assert sorted(map(repr, whole["a"].values())) == sorted(map(repr, GRID))
    if (
        name == "tpe"
    ):  # past the start-up, TPE read the history: not the random draws of those indices
        random_draws, _, _ = _drive(*_search(["a"], space, Sampler(name="random", seed=7), n))
        assert any(whole["a"][i] != random_draws["a"][i] for i in range(10, n))


def test_a_trial_run_again_with_values_not_of_the_space_draws_anew():
    """Values that are not the space's (an altered events.jsonl) are drawn anew, at their own
    index."""
    sampler = Sampler(name="random", seed=0)
    whole, _, _ = _drive(*_search(["a"], SPACE, sampler, 3))
    for altered in ({"opt.lr": 7.0, "opt.name": "sgd"}, {"opt.lr": 0.1}, "0.1"):
        drawn, _, _ = _drive(*_search(["a"], SPACE, sampler, 3, again={"tune-a-s0-t000": altered}))
        assert drawn["a"] == whole["a"]


def test_optuna_dashboard_lists_the_run_folders_studies(tmp_path):
    """`optuna-dashboard <run folder>/studies.log` opens the journal the driver writes: its app
    lists one study per arm, each with its trials (asked through the dashboard's own WSGI app, no
    server)."""
    import io
    import json
    import wsgiref.util

    # an optional extra (planner[dashboard]): the lowest-versions venv of CI runs without it
    optuna_dashboard = pytest.importorskip("optuna_dashboard")

    path = tmp_path / "studies.log"
    _drive(*_search(["base", "treat"], LR, Sampler(name="random", seed=1), 3, run_studies(path)))
    app = optuna_dashboard.wsgi(str(path))

    def get(url):
        environ = {"PATH_INFO": url, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
        wsgiref.util.setup_testing_defaults(environ)
        status = []
        body = b"".join(app(environ, lambda s, h, *a: status.append(s)))
        assert status[0].startswith("200"), (url, status, body[:300])
        return json.loads(body)

    studies = {s["study_name"]: s for s in get("/api/studies")["study_summaries"]}
    assert set(studies) == {"base", "treat"}
    detail = get(f"/api/studies/{studies['treat']['study_id']}")
    assert len(detail["trials"]) == 3, detail.keys()
    assert {"key": "trial_id", "value": "tune-treat-s0-t000"} in detail["trials"][0]["user_attrs"]


def test_a_restarted_trial_reporting_its_steps_again_makes_optuna_warn_nothing(tmp_path):
    """Tune runs a trial again from its first step after its worker died (its node was lost): the
    searcher hears steps 1 and 2 twice, then the trial's end. Each step reaches the study once, so
    Optuna's `The reported value is ignored because this step=... is already reported` is never
    emitted (any warning fails here)."""
    storage = run_studies(tmp_path / "studies.log")
    state, search = _search(["a"], LR, Sampler(name="random", seed=0), 1, storage)
    spec = search.suggest("tune_0")["planner_spec"]

    def result(step, value):
        return {"planner/step": step, "planner/metrics/acc": value}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for attempt_values in ((0.1, 0.2), (0.15, 0.25)):  # the lost attempt, then the restart
            for step, value in enumerate(attempt_values, 1):
                search.on_trial_result("tune_0", result(step, value))
        reports = [
            {"step": step, "metrics": {"acc": value}, "time_s": 0.0}
            for step, value in ((1, 0.15), (2, 0.25))
        ]
        state.records["tune_0"] = {**_record(spec, spec["params"]), "reports": reports}
        search.on_trial_complete("tune_0")
    (trial,) = optuna.load_study(study_name="a", storage=storage).trials
    assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == 0.25
    assert trial.intermediate_values == {1: 0.1, 2: 0.2}  # each step as the study first heard it
    # the same steps given to Optuna's trial directly do warn: what the block above would catch
    study = optuna.create_study(direction="maximize")
    again = study.ask()
    again.report(0.1, 1)
    with pytest.raises(UserWarning, match="already reported"), warnings.catch_warnings():
        warnings.simplefilter("error")
        again.report(0.1, 1)


def test_the_studies_the_driver_holds_are_what_optunas_own_reader_reads_from_the_journal(tmp_path):
    """The driver's storage hands its own writes back without reading the file again: every trial
    (params, values, steps, attributes, state) is what Optuna's file backend reads from the same
    journal, resumed studies included."""
    path = tmp_path / "studies.log"
    sampler = Sampler(name="tpe", seed=3)
    _, records, _ = _drive(*_search(["a", "b"], LR, sampler, 12, run_studies(path)), stop_after=9)
    storage = run_studies(path)
    _drive(*_search(["a", "b"], LR, sampler, 12, storage, records, at="2026-01-01T00:00Z"))
    fresh = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))

    def seen(store):
        studies = {
            s.study_name: optuna.load_study(study_name=s.study_name, storage=store)
            for s in optuna.get_all_study_summaries(store)
        }
        return {
            name: (
                study.user_attrs,
                [
                    (t.number, t.state, t.params, t.values, t.intermediate_values, t.user_attrs)
                    for t in study.trials
                ],
            )
            for name, study in studies.items()
        }

    held = seen(storage)
    assert held == seen(fresh)
    assert set(held) == {"a", "b"} and all(len(trials) == 12 for _, trials in held.values())
