"""A run interrupted during tuning and resumed tunes as an uninterrupted run of the same contract:
the configuration at each tuning index is the one the uninterrupted run drew, on the random and TPE
samplers, and the arms draw the same values at each index (they share the sampler's seed). The run
folder's studies.log holds one Optuna study per arm, continued by the resume, and the run's facts
say it was resumed, when, and how many trials ran after it."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from planner import load_run, run
from planner._results.render import load_for_report, render
from planner._results.run_status import format_status, read_status
from tests._runs import contract_writer, cut_short, synthetic_contract

pytestmark = pytest.mark.ray

write = contract_writer(
    synthetic_contract(
        name="resumed", factor={"name": "recipe", "keys": ["recipe.name", "recipe.level"]}
    )
)


def _drawn(run_dir: Path) -> dict[tuple[str, int], dict]:
    return {
        (r["arm"], r["index"]): r["params"]
        for r in load_run(run_dir).records
        if r["phase"] == "tune"
    }


def _interrupt_before(run_dir: Path, index: int) -> None:
    """As if the driver had stopped before the tuning trials from `index` on started: their
    records, the confirmation's, and every event naming them are gone (a trial that started is run
    again with the values it started with: that would not test the draws)."""
    gone = {
        r["trial_id"]
        for r in load_run(run_dir).records
        if r["phase"] != "tune" or r["index"] >= index
    }
    cut_short(run_dir, gone)
    events = (run_dir / "events.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "events.jsonl").write_text(
        "".join(e for e in events if json.loads(e).get("trial_id") not in gone)
    )


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_a_run_interrupted_and_resumed_tunes_as_an_uninterrupted_run(
    sampler, ray_local, in_repo, tmp_path
):
    tuning = {
        "trials_per_arm": 5,
        "seeds": [100],
        "sampler": {"name": sampler, "seed": 3},
        "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
    }
    path = write(tmp_path, tuning=tuning, seeds=[0, 1])
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert first.state == "completed"
    whole = _drawn(first.run_dir)
    assert len(whole) == 10
    for i in range(5):  # the arms draw alike at every index
        assert whole[("base", i)] == whole[("treat", i)], (i, whole)
    for cut in (3, 1):
        _interrupt_before(first.run_dir, cut)
        resumed = run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
        assert resumed.state == "completed"
        assert _drawn(first.run_dir) == whole, cut
        storage = optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(first.run_dir / "studies.log"))
        )
        assert {s.study_name for s in optuna.get_all_study_summaries(storage)} == {"base", "treat"}
        study = optuna.load_study(study_name="treat", storage=storage)
        assert [t.params for t in study.trials] == [whole[("treat", i)] for i in range(5)]
        assert study.user_attrs["resumed"]["trials_before"] == cut
        status = read_status(first.run_dir)
        assert len(status["resumes"]) == (1 if cut == 3 else 2)
        assert status["resumes"][-1]["tuning_trials_after"] == 2 * (5 - cut), status["resumes"]
        assert f"{2 * (5 - cut)} of them tuning" in format_status(status)
    report = render(load_for_report(first.run_dir, "md"), "md")
    assert "Resumed " in report and "of them tuning, drawn as an uninterrupted run draws" in report
