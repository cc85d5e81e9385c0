"""`plan validate` and `plan schema` through the CLI's entry point: exact exit codes and output
lines."""

from __future__ import annotations

import json

import pytest

from planner._cli.main import main
from tests._contract_helpers import FIXTURES, edited, write_contract


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


def test_valid_contract_prints_the_plan(in_fixtures, capsys):
    assert main(["validate", "inline.yaml"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines() == [
        "inline.yaml: valid contract 'inline'",
        "  factor   width (keys: model.width)",
        "  metric   loss (min)",
        "  arms",
        "    narrow  baseline",
        "    wide    model.width: 64 -> 128",
        "  trials   10 planned: tune 0, confirm 10",
        "  budget   5 step per trial, 50 step in all; cpu 1, gpu 0 per trial",
    ]


def test_valid_hydra_contract_shows_every_changed_path(in_fixtures, capsys):
    assert main(["validate", "hydra.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[4:8] == [
        "    sgd   baseline",
        "    adam  optimizer.lr: 0.05 -> 0.001",
        "          optimizer.momentum: 0.9 -> <absent>",
        "          optimizer.name: 'sgd' -> 'adam'",
    ]
    assert lines[8] == "  trials   18 planned: tune 8, confirm 10 (max_trials 100)"


def test_invalid_contract_prints_one_line_per_diagnostic(tmp_path, monkeypatch, capsys):
    text = edited(
        "inline.yaml",
        [("budget: {exposure: 5}", "budget: {exposur: 5}"), ("mode: min", "mode: least")],
    )
    write_contract(tmp_path, text, "bad.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "bad.yaml"]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines() == [
        "bad.yaml:15:28: error P103: metric.mode: Input should be 'max' or 'min' (got 'least'). "
        "Use one of 'max' or 'min'.",
        "bad.yaml:18:10: error P100: unknown key 'exposur' in budget. Did you mean `exposure`?",
        "bad.yaml: invalid (2 errors)",
    ]


def test_json_output(in_fixtures, capsys):
    assert main(["validate", "hydra.yaml", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is True and data["diagnostics"] == []
    assert data["summary"]["planned_trials"] == {"tune": 8, "confirm": 10, "total": 18}
    assert [arm["name"] for arm in data["summary"]["arms"]] == ["sgd", "adam"]


def test_json_output_of_an_invalid_and_an_unreadable_contract(tmp_path, capsys):
    path = write_contract(
        tmp_path, edited("inline.yaml", [("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 0, 1, 2, 3]")])
    )
    assert main(["validate", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False and data["summary"] is None
    assert [(d["code"], d["severity"], d["line"]) for d in data["diagnostics"]] == [
        ("P400", "error", 17)
    ]
    assert main(["validate", str(tmp_path / "absent.yaml"), "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False and data["diagnostics"][0]["code"] == "P001"


def test_strict_turns_warnings_into_errors(tmp_path, capsys):
    path = write_contract(
        tmp_path, edited("inline.yaml", [("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2]")])
    )
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}:17:8: warning P901: only 3 confirmation seeds" in out
    assert f"{path}: valid contract 'inline' (1 warning)" in out.splitlines()
    assert main(["validate", str(path), "--strict"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:17:8: error P901: only 3 confirmation seeds" in out
    assert out.splitlines()[-1] == f"{path}: invalid (1 error)"


def test_a_pilot_that_is_not_a_run_is_a_usage_error(in_fixtures, capsys):
    # the power check itself is tested in tests/test_estimate.py
    assert main(["validate", "inline.yaml", "--pilot", "runs/x"]) == 2
    err = capsys.readouterr().err
    assert "runs/x does not exist" in err and "Traceback" not in err


def test_usage_error_is_exit_2(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["validate"])
    assert caught.value.code == 2


def test_an_internal_bug_prints_a_short_message(in_fixtures, monkeypatch, capsys):
    import planner._contract.validate

    def broken(*args, **kwargs):
        raise RuntimeError("oops")

    monkeypatch.setattr(planner._contract.validate, "validate", broken)
    assert main(["validate", "inline.yaml"]) == 70
    out, err = capsys.readouterr()
    assert (
        "Traceback" not in err and "internal error: RuntimeError: oops" in err and "--debug" in err
    )


def test_schema_prints_the_json_schema(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert {"version", "name", "seeds", "budget", "arms"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_a_reader_that_closes_the_pipe_early_is_not_an_internal_error():
    """`plan validate ... | head` must not end in 'internal error' (exit 70); `true` leaves at
    once."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    contract = repo / "examples" / "digits" / "contract.yaml"
    proc = subprocess.run(
        f"{sys.executable} -m planner validate {contract} | true; echo ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        cwd=repo,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
    )
    assert "internal error" not in proc.stderr
    assert proc.stdout.strip() in {"0", "1"}


def test_a_fifo_as_the_primary_config_is_refused_at_once_by_the_real_cli(tmp_path):
    """`plan validate` as a user runs it, with the primary config a FIFO: an answer within seconds,
    exit 1, the file named for what it is (Hydra said "Cannot find primary config"), no
    traceback."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    conf = tmp_path / "conf"
    shutil.copytree(FIXTURES / "conf", conf)
    (conf / "train.yaml").unlink()
    os.mkfifo(conf / "train.yaml")
    contract = write_contract(
        tmp_path, (FIXTURES / "hydra.yaml").read_text().replace("dir: conf", f"dir: {conf}")
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "planner", "validate", str(contract)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "error P207: config 'train': conf/train.yaml is a FIFO (named pipe), not a regular file"
        in done.stdout
    )
    assert "Traceback" not in done.stdout + done.stderr
