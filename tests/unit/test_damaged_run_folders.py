"""A damaged run folder gets a sentence naming its file and field, never a traceback
(docs/reliability.md, "Hostile and careless run folders"): values nested past the bound, integers
beyond 64 bits, a report step of 1e30, a non-finite decision number; and the quick bounds check
agrees with the full walk."""

from __future__ import annotations

import json

import pytest

from planner import RunError
from tests._run_folders import cli

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize("name", ["trials.jsonl", "decisions.json", "state.json", "contract.yaml"])
@pytest.mark.parametrize("command", ["status", "report", "export"])
def test_a_deeply_nested_file_gets_a_sentence(run, name, command, capsys, tmp_path):
    """A 200k-deep JSON array (or YAML sequence) ended every reader in RecursionError (exit 70)."""
    if name == "contract.yaml":
        (run / name).write_text((run / name).read_text() + "deep: " + DEEP + "\n")
    elif name == "trials.jsonl":
        with open(run / name, "a") as f:
            f.write('{"trial_id": "t", "status": "completed", "config": {"x": ' + DEEP + "}}\n")
    else:
        (run / name).write_text('{"x": ' + DEEP + "}")
    args = [command, str(run)] + (["-o", str(tmp_path / "x")] if command == "export" else [])
    code, _, err = cli(args, capsys)
    assert code == 3 and name in err and "nested deeper than" in err, err


def test_an_integer_beyond_64_bits_gets_a_sentence_naming_its_field(run, capsys):
    with open(run / "trials.jsonl", "a") as f:
        f.write(
            '{"trial_id": "t", "status": "completed", "config": {"width": ' + str(10**30) + "}}\n"
        )
    code, _, err = cli(["status", str(run)], capsys)
    assert code == 3 and "config.width" in err and "64 bits" in err, err


@pytest.mark.parametrize("command", ["html", "export"])
def test_a_report_step_of_1e30_gets_a_sentence(run, command, capsys, tmp_path):
    """A step of 1e30 ended the html report and the export in OverflowError (exit 70)."""
    lines = (run / "trials.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    record["reports"][-1]["step"] = 1e30
    (run / "trials.jsonl").write_text("\n".join(lines[:-1] + [json.dumps(record)]) + "\n")
    args = (
        ["report", str(run), "--format", "html"]
        if command == "html"
        else ["export", str(run), "-o", str(tmp_path / "x")]
    )
    code, _, err = cli(args, capsys)
    assert code == 3 and "step" in err, err


def test_a_non_finite_decision_number_gets_a_sentence(run, capsys):
    doc = json.loads((run / "decisions.json").read_text())
    text = json.dumps(doc).replace(json.dumps(doc["decisions"][0]["ci_low"]), "NaN", 1)
    (run / "decisions.json").write_text(text)
    code, _, err = cli(["report", str(run)], capsys)
    assert code == 3 and "decisions[0].ci_low" in err, err


@pytest.mark.parametrize("depth", [62, 63, 64, 65, 66])
@pytest.mark.parametrize("where", ["config", "inputs", "top", "reports"])
def test_the_quick_bounds_check_gives_the_walks_verdict(depth, where):
    """`quick_ok` skips the walk only where `check_value` would pass: a value nested to the limit,
    in a field the trial schema leaves free (`config`, `inputs.files`) of a record with a hundred
    reports (most of its brackets) or in a small record, at every depth around it."""
    from planner._store.bounds import check_value, quick_ok

    deep = json.loads("[" * depth + "[1]" + "]" * depth)
    reports = [{"step": i, "metrics": {"loss": 0.5}, "time_s": 1.0} for i in range(100)]
    record = {"trial_id": "t", "status": "completed", "reports": reports}
    value = {
        "top": deep,
        "config": {"trial_id": "t", "status": "completed", "config": {"x": deep}, "reports": []},
        "inputs": {**record, "inputs": {"argv": [], "files": {"data.csv": {"x": deep}}}},
        "reports": {**record, "reports": [*reports, {"step": 1, "metrics": {"x": deep}}]},
    }[where]
    try:
        check_value(value, "here")
        walked = True
    except RunError:
        walked = False
    assert quick_ok(json.dumps(value).encode(), value) is walked


@pytest.mark.parametrize("depth", [62, 66, 5000])
def test_a_deep_value_where_the_trial_schema_has_a_shape_is_refused_by_the_schema(depth):
    """The limits walk only the fields the schema leaves free; a deep value in a typed field
    (`errors[0].traceback`, a string) is the schema's refusal, naming that field."""
    from planner._store.schema import decode

    deep = "[" * depth + "[1]" + "]" * depth
    line = (
        '{"trial_id": "t", "status": "failed", "reports": [], '
        f'"errors": [{{"type": "E", "message": "m", "traceback": {deep}}}]}}'
    ).encode()
    with pytest.raises(RunError) as refused:
        decode("trials.jsonl", line, "line 1 of trials.jsonl")
    message = str(refused.value)
    assert "line 1 of trials.jsonl" in message
    assert "errors[0].traceback" in message or "deeper than" in message, message
