"""The HTML report: one page from templates, plotly.js once, every plot drawn from the run's data,
every name from the run folder escaped."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.synthetic_run import make_run
from planner import load_run
from planner._results import plots
from planner._results import search_plots as sp
from planner._results.importance import MIN_TRIALS, arm_importance
from planner._results.render import HTML_MARK, load_for_report, render
from planner._results.report import summarize
from tests._runs import HOSTILE_ARM, HOSTILE_METRIC, HOSTILE_PARAM, hostile_names_run

PLOTS = ["forest", "seed-differences", "history", "params", "curves", "confirm-curves", "cost"]


def _drawn(page: str, plot: str) -> tuple[list[dict], dict]:
    """The traces and layout a plot's div is drawn with (the JSON plotly wrote into the page; its
    numeric arrays, where a gap is written null, read back with NaN for it)."""
    start = page.index(f'Plotly.newPlot(                        "plot-{plot}",')
    decoder = json.JSONDecoder()
    rest = page[start:].split(",", 1)[1].lstrip()
    data, end = decoder.raw_decode(rest)
    layout, _ = decoder.raw_decode(rest[end:].lstrip(" ,"))
    return [_arrays(t) for t in data], layout


def _arrays(value):
    numbers = isinstance(value, list) and any(isinstance(v, int | float) for v in value)
    if numbers and all(v is None or isinstance(v, int | float) for v in value):
        return [math.nan if v is None else v for v in value]
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def page(results) -> str:
    return render(results, "html")


def test_the_page_is_one_file_with_plotly_once_and_its_plots(page):
    assert page.startswith("<!DOCTYPE html>") and HTML_MARK in page[:4096]
    assert page.count(str(plots.plotly_js())) == 1  # the library, inlined once
    ours = page.replace(str(plots.plotly_js()), "")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", ours, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", ours, re.I)
    for plot in PLOTS:
        assert f'id="plot-{plot}"' in page, plot
    for text in [
        "Tuned at the same budget",
        "optimizer.betas",
        "tune-adam-s1000-t004",
        "held-out metric in tuning (test exposure)",
        "report past the budget",
        "gpu-box-01",
    ]:
        assert text in page, text


def test_the_first_lines_give_each_arm_its_means_effect_and_decision(results, page):
    s = summarize(results)
    top = page[: page.index("Run state:")]
    for d in s["decisions"]:
        assert f"<b>{d['arm']}</b> against <b>sgd</b>" in top
        assert f"mean {s['per_seed']['mean'][d['arm']]:.4g}" in top
        assert f"[{d['ci_low']:.4g}, {d['ci_high']:.4g}]" in top
        assert f'<span class="badge {d["decision"]}">{d["decision"]}</span>' in top


def test_an_inconclusive_arm_is_told_the_seeds_plan_power_asks_for(tmp_path):
    """With this run as its pilot, `plan power`'s own functions size the seeds: the page says their
    figure for 80 % power."""
    from planner._contract.model import Contract
    from planner._plan.pilot import read_pilot
    from planner._plan.seeds import power_summary, spread_from_pilot

    run = make_run(tmp_path / "run", arms=("sgd", "adam", "lion"), effects=(0.002, 0.012))
    results = load_for_report(run, "html")
    assert "inconclusive" in set(results.decisions["decision"])
    contract = Contract.model_validate(results.contract)
    pilot = read_pilot(run, contract.metric.decision_metric)
    sd, _ = spread_from_pilot(pilot, contract.acceptance.test)
    expected = power_summary(contract, sd)["needed"]["80"]["seeds"]
    top = render(results, "html").split("Run state:")[0]
    assert f"asks for\n<b>{expected} seeds per arm</b>" in top and "the contract declares 5" in top


def test_the_forest_plot_is_on_plotlys_own_axis(results, page):
    data, layout = _drawn(page, "forest")
    effects = {d["arm"]: d for d in summarize(results)["decisions"] if d["effect"] is not None}
    drawn = {t["y"][0]: t for t in data}
    assert set(drawn) == set(effects)
    for arm, d in effects.items():
        t = drawn[arm]
        assert t["x"] == [pytest.approx(d["effect"])]
        assert t["error_x"]["array"] == [pytest.approx(d["ci_high"] - d["effect"])]
        assert t["error_x"]["arrayminus"] == [pytest.approx(d["effect"] - d["ci_low"])]
    # no tick values or labels of our own: plotly labels each tick with its value
    assert "tickvals" not in layout["xaxis"] and "ticktext" not in layout["xaxis"]
    assert {s["x0"] for s in layout["shapes"]} == {0, 0.01}  # 0 and min_effect


def test_the_paired_seeds_are_each_arm_less_the_baseline(results, page):
    data, _ = _drawn(page, "seed-differences")
    t = results.trials
    conf = t[t["phase"] == "confirm"].set_index(["arm", "seed"])["final.test_acc"]
    for trace in data:
        arm = trace["y"][0]
        expected = sorted(conf[arm][s] - conf["sgd"][s] for s in range(5))
        assert sorted(trace["x"]) == pytest.approx(expected)


def test_the_history_has_each_trial_and_the_best_so_far(results, page):
    data, _ = _drawn(page, "history")
    tune = results.trials[results.trials["phase"] == "tune"]
    for arm in results.arms:
        sub = tune[tune["arm"] == arm].sort_values(["started", "index"])
        mine = {t["name"]: t for t in data if t["legendgroup"] == arm}
        done = (sub["status"] == "completed").to_numpy()
        values = sub["final.val_acc"].to_numpy()
        assert mine[arm]["y"] == pytest.approx(values[done].tolist())
        best = mine[f"{arm}, best so far"]["y"]
        expected = np.fmax.accumulate(np.where(done, values, np.nan))
        assert best == pytest.approx(expected.tolist(), nan_ok=True)


def test_every_trial_has_a_curve_and_each_stopped_one_a_mark(results, page):
    data, layout = _drawn(page, "curves")
    tune = results.trials[results.trials["phase"] == "tune"]
    r = results.reports
    r = r[(r["phase"] == "tune") & (r["metric"] == "val_acc")]
    lines = [t for t in data if t["mode"] == "lines" and t["name"].endswith("tuning trials")]
    assert len(lines) == len(results.arms)
    for trace in lines:
        arm = trace["name"].split(":")[0]
        reported = r[r["arm"] == arm]
        gaps = sum(1 for x in trace["x"] if math.isnan(x))  # a value may be NaN too
        # one curve per trial, and one more where its steps start over (an attempt run again)
        curves = reported.groupby("trial_id", observed=True)["step"].agg(
            lambda steps: 1 + int((np.diff(steps.to_numpy()) <= 0).sum())
        )
        assert gaps == curves.sum() - 1
        assert len(trace["x"]) - gaps == len(reported)
    stopped = [t for t in data if t["name"] == "stopped by the scheduler"]
    last = r.groupby("trial_id", observed=True)["step"].max()
    early = tune[tune["status"] == "early_stopped"]["trial_id"]
    assert sorted(x for t in stopped for x in t["x"]) == sorted(last[early].tolist())
    selected = [t for t in data if t["name"] == "selected for confirmation"]
    assert len(selected) == len(results.arms) and all(t["line"]["width"] == 3 for t in selected)


def test_a_large_run_thins_each_curve_but_keeps_its_last_report(results, monkeypatch):
    monkeypatch.setattr(sp, "MAX_CURVE_POINTS", 100)
    fig = sp.curves_figure(
        results.reports, results.arms, "val_acc", "epoch", 10, sp.Marks({}, {}, {})
    )
    assert "each curve is drawn through every" in fig.layout["title"]["text"]
    r = results.reports
    r = r[(r["phase"] == "tune") & (r["metric"] == "val_acc") & (r["arm"] == "sgd")]
    trace = next(t for t in fig.data if t["name"] == "sgd: tuning trials")
    x = trace["x"]
    ends = [x[i - 1] for i in range(1, len(x)) if math.isnan(x[i])] + [x[-1]]
    assert ends == r.groupby("trial_id", observed=True, sort=False)["step"].max().tolist()
    assert np.isfinite(trace["y"]).sum() < len(r)


def test_params_are_drawn_on_a_log_axis_where_the_space_is_log(page):
    data, layout = _drawn(page, "params")
    titles = [a["text"] for a in layout["annotations"]]
    assert titles == ["optimizer.lr", "model.dropout"]
    assert layout["xaxis"]["type"] == "log" and layout["xaxis2"].get("type") != "log"


def test_importance_is_computed_over_enough_completed_trials():
    trials = pd.DataFrame(
        {
            "arm": ["a"] * 80,
            "status": ["completed"] * 80,
            "param.lr": np.logspace(-4, 0, 80),
            "param.width": np.tile([16, 32, 64, 128], 20).astype(float),
            "final.m": -((np.log10(np.logspace(-4, 0, 80)) + 2) ** 2),
        }
    )
    from planner._plan.space import FrozenDimension

    space = {
        "lr": FrozenDimension("log_uniform", (1e-4, 1.0)),
        "width": FrozenDimension("choice", (16, 32, 64, 128)),
    }
    found = arm_importance(trials, "a", space, "m", "max")
    assert found.reason is None and set(found.values) == {"lr", "width"}
    assert sum(found.values.values()) == pytest.approx(1.0)
    assert found.values["lr"] > found.values["width"]  # the value depends on lr alone
    few = arm_importance(trials.head(MIN_TRIALS - 1), "a", space, "m", "max")
    assert few.values == {} and f"needs {MIN_TRIALS}" in str(few.reason)


def test_names_from_the_run_folder_are_text_in_the_page_and_in_the_plots(tmp_path):
    run = hostile_names_run(tmp_path)
    page = render(load_for_report(run, "html"), "html")
    for name in (HOSTILE_ARM, HOSTILE_PARAM, HOSTILE_METRIC):
        assert name not in page  # neither as markup nor inside a script
    assert "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned" in page  # the page's text
    # inside a figure, a name is data: JSON with `<`, `>`, `/` escaped, escaped once more as plotly
    # text, so that plotly shows it as written
    data, _ = _drawn(page, "forest")
    assert data[0]["y"] == [plots.label(HOSTILE_ARM)]
    assert plots.label(HOSTILE_ARM) == (
        "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned=&#39;arm&#39;&lt;/script&gt;"
    )
    assert "<\\/script" not in page and page.count("</script>") == page.count("<script")


def test_the_hypothesis_and_config_are_escaped(tmp_path, run_dir):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    contract = yaml.safe_load((copy / "contract.yaml").read_text())
    contract["hypothesis"] = "<script>alert('x')</script> & more"
    (copy / "contract.yaml").write_text(yaml.safe_dump(contract))
    (copy / "configs" / "adam.yaml").write_text(
        yaml.safe_dump({"optimizer": {"name": "<i onclick=x>evil</i>"}})
    )
    page = render(load_run(copy), "html")
    assert "<script>alert" not in page and "<i onclick=x>" not in page
    assert "&lt;i onclick=x&gt;evil&lt;/i&gt;" in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in page


def test_odd_characters_and_huge_values_still_draw():
    """A control character or lone surrogate in a name (a damaged file) becomes U+FFFD; a finite
    value near 1.7e308 is held at 1e300 so that plotly's axis has room for its margins."""
    assert plots.label("a\x01b\ud800") == "a\ufffdb\ufffd"
    rows = [
        {
            "arm": "a\x01",
            "decision": "reject",
            "effect": -1.7e308,
            "ci_low": -1.7e308,
            "ci_high": 1.7e308,
        },
        {"arm": "b", "decision": "accept", "effect": None, "ci_low": None, "ci_high": None},
    ]
    fig = plots.forest_figure(rows, 0.01, "m\x03")
    html = plots.figure_html(fig, "plot-x")
    assert "\ud800" not in html and "NaN" not in html and "Infinity" not in html
    assert list(fig.data[0]["x"]) == [-1e300] and len(fig.data) == 1


def test_html_tags_are_balanced(page):
    from html.parser import HTMLParser

    class Balance(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack, self.errors = [], []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "img", "br"):
                self.stack.append(tag)

        def handle_endtag(self, tag):
            if not self.stack or self.stack.pop() != tag:
                self.errors.append(tag)

    parser = Balance()
    parser.feed(page)
    assert parser.errors == [] and parser.stack == []


def test_names_are_drawn_as_written_and_escaped():
    """A metric named `val_$\\sqrt{acc$` ended the html report in matplotlib's mathtext parser
    (exit 70); an arm named `<b>&` must stay text in a plot, not markup."""
    from planner._results.plots import figure_html, forest_figure, label

    name, arm = "val_$\\sqrt{acc$", "<b>&a$b"
    rows = [{"arm": arm, "decision": "accept", "effect": 0.1, "ci_low": 0.05, "ci_high": 0.15}]
    fig = forest_figure(rows, 0.01, name)
    assert tuple(fig.data[0]["y"]) == ("&lt;b&gt;&amp;a$b",) and label(arm) == "&lt;b&gt;&amp;a$b"
    assert name in fig.layout["xaxis"]["title"]["text"]
    assert "<b>" not in figure_html(fig, "plot-forest")
