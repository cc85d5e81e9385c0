"""planner.report: the helper a user's script calls."""

import json
import math
import subprocess
import sys

import pytest

import planner
from planner._trial.script_report import REPORT_FILE_ENV, report_line


def test_each_call_appends_one_json_line(tmp_path, monkeypatch):
    path = tmp_path / "reports.jsonl"
    monkeypatch.setenv(REPORT_FILE_ENV, str(path))
    planner.report(1, val_acc=0.5, loss=2)
    planner.report(2, val_acc=0.75)
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"step": 1, "metrics": {"val_acc": 0.5, "loss": 2.0}},
        {"step": 2, "metrics": {"val_acc": 0.75}},
    ]


def test_outside_planner_it_writes_nothing_and_still_checks_arguments(tmp_path, monkeypatch):
    monkeypatch.delenv(REPORT_FILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    planner.report(1, val_acc=0.5)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError, match="metric 'val_acc' must be a real number"):
        planner.report(1, val_acc="0.5")


@pytest.mark.parametrize(
    ("step", "metrics", "error", "message"),
    [
        (1.0, {"a": 1.0}, TypeError, "step must be an int, got float"),
        (True, {"a": 1.0}, TypeError, "step must be an int, got bool"),
        (-1, {"a": 1.0}, ValueError, "step must be >= 0"),
        (1, {}, ValueError, "at least one metric"),
        (1, {"a": None}, TypeError, "metric 'a' must be a real number, got NoneType"),
        (1, {"a": True}, TypeError, "metric 'a' must be a real number, got bool"),
    ],
)
def test_bad_arguments_get_a_clear_error(step, metrics, error, message):
    with pytest.raises(error, match=message):
        report_line(step, metrics)


def test_numpy_scalars_are_accepted_and_arrays_get_a_hint():
    np = pytest.importorskip("numpy")
    assert json.loads(report_line(np.int64(3), {"a": np.float32(0.5)})) == {
        "step": 3,
        "metrics": {"a": 0.5},
    }
    with pytest.raises(TypeError, match=r"\.item\(\)"):
        report_line(1, {"a": np.array([0.5])})


def test_nan_and_infinity_are_written_so_the_planner_can_mark_divergence():
    record = json.loads(report_line(4, {"loss": float("nan"), "grad": float("inf")}))
    assert math.isnan(record["metrics"]["loss"]) and record["metrics"]["grad"] == math.inf


def test_importing_the_helper_loads_nothing_heavy():
    code = (
        "import sys, planner; planner.report(1, a=1.0); "
        "heavy = {'ray', 'optuna', 'pandas', 'hydra', 'omegaconf', 'pydantic', 'numpy', 'mlflow'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(__import__("pathlib").Path(planner.__file__).parent.parent)},
    )
    assert out.stdout.strip() == "[]"
