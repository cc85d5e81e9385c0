"""`plan validate` stays light: it never imports Ray, Optuna or pandas, and `import planner` is
cheap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests._contract_helpers import FIXTURES

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("ray", "optuna", "pandas", "pyarrow", "scipy", "matplotlib", "rich")


def _run(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_validate_does_not_import_heavy_packages():
    found = _run(
        "import contextlib, io, json, sys\n"
        "from planner._cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main(['validate', 'hydra.yaml'])\n"
        f"print(json.dumps({{'rc': rc, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))\n"
    )
    assert found == {"rc": 0, "heavy": []}


def test_import_planner_is_cheap():
    found = _run(
        "import json, sys\nimport planner\n"
        "print(json.dumps([m for m in ('pydantic', 'hydra', 'omegaconf', 'yaml') + "
        f"{HEAVY!r} if m in sys.modules]))\n"
    )
    assert found == []


def test_a_run_imports_scipy_only_for_its_decision():
    """Issue 23: what `plan run` imports before Ray starts holds no SciPy (0.13-0.3 s of a small
    run's start); a run without sequential looks imports it for the decision, while its
    confirmation runs."""
    found = _run(
        "import json, sys\nimport planner._dispatch.driver\nimport planner._stats.decide as "
        "decide\n"
        "print(json.dumps({'scipy': 'scipy' in sys.modules, 'prefetched': decide.SCIPY,\n"
        "                  'decision': decide.special._lazy_name}))\n"
    )
    assert found["scipy"] is False, found
    assert found["prefetched"] == found["decision"], (
        found
    )  # what the confirmation imports is what it needs


def test_the_html_report_draws_with_plotly_not_matplotlib(tmp_path):
    """The report's plots are plotly figures; matplotlib's import and drawing were more than a
    second of `plan report --format html` on a 10,000-trial run, and no stage imports it."""
    from bench.synthetic_run import make_run

    run = make_run(
        tmp_path / "run", arms=("sgd", "adam"), seeds=3, tune_trials=4, reports_per_trial=5
    )
    found = _run(
        "import contextlib, io, json, sys\n"
        "from planner._cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['report', {str(run)!r}, '--format', 'html', '-o', "
        f"{str(tmp_path / 'r.html')!r}])\n"
        "print(json.dumps({'rc': rc, 'matplotlib': 'matplotlib' in sys.modules}))\n"
    )
    assert found == {"rc": 0, "matplotlib": False}
    assert (tmp_path / "r.html").read_text().count('class="plotly-graph-div"') >= 3
