"""The HTML report in a real headless Chromium: the plots decode and are not blank.

A copy of the report gets a tiny probe script (the report itself has none) that
writes into the title how many images decoded and where they sit; the DOM dump
gives that back, and the screenshot of the same page is checked at those places.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from planner import load_run
from planner._results.render import render
from tests._runs import synthetic_run

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 4000
PROBE = """<script>
function probe() {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var boxes = imgs.map(function (i) {
    var r = i.getBoundingClientRect();
    return [Math.round(r.left), Math.round(r.top + window.scrollY), Math.round(r.width), Math.round(r.height),
            i.naturalWidth].join(':');
  });
  document.title = 'PROBE ' + ok + '/' + imgs.length + ' ' + boxes.join(',');
}
if (document.readyState === 'complete') { probe(); } else { window.addEventListener('load', probe); }
</script>"""


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        "--hide-scrollbars",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report_page(tmp_path_factory) -> Path:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    tmp = tmp_path_factory.mktemp("browser")
    run = synthetic_run(tmp, tune_trials=10, reports_per_trial=20)
    page = render(load_run(run), "html")
    probe = tmp / "report.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    return probe


def test_every_image_decodes_and_the_plots_are_not_blank(report_page, tmp_path):
    dom = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", report_page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    title = re.search(r"<title>PROBE (\d+)/(\d+) ([^<]*)</title>", dom.stdout)
    assert title, "the probe did not run: " + dom.stdout[:300]
    ok, total = int(title.group(1)), int(title.group(2))
    assert total == 3 and ok == 3, title.group(0)  # forest plot, learning curves, cost
    boxes = [tuple(int(v) for v in box.split(":")) for box in title.group(3).split(",")]

    png = tmp_path / "shot.png"
    shot = _chromium(tmp_path, f"--screenshot={png}", report_page.as_uri())
    assert shot.returncode == 0 and png.is_file(), shot.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(png)[..., :3]
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    for left, top, width, height, natural in boxes:
        assert natural > 0 and width > 200 and height > 100
        assert top + height <= HEIGHT, "the plot lies below the screenshot"
        region = pixels[top : top + height, left : left + width]
        inked = (region.min(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
        assert 0.02 < inked < 0.6, f"plot at {top}px looks blank or solid: {inked:.3f} inked"
        assert region.std() > 0.05
        colored = (np.ptp(region, axis=2) > 0.2).mean()  # arms and decisions are drawn in color
        assert colored > 0.002, f"plot at {top}px has no color: {colored:.4f}"
    blank_page = (pixels[: boxes[0][1]].min(axis=2) < 0.9).mean()
    assert blank_page > 0.01, "the text above the first plot did not render"
