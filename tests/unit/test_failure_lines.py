"""A failed trial's error is one line in `plan status`, `plan report` and `plan audit`, grouped as
`plan run` groups them, pointing to the trial's logs; the traceback and the stderr tail stay in
trials.jsonl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.synthetic_run import make_run
from planner._cli.main import main

TAIL = (
    "--- last lines of stderr ---\nSeed set to 100\nTraceback (most recent call last):\n"
    "  File \"train.py\", line 84, in <module>\n    main()\nTypeError: 'float' object is not "
    "subscriptable"
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return make_run(
        tmp_path_factory.mktemp("runs") / "demo" / "20261130-120000-abcd",
        arms=("sgd", "adam"),
        seeds=2,
        tune_trials=2,
        reports_per_trial=3,
        with_failures=False,
    )


@pytest.fixture
def run(pristine, tmp_path) -> Path:
    copy = tmp_path / "runs" / "demo" / pristine.name
    shutil.copytree(pristine, copy)
    with open(copy / "trials.jsonl", "a") as f:
        for i in range(3):
            tid = f"tune-adam-s100-t10{i}"
            message = (
                f"command exited with status 1: TypeError: 'float' object is not subscriptable "
                f"(logs in {copy}/trials/{tid}/attempt-1)\n{TAIL}"
            )
            f.write(
                json.dumps(
                    {
                        "trial_id": tid,
                        "phase": "tune",
                        "arm": "adam",
                        "seed": 100,
                        "status": "failed",
                        "errors": [
                            {
                                "type": "CommandFailedError",
                                "message": message,
                                "traceback": 'Traceback\n  File "adam.py", line 62, in __init__',
                            }
                        ],
                    }
                )
                + "\n"
            )
        f.write(
            json.dumps(
                {
                    "trial_id": "tune-adam-s100-t200",
                    "phase": "tune",
                    "arm": "adam",
                    "seed": 100,
                    "status": "failed",
                    "errors": [{"type": "KeyError", "message": "'lr'\nmore"}],
                }
            )
            + "\n"
        )
    return copy


@pytest.mark.parametrize("args", [["status"], ["report"], ["audit"]])
def test_a_failed_trial_is_one_line_with_its_logs(run, args, capsys):
    assert main([args[0], str(run), *args[1:]]) == 0
    out = capsys.readouterr().out
    assert (
        "Traceback" not in out and "last lines of stderr" not in out and "Seed set to" not in out
    ), out
    assert "TypeError: 'float' object is not subscriptable (logs in " in out, out
    assert (
        "KeyError: 'lr'" in out and "more" not in out.split("KeyError: 'lr'")[1].split("\n")[0]
    ), out


def test_status_groups_the_same_error_into_one_line(run, capsys):
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "not subscriptable" in line]
    assert len(lines) == 1, out
    assert lines[0].startswith(
        "  tune-adam-s100-t100 failed: CommandFailedError: command exited with status 1"
    )
    assert "the same in 2 more: tune-adam-s100-t101, tune-adam-s100-t102" in lines[0]
    keyerror = next(
        line for line in out.splitlines() if "KeyError" in line
    )  # no "(logs in" of its own
    assert f"(logs in {run}/trials/tune-adam-s100-t200)" in keyerror, keyerror


def test_audit_says_each_error_once(run, capsys):
    assert main(["audit", str(run)]) == 0
    out = capsys.readouterr().out
    summary = next(
        line for line in out.splitlines() if line.lstrip().startswith("failures [observation]")
    )
    assert (
        summary.count("not subscriptable") == 1
        and "(in 3 trials, first tune-adam-s100-t100)" in summary
    )


def test_the_traceback_stays_in_the_records_and_the_json_report(run, capsys):
    assert main(["report", str(run), "--format", "json"]) == 0
    failures = json.loads(capsys.readouterr().out)["failures"]
    assert any("last lines of stderr" in f["message"] for f in failures)
