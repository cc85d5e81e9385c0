"""The HTML report in a real headless Chromium: every plot is drawn, no name from the run folder
runs as script, and the page reads well (its screenshot is docs/img/report.png).

The report's run names an arm, a tuned parameter and the metric with HTML and script
(`tests._runs.hostile_names_run`); a script that ran would mark the page's <body>. The DOM Chromium
dumps after the page's scripts ran shows each plotly div drawn (an SVG inside), and the names as
text of the plots.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from planner._results.render import load_for_report, render
from tests._browser import CHROMIUM, chromium, screenshot_path
from tests._runs import hostile_names_run, synthetic_run

pytestmark = pytest.mark.browser

WIDTH = 1280
PLOTS = ["forest", "seed-differences", "history", "params", "curves", "confirm-curves", "cost"]


@pytest.fixture(scope="module", autouse=True)
def _chromium_installed():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")


def _page(folder: Path, run: Path) -> Path:
    page = folder / "report.html"
    page.write_text(render(load_for_report(run, "html"), "html"))
    return page


def _dom(tmp_path: Path, page: Path) -> str:
    dom = chromium(tmp_path, f"--window-size={WIDTH},3000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def _drawn(dom: str) -> dict[str, str]:
    """Each plot's div as Chromium left it, by its id."""
    found = {}
    for plot in PLOTS:
        start = dom.find(f'id="plot-{plot}"')
        if start >= 0:
            end = dom.find('id="plot-', start + 10)
            found[plot] = dom[start : end if end > 0 else len(dom)]
    return found


def test_every_plot_is_drawn_and_no_name_runs_as_script(tmp_path):
    page = _page(tmp_path, hostile_names_run(tmp_path / "runs"))
    dom = _dom(tmp_path, page)
    body = re.search(r"<body[^>]*>", dom)
    assert body and "pwned" not in body.group(0), body  # no script of a name ran
    assert "<img src=x" not in dom  # the parameter's name made no element
    drawn = _drawn(dom)
    assert set(drawn) == set(PLOTS)
    for plot, div in drawn.items():
        assert "js-plotly-plot" in div and 'class="main-svg"' in div, plot
        assert re.search(r"<path[^>]+d=\"M", div), f"{plot}: nothing drawn"
    # the names are shown as written, as text of the plots
    assert (
        ">&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned='arm'&lt;/script&gt;</text>"
        in (drawn["forest"])
    )
    assert "onerror=\"document.body.dataset.pwned='param'\"&gt;</text>" in drawn["params"]


def test_the_screenshot_of_the_report(tmp_path):
    """docs/img/report.png: the top of the report of a synthetic run, as Chromium draws it."""
    from PIL import Image

    page = _page(tmp_path, synthetic_run(tmp_path / "runs", tune_trials=60, reports_per_trial=20))
    shot = tmp_path / "shot.png"
    done = chromium(tmp_path, f"--window-size={WIDTH},4200", f"--screenshot={shot}", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, 4200)
    colors = image.resize((WIDTH // 8, 4200 // 8)).getcolors(maxcolors=1 << 16)
    assert colors is not None and len(colors) > 50, "the page looks blank"
    out = screenshot_path(tmp_path, "report.png")
    image.save(out, optimize=True)
