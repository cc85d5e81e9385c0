"""The report's content in md, json and html, for a known synthetic run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from bench.synthetic_run import make_run
from planner import UsageError, load_run
from planner._cli.main import main
from planner._results.render import render
from planner._results.report import per_seed, summarize
from tests._runs import SYNTHETIC_ARMS

ARMS = SYNTHETIC_ARMS


def test_json_report_has_the_documented_keys_and_values(results, run_dir):
    doc = json.loads(render(results, "json"))
    decided = json.loads((run_dir / "decisions.json").read_text())["decisions"]
    assert doc["run_state"] == "completed"
    decided_doc = json.loads((run_dir / "decisions.json").read_text())
    assert {k: doc[k] for k in ("metric", "test", "alpha", "correction", "min_effect")} == {
        k: decided_doc[k] for k in ("metric", "test", "alpha", "correction", "min_effect")
    }
    assert [
        {k: d[k] for k in ("arm", "decision", "effect", "ci_low", "ci_high", "n_baseline", "n_arm")}
        for d in doc["decisions"]
    ] == [
        {k: d[k] for k in ("arm", "decision", "effect", "ci_low", "ci_high", "n_baseline", "n_arm")}
        for d in decided
    ]
    assert doc["budget"]["trials_ended"] == 39 and doc["budget"]["steps_planned"] == 390
    assert {f["trial_id"] for f in doc["failures"]} >= {
        "tune-adam-s1000-t004",
        "tune-adam-s1000-t005",
    }
    assert {v["kind"] for v in doc["violations"]} == {"heldout_in_tuning", "report_past_budget"}
    assert doc["heldout"]["evaluations"] == 15 and doc["heldout"]["tuning_exposures"] == 1
    assert doc["identity"]["commit"].startswith("3f1c2a9d") and doc["identity"]["dirty"] is True


def test_per_seed_and_tuning_tables(results):
    s = summarize(results)
    ps = s["per_seed"]
    assert ps["metric"] == "test_acc" and [r["seed"] for r in ps["rows"]] == [0, 1, 2, 3, 4]
    t = results.trials.set_index("trial_id")
    assert ps["rows"][2]["values"]["adam"]["value"] == t.loc["confirm-adam-s2", "final.test_acc"]
    conf = results.trials[results.trials["phase"] == "confirm"]
    assert ps["mean"]["sgd"] == pytest.approx(conf[conf["arm"] == "sgd"]["final.test_acc"].mean())
    tuning = {row["arm"]: row for row in s["tuning"]}
    adam = tuning["adam"]
    assert (adam["planned"], adam["ended"], adam["failed"]) == (8, 8, 3)
    tune = results.trials[(results.trials["phase"] == "tune") & (results.trials["arm"] == "adam")]
    assert adam["early_stopped"] == int((tune["status"] == "early_stopped").sum())
    assert adam["full_exposure"] == int(
        ((tune["exposure"] >= 10) & tune["status"].isin(["completed", "early_stopped"])).sum()
    )
    assert (
        adam["selected_trial"]
        == json.loads((results.run_dir / "selection.json").read_text())["arms"]["adam"]["trial_id"]
    )


def test_markdown_shows_every_section(results):
    md = render(results, "md")
    for heading in [
        "## Hypothesis",
        "## Arms",
        "## Decisions",
        "## Confirmation by seed (`test_acc`)",
        "## Tuning",
        "## Trials and budget",
        "## Failures",
        "## Protocol violations",
        "## Held-out ledger",
        "## Identity",
    ]:
        assert heading in md, heading
    first = json.loads((results.run_dir / "decisions.json").read_text())["decisions"][0]
    assert (
        f"| adam | {first['decision']} | {first['effect']:.4g} | {first['ci_low']:.4g} | "
        f"{first['ci_high']:.4g} |" in md
    )
    assert "`optimizer.name`: 'sgd' → 'adam'" in md  # YAML-style, as plan validate prints it
    assert "| tune-adam-s1000-t004 | failed | 2 | RuntimeError: CUDA error" in md
    assert "| heldout_in_tuning | tune-adam-s1000-t007 | 3 |" in md
    assert "`test_acc` was evaluated 15 time(s) of at most 60" in md
    assert "3f1c2a9d8e7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a (dirty)" in md
    assert "<img" not in md


def test_the_per_seed_means_count_a_diverged_seed_as_the_decision_does(tmp_path):
    """With failures.diverged_value, the decision counts a diverged seed at that value; the
    report's table left it out of the arm's mean (the arm looked better than the decision's effect
    said)."""
    run = make_run(tmp_path / "run", arms=ARMS, seeds=3, tune_trials=4, reports_per_trial=5)
    contract = yaml.safe_load((run / "contract.yaml").read_text())
    contract["failures"] = {**(contract.get("failures") or {}), "diverged_value": 0.0}
    (run / "contract.yaml").write_text(yaml.safe_dump(contract))
    metric = contract["metric"].get("heldout") or contract["metric"]["name"]
    lines = (run / "trials.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    target = next(
        r for r in records if r["phase"] == "confirm" and r["arm"] == ARMS[1] and r["seed"] == 1
    )
    target["status"] = "diverged"
    target["reports"][-1]["metrics"][metric] = "nan"
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    table = per_seed(load_run(run))
    cell = next(row["values"][ARMS[1]] for row in table["rows"] if row["seed"] == 1)
    assert cell == {"value": 0.0, "status": "diverged", "counted_as": "failures.diverged_value"}
    others = [row["values"][ARMS[1]]["value"] for row in table["rows"] if row["seed"] != 1]
    assert table["mean"][ARMS[1]] == pytest.approx(
        sum(others) / 3
    )  # the diverged seed counts, at 0.0
    assert "| 1 | " in render(load_run(run), "md") and "0 (diverged)" in render(load_run(run), "md")
    # a confirmation trial run again after a resume (a second record of the seed): the later one is
    # taken, as the decision takes it; the table said "seed 1 has two outcomes" and the report
    # ended in a traceback
    again = {**target, "trial_id": target["trial_id"] + "-again", "status": "completed"}
    again["reports"] = [dict(r, metrics=dict(r["metrics"])) for r in target["reports"]]
    again["reports"][-1]["metrics"][metric] = 0.5
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*records, again]))
    table = per_seed(load_run(run))
    assert table["mean"][ARMS[1]] == pytest.approx((sum(others) + 0.5) / 3)
    assert next(row["values"][ARMS[1]] for row in table["rows"] if row["seed"] == 1)["value"] == 0.5


def test_a_running_run_reports_what_it_has(tmp_path):
    run = make_run(
        tmp_path / "running",
        arms=ARMS,
        seeds=3,
        tune_trials=6,
        reports_per_trial=8,
        state="running",
    )
    res = load_run(run)
    doc = json.loads(render(res, "json"))
    assert doc["run_state"] == "running" and doc["lock"]["pid"] == 31337
    assert [d["decision"] for d in doc["decisions"]] == [None, None]
    md = render(res, "md")
    assert (
        "not decided" in md and "No confirmation trials yet." not in md
    )  # planned seeds are listed as pending
    assert "pending" in md
    page = render(res, "html")
    assert "the run is in progress" in page and 'id="plot-curves"' in page
    assert (
        'id="plot-forest"' in page and "No effect to plot: no arm has a complete comparison" in page
    )


def test_unknown_format_and_cli_output_file(results, run_dir, tmp_path, capsys):
    with pytest.raises(UsageError):
        render(results, "pdf")
    out = tmp_path / "report.md"
    assert main(["report", str(run_dir), "--format", "md", "-o", str(out)]) == 0
    assert out.read_text() == render(results, "md")
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert main(["report", str(run_dir), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_state"] == "completed"


def test_a_run_without_tuning_with_an_incomplete_arm(tmp_path):
    run = make_run(
        tmp_path / "run",
        arms=("sgd", "adam"),
        seeds=3,
        tune_trials=5,
        reports_per_trial=6,
        heldout=False,
    )
    contract = yaml.safe_load((run / "contract.yaml").read_text())
    contract["tuning"] = None
    (run / "contract.yaml").write_text(yaml.safe_dump(contract))
    records = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    kept = [r for r in records if r["phase"] == "confirm" and r["trial_id"] != "confirm-adam-s2"]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    plan = json.loads((run / "plan.json").read_text())
    plan["phases"] = [p for p in plan["phases"] if p["phase"] == "confirm"]
    plan["planned_count"] = 6
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "selection.json").unlink()
    (run / "identity.json").unlink()
    decisions = json.loads((run / "decisions.json").read_text())
    decisions["decisions"] = [
        {
            "arm": "adam",
            "decision": "incomplete",
            "effect": None,
            "ci_low": None,
            "ci_high": None,
            "p_value": None,
            "alpha_adjusted": None,
            "n_baseline": 3,
            "n_arm": 2,
            "reason": "adam: seed 2 has no confirmation result",
        }
    ]
    (run / "decisions.json").write_text(json.dumps(decisions))
    res = load_run(run)
    md = render(res, "md")
    assert "| adam | incomplete | – | – | – |" in md
    assert (
        "| 2 | " in md and "| missing |" in md
    )  # a completed run's absent trial is missing, not pending
    assert "## Tuning" not in md and "identity.json is missing." in md
    assert "No held-out metric is declared" in md
    doc = json.loads(render(res, "json"))
    assert doc["decisions"][0]["effect"] is None and doc["budget"]["trials_planned"] == 6
    page = render(res, "html")
    assert 'id="plot-forest"' in page and 'id="plot-cost"' in page
    assert 'id="plot-history"' not in page and "No tuning trial has ended yet." in page


def test_long_failure_lists_are_cut_in_md_and_html_but_not_json(results, monkeypatch):
    import planner._results.report as rp

    monkeypatch.setattr(rp, "MAX_ROWS", 2)
    n = len(results.failures)
    assert n == 4
    md = render(results, "md")
    failures = md.split("## Failures")[1].split("## Protocol violations")[0]
    assert failures.count("\n| tune-") == 2 and "confirm-sgd-s0" not in failures
    assert (
        f"... and {n - 2} more: `plan report --format json` and `plan export` list them all." in md
    )
    assert f"... and {n - 2} more" in render(results, "html")
    assert len(json.loads(render(results, "json"))["failures"]) == n


def test_a_reeval_counts_in_the_ledger_and_gets_its_own_curve(tmp_path, run_dir):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    records = [json.loads(line) for line in (copy / "trials.jsonl").read_text().splitlines()]
    reeval = dict(
        next(r for r in records if r["trial_id"] == "confirm-adam-s0"),
        trial_id="reeval-adam-s0-1",
        phase="reeval",
    )
    with open(copy / "trials.jsonl", "a") as f:
        f.write(json.dumps(reeval) + "\n")
    res = load_run(copy)
    h = res.heldout
    assert (h["evaluations"], h["confirm"], h["reeval"], h["by_arm"]["adam"]) == (16, 15, 1, 6)
    assert 'id="plot-reeval-curves"' in render(res, "html")
    assert "16 time(s) of at most 60: 15 in confirmation, 1 in re-evaluation" in render(res, "md")


def test_the_cost_section_per_arm_apart_from_the_decision(results, run_dir):
    """Cost per arm from the trial records: trials, trial-seconds, median s/step, cpu- and
    gpu-seconds."""
    records = [
        json.loads(line)
        for line in (run_dir / "trials.jsonl").read_text().splitlines()
        if line.strip()
    ]
    cpu = yaml.safe_load((run_dir / "contract.yaml").read_text())["budget"]["resources"]["cpu"]
    cost = {c["arm"]: c for c in summarize(results)["cost"]}
    assert list(cost) == results.arms
    for arm, row in cost.items():
        mine = [r for r in records if r["arm"] == arm]
        seconds = sum(r["duration_s"] for r in mine)
        first = ([r["reports"][0], r["reports"][-1]] for r in mine if r["reports"])
        slopes = [
            (b["time_s"] - a["time_s"]) / (b["step"] - a["step"])
            if b["step"] > a["step"]
            else b["time_s"] / b["step"]
            for a, b in first
        ]  # one report: its time over its step
        assert row["trials"] == len(mine) and row["trial_seconds"] == pytest.approx(
            seconds, abs=1e-3
        )
        assert (
            row["cpu_seconds"] == pytest.approx(seconds * cpu, abs=1e-3) and row["gpu_seconds"] == 0
        )
        assert row["median_s_per_step"] == pytest.approx(float(np.median(slopes)))
        assert sum(p["trials"] for p in row["phases"].values()) == len(mine)
    md = render(results, "md")
    section = md[md.index("## Cost (apart from the decision)") : md.index("## Failures")]
    assert md.index("## Decisions") < md.index("## Cost")
    for arm in results.arms:
        assert f"| {arm} | {cost[arm]['trials']} |" in section
    assert json.loads(render(results, "json"))["cost"] == summarize(results)["cost"]


def _doc_top_keys(block: str) -> list[str]:
    """The keys at the top level of a JSON-like block (which may hold `...`)."""
    keys, depth, i = [], 0, 0
    while i < len(block):
        ch = block[i]
        if ch == '"':
            end = block.index('"', i + 1)
            if depth == 1 and block[end + 1 :].lstrip().startswith(":"):
                keys.append(block[i + 1 : end])
            i = end + 1
            continue
        depth += ch in "{[" and 1 or (-1 if ch in "}]" else 0)
        i += 1
    return keys


def test_docs_json_report_example_lists_the_real_keys_in_their_order(results):
    """docs/reports.md's `--format json` example: the report's own top-level keys, in the report's
    order."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()
    block = text.split("```json\n", 1)[1].split("```", 1)[0]
    documented = _doc_top_keys(block)
    actual = list(json.loads(render(results, "json")))
    assert documented[:4] == ["run_id", "name", "run_dir", "run_state"]
    assert [k for k in actual if k in documented] == documented, (documented, actual)
    assert "tests/browser/test_report_browser.py" in text


def test_reading_and_reporting_leave_the_cyclic_collector_as_they_found_it(run_dir, tmp_path):
    """load_run pauses the collector and `plan report` freezes what is alive while it renders (both
    for speed, docs/speed.md): each is undone at its end, so a caller keeps an ordinary heap."""
    import gc

    assert gc.isenabled() and gc.get_freeze_count() == 0
    load_run(run_dir)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert main(["report", str(run_dir), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
