"""How well each arm was tuned, said with the decision: the draws per arm, the part of each range
they explored (log scale for log_uniform), the choices a categorical drew, and a selected value at
the edge of what was explored; in `plan run`'s closing lines, decisions.json's `tuning`, reports.
Pure: run folders written without Ray."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner import RunResult, load_run
from planner._cli.main import main
from planner._cli.run_text import format_result
from planner._contract.model import Contract
from planner._dispatch.decision import tuning_reach
from planner._plan.explored import BOUNDARY, arm_reach, reach_said
from planner._plan.space import frozen_space
from planner._results.render import render
from tests._audit_runs import TUNING, confirm_trials, contract_data, tuning_trials, write_run

LOW, HIGH = 3e-4, 3e-2  # nanoGPT's declared learning-rate range
NANOGPT_DRAWS = [0.0021, 0.0034, 0.0047, 0.0063, 0.0081]  # five log-uniform draws, all inside
ARMS = ("base", "treat")


@pytest.fixture(autouse=True)
def _repo(in_repo):
    return in_repo


def _log_share(a: float, b: float) -> float:
    return math.log(b / a) / math.log(HIGH / LOW)


def _case(tmp_path: Path, draws: list[float], selected: float, space=None) -> tuple[dict, Path]:
    """A run of both arms tuned over `draws` of recipe.lr, both selecting `selected`."""
    space = space or {"recipe.lr": {"log_uniform": [LOW, HIGH]}}
    tuning = {**TUNING, "trials_per_arm": len(draws), "space": space}
    data = contract_data(tuning=tuning, recipe={"best_lr": 0.0005})
    trials = tuning_trials(data, draws)
    params = {arm: {"recipe.lr": selected} for arm in ARMS}
    trials += confirm_trials(data, params=params)
    selection = {
        "rule": "final",
        "metric": "val_acc",
        "mode": "max",
        "arms": {
            arm: {"arm": arm, "trial_id": f"tune-{arm}-s1000-t000", "params": params[arm]}
            for arm in ARMS
        },
    }
    run = write_run(tmp_path, data, trials, selection=selection)
    return {"data": data, "trials": trials, "params": params}, run


def _said(case: dict) -> str | None:
    model = Contract.model_validate(case["data"])
    return reach_said(tuning_reach(model, case["trials"], case["params"]))


def test_the_nanogpt_case_names_draws_explored_range_and_the_edge_in_the_decision(tmp_path):
    """Five draws of lr in 0.0021-0.0081 of [3e-4, 3e-2], both arms selecting their smallest: the
    closing lines of `plan run` say it beside the decisions."""
    case, run = _case(tmp_path, NANOGPT_DRAWS, NANOGPT_DRAWS[0])
    said = _said(case)
    assert said is not None
    share = _log_share(NANOGPT_DRAWS[0], NANOGPT_DRAWS[-1])
    below = math.log(NANOGPT_DRAWS[0] / LOW) / math.log(HIGH / LOW)
    assert said.startswith(f"tuned with {len(NANOGPT_DRAWS)} draws per arm; ")
    assert (
        f"recipe.lr explored 0.0021-0.0081 ({100 * share:.0f} % of [0.0003, 0.03] on its log scale)"
        in said
    )
    assert (
        "base and treat selected their smallest recipe.lr draw (0.0021), the edge of what was "
        f"explored: {100 * below:.0f} % of the range below it never tried" in said
    )
    result = RunResult(run, "completed", "done", [_row("treat")], 1.0, 1, tuning=said)
    assert f"tuning:     {said}" in format_result(result).splitlines()


def _row(arm: str) -> dict:
    return {
        "arm": arm,
        "decision": "accept",
        "effect": 0.1,
        "ci_low": 0.05,
        "ci_high": 0.15,
        "p_value": 0.01,
        "n_arm": 3,
        "n_baseline": 3,
        "reason": "Accept.",
    }


def test_the_nanogpt_case_is_in_the_markdown_and_html_reports(tmp_path, capsys):
    case, run = _case(tmp_path, NANOGPT_DRAWS, NANOGPT_DRAWS[0])
    assert main(["report", str(run), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "**Tuning:** tuned with 5 draws per arm; recipe.lr explored 0.0021-0.0081" in md
    assert "the edge of what was explored" in md
    rows = [line for line in md.splitlines() if line.startswith("| base | recipe.lr |")]
    assert len(rows) == 1 and "its smallest draw" in rows[0] and "| 5 |" in rows[0]
    page = render(load_run(run), "html")
    assert "How well each arm was tuned" in page and "its smallest draw" in page
    assert "selected their smallest recipe.lr draw (0.0021), the edge of what was explored" in page


def test_a_well_searched_range_flags_no_edge(tmp_path, capsys):
    """Draws spread over most of the range, the selected value among the middle ones: no edge is
    named, in the decision's sentence or the report, and the sentence says the value lies inside."""
    spread = [LOW * (HIGH / LOW) ** u for u in (0.05, 0.25, 0.45, 0.65, 0.85, 0.97)]
    case, run = _case(tmp_path, spread, spread[2])
    said = _said(case)
    assert said is not None and "edge" not in said and "outer" not in said
    assert "every selected value lies inside what its arm's draws explored" in said
    assert f"{100 * _log_share(spread[0], spread[-1]):.0f} % of [0.0003, 0.03]" in said
    assert main(["report", str(run), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "smallest draw |" not in md and "largest draw |" not in md
    assert "end of the range" not in md


def test_a_value_in_the_outer_band_is_said_as_the_edge_of_the_declared_range(tmp_path):
    near = LOW * (HIGH / LOW) ** (BOUNDARY / 2)
    case, _ = _case(tmp_path, [near, 0.003, 0.01], near)
    said = _said(case)
    assert said is not None
    assert "base and treat selected recipe.lr" in said
    assert "in the outer 10 % of their declared range at the low end" in said


def test_a_categorical_reports_how_many_of_its_choices_were_drawn(tmp_path):
    data = contract_data(
        tuning={**TUNING, "space": {"recipe.shape": {"choice": ["plateau", "rise", "fall"]}}}
    )
    space = frozen_space(data, "base")
    drawn = [{"recipe.shape": v} for v in ("plateau", "rise", "plateau", "rise")]
    reach = arm_reach("base", space, drawn, {"recipe.shape": "plateau"})
    (key,) = reach.keys
    assert (key.draws, key.distinct, key.share) == (4, 2, pytest.approx(2 / 3))
    assert key.edge is None
    assert reach_said([reach]) == "tuned with 4 draws per arm; recipe.shape drew 2 of its 3 choices"


def test_arms_that_explored_differently_are_said_apart_and_untuned_runs_say_nothing():
    space = frozen_space({"tuning": {"space": {"lr": {"uniform": [0.0, 1.0]}}}}, "a")
    a = arm_reach("a", space, [{"lr": 0.2}, {"lr": 0.6}], {"lr": 0.6})
    b = arm_reach("b", space, [{"lr": 0.4}], {"lr": 0.4})
    said = reach_said([a, b])
    assert said is not None
    assert said.startswith("tuned with 2 draws of a, 1 draw of b; ")
    assert "lr explored 0.2-0.6 (40 % of [0, 1]) by a, drew one value, 0.4, of [0, 1] by b" in said
    assert "a selected its largest lr draw (0.6)" in said  # one value drawn: no edge for b
    assert reach_said([arm_reach("a", space, [], None)]) is None
