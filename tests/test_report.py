"""The report's content in md, json and html, for a known synthetic run."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.synthetic_run import make_run
from planner import UsageError, load_run
from planner._cli import main
from planner._report import config_diff, curves, render, summarize

ARMS = ("sgd", "adam", "adamw")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "20261129-181700-a3f2", arms=ARMS, seeds=5,
                    tune_trials=8, reports_per_trial=10)


@pytest.fixture(scope="module")
def results(run_dir):
    return load_run(run_dir)


def test_json_report_has_the_documented_keys_and_values(results, run_dir):
    doc = json.loads(render(results, "json"))
    decided = json.loads((run_dir / "decisions.json").read_text())["decisions"]
    assert doc["run_state"] == "completed"
    assert [{k: d[k] for k in ("arm", "decision", "effect", "ci_low", "ci_high", "n_baseline", "n_arm")}
            for d in doc["decisions"]] == [
        {k: d[k] for k in ("arm", "decision", "effect", "ci_low", "ci_high", "n_baseline", "n_arm")} for d in decided]
    assert doc["budget"]["trials_ended"] == 39 and doc["budget"]["steps_planned"] == 390
    assert {f["trial_id"] for f in doc["failures"]} >= {"tune-adam-s1000-t004", "tune-adam-s1000-t005"}
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
    assert adam["full_exposure"] == int(((tune["exposure"] >= 10) & tune["status"].isin(["completed", "early_stopped"])).sum())
    assert adam["selected_trial"] == json.loads((results.run_dir / "selection.json").read_text())["arms"]["adam"]["trial_id"]


def test_config_diff_names_every_changed_path():
    base = {"optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}, "epochs": 3}
    arm = {"optimizer": {"name": "adam", "lr": 0.1, "betas": [0.9, 0.99]}, "epochs": 3}
    assert config_diff(base, arm) == [
        {"path": "optimizer.betas", "baseline": None, "arm": [0.9, 0.99], "change": "added"},
        {"path": "optimizer.momentum", "baseline": 0.9, "arm": None, "change": "removed"},
        {"path": "optimizer.name", "baseline": "sgd", "arm": "adam", "change": "changed"},
    ]


def test_curves_are_median_and_spread_per_phase_arm_and_step(results):
    c = curves(results)
    r = results.reports
    sel = r[(r["metric"] == "val_acc") & (r["phase"] == "confirm") & (r["arm"] == "adamw") & (r["step"] == 4)]["value"]
    row = c[(c["phase"] == "confirm") & (c["arm"] == "adamw") & (c["step"] == 4)].iloc[0]
    assert row["n"] == 5 and row["median"] == np.median(sel) and row["min"] == sel.min() and row["max"] == sel.max()
    assert set(c["phase"].astype(str)) == {"tune", "confirm"}
    few = curves(results, max_points=4)
    assert few.groupby(["phase", "arm"], observed=True).size().max() <= 4


def test_markdown_shows_every_section(results):
    md = render(results, "md")
    for heading in ["## Hypothesis", "## Arms", "## Decisions", "## Confirmation by seed (`test_acc`)", "## Tuning",
                    "## Trials and budget", "## Failures", "## Protocol violations", "## Held-out ledger", "## Identity"]:
        assert heading in md, heading
    assert "| adam | accept | 0.03204 |" in md
    assert "`optimizer.name`: sgd → adam" in md
    assert "| tune-adam-s1000-t004 | failed | 2 | RuntimeError: CUDA error" in md
    assert "| heldout_in_tuning | tune-adam-s1000-t007 | 3 |" in md
    assert "`test_acc` was evaluated 15 time(s) of at most 60" in md
    assert "3f1c2a9d8e7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a (dirty)" in md
    assert "<img" not in md


def test_html_is_one_self_contained_page_with_two_plots(results):
    page = render(results, "html")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|iframe)\b", page, re.I)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)"', page)
    assert [alt for alt, _ in images] == ["forest plot of the effects", "learning curves per arm"]
    for _, data in images:
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
    for text in ["Tuned at the same budget", "optimizer.betas", "inconclusive", "tune-adam-s1000-t004",
                 "held-out metric in tuning (test exposure)", "report past the budget", "gpu-box-01"]:
        assert text in page, text


def test_html_escapes_user_provided_text(tmp_path, run_dir):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    contract = yaml.safe_load((copy / "contract.yaml").read_text())
    contract["hypothesis"] = "<script>alert('x')</script> & more"
    (copy / "contract.yaml").write_text(yaml.safe_dump(contract))
    (copy / "configs" / "adam.yaml").write_text(yaml.safe_dump({"optimizer": {"name": "<i onclick=x>evil</i>"}}))
    page = render(load_run(copy), "html")
    assert "<script>" not in page
    assert "<i onclick=x>" not in page and "&lt;i onclick=x&gt;evil&lt;/i&gt;" in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page


def test_a_running_run_reports_what_it_has(tmp_path):
    run = make_run(tmp_path / "running", arms=ARMS, seeds=3, tune_trials=6, reports_per_trial=8, state="running")
    res = load_run(run)
    doc = json.loads(render(res, "json"))
    assert doc["run_state"] == "running" and doc["lock"]["pid"] == 31337
    assert [d["decision"] for d in doc["decisions"]] == [None, None]
    md = render(res, "md")
    assert "not decided" in md and "No confirmation trials yet." not in md  # planned seeds are listed as pending
    assert "pending" in md
    page = render(res, "html")
    assert "the run is in progress" in page and page.count("data:image/png;base64,") == 2


def test_unknown_format_and_cli_output_file(results, run_dir, tmp_path, capsys):
    with pytest.raises(UsageError):
        render(results, "pdf")
    out = tmp_path / "report.md"
    assert main(["report", str(run_dir), "--format", "md", "-o", str(out)]) == 0
    assert out.read_text() == render(results, "md")
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert main(["report", str(run_dir), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_state"] == "completed"
