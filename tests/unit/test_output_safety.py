"""Names that drive a terminal or a spreadsheet: every command prints them with their control
characters shown, rich draws them as text, and a CSV export neutralises what a spreadsheet would
run as a formula."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from bench.synthetic_run import make_run
from planner._cli.main import main
from planner._core.text import spreadsheet_safe, terminal_safe
from planner._dispatch.progress import LineDisplay, LiveDisplay, Progress
from tests._contract_helpers import write_contract

TITLE = "\x1b]0;PWNED\x07"  # retitles the terminal
CLEAR = "\x1b[2J\r"  # clears the screen, rewinds the line
RTL = "\u202e"  # reverses what follows
RAW = ("\x1b", "\x07", "\r", "\u202e", "\x9b", "\x7f")


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def no_raw_controls(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} printed raw in {text!r}"


def test_terminal_safe_shows_every_control_and_reordering_character():
    text = "a\x1b[31mb\x07c\x08d\x7fe\x9bf\u202eg\u2066h\u200fi\ufeffj\n\tk é 中"
    shown = terminal_safe(text)
    assert shown == (
        "a\\x1b[31mb\\x07c\\x08d\\u007fe\\x9bf\\u202eg\\u2066h\\u200fi\\ufeffj\n\tk é 中"
    )


HOSTILE_CONTRACT = f"""\
version: 1
name: inline
hypothesis: "A wider model {json.dumps(TITLE)[1:-1]} wins {json.dumps(RTL)[1:-1]}"
trainable: fixture_trainable:train
config:
  values:
    model: {{width: 64, depth: 2}}
    optimizer: {{name: "sgd{json.dumps(CLEAR)[1:-1]}[bold]x[/bold]", lr: 0.1}}
    data: {{batch_size: 32}}
factor: {{name: "w{json.dumps(TITLE)[1:-1]}", keys: [model.width]}}
baseline: {{name: narrow, overrides: [model.width=64]}}
arms:
  - {{name: wide, overrides: [model.width=128]}}
metric: {{name: "val_acc{json.dumps(TITLE + RTL)[1:-1]}", mode: max}}
acceptance: {{min_effect: 0.01}}
seeds: [0, 1, 2, 3, 4]
budget: {{exposure: 5}}
"""


def test_validate_shows_a_hostile_factor_metric_and_value(tmp_path, capsys):
    path = write_contract(tmp_path, HOSTILE_CONTRACT)
    code, out, err = cli(["validate", str(path)], capsys)
    no_raw_controls(out + err)
    assert "w\\x1b]0;PWNED\\x07" in out, out
    code, out, err = cli(["validate", "--json", str(path)], capsys)
    no_raw_controls(out + err)
    json.loads(out)  # still a JSON document


def test_power_with_a_hostile_metric_says_so_in_plain_characters(tmp_path, capsys):
    path = write_contract(tmp_path, HOSTILE_CONTRACT)
    pilot = make_run(
        tmp_path / "pilot", arms=("narrow", "wide"), tune_trials=2, reports_per_trial=3
    )
    _rename_metric(pilot, "val_acc", "val_acc" + TITLE + RTL)
    code, out, err = cli(["power", str(path), "--pilot", str(pilot)], capsys)
    assert code == 0, err
    no_raw_controls(out + err)
    assert "val_acc\\x1b]0;PWNED\\x07\\u202e" in out


def test_a_report_prints_under_an_ascii_terminal(run, monkeypatch, capsys):
    """`LC_ALL=C` without UTF-8 mode, or `PYTHONIOENCODING=ascii`: a non-ASCII hypothesis is shown
    escaped instead of failing the command (exit 70)."""
    contract = run / "contract.yaml"
    contract.write_text(contract.read_text().replace("hypothesis: ", "hypothesis: Adam é ", 1))
    raw = io.BytesIO()
    ascii_out = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    monkeypatch.setattr("sys.stdout", ascii_out)
    code = main(["report", str(run)])
    ascii_out.flush()
    assert code == 0, capsys.readouterr().err
    assert b"Adam \\xe9" in raw.getvalue()
    assert ascii_out.errors == "strict"  # the stream is left as it was


@pytest.fixture
def run(tmp_path) -> Path:
    return make_run(tmp_path / "runs" / "demo" / "20261130-120000-abcd", tune_trials=3)


def _rename_metric(run: Path, old: str, new: str) -> None:
    trials = run / "trials.jsonl"
    trials.write_text(trials.read_text().replace(json.dumps(old), json.dumps(new)))


FORMULA = '=HYPERLINK("http://evil.example/","x")'


def test_csv_export_neutralises_formulas_and_keeps_numbers(run, tmp_path, capsys):
    _rename_metric(run, "loss", FORMULA)
    with open(run / "trials.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "trial_id": "evil",
                    "phase": "tune",
                    "arm": "sgd",
                    "status": "failed",
                    "errors": [{"type": "E", "message": "+cmd|' /C calc'!A0"}],
                }
            )
            + "\n"
        )
    code, out, err = cli(["export", str(run), "--format", "csv", "-o", str(tmp_path / "x")], capsys)
    assert code == 0, err
    cells = []
    for name in ("trials", "reports", "decisions"):
        with open(tmp_path / "x" / f"{name}.csv", newline="") as f:
            rows = list(csv.reader(f))
        cells += [cell for row in rows for cell in row]
    assert cells, "nothing exported"
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")], (
        "a formula left in a cell"
    )
    assert not [c for c in cells if c.startswith("-") and not _is_number(c)]
    assert sum(c == "'" + FORMULA for c in cells) >= 2  # the reports' metric cells
    assert (
        "final.'" + FORMULA in cells
        or "'final." + FORMULA in cells
        or any(c.endswith(FORMULA) for c in cells if c.startswith("final."))
    )
    with open(tmp_path / "x" / "decisions.csv", newline="") as f:
        effects = [row["effect"] for row in csv.DictReader(f)]
    assert effects and all(_is_number(e) for e in effects)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("cell", "safe"),
    [
        ("=1+1", "'=1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("+cmd", "'+cmd"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-0.5", "-0.5"),
        ("-1e-3", "-1e-3"),
        ("sgd", "sgd"),
        (-0.5, -0.5),
    ],
)
def test_spreadsheet_safe_follows_the_csv_injection_rule(cell, safe):
    assert spreadsheet_safe(cell) == safe


def _progress() -> Progress:
    return Progress(
        ["sgd", "adam"],
        {("tune", "sgd"): 2, ("tune", "adam"): 2},
        metric="val_acc",
        mode="max",
        decision_metric="val_acc",
        max_wall_time_s=None,
    )


def _failed_record(message: str) -> dict:
    return {
        "trial_id": "tune-sgd-s0-t0",
        "phase": "tune",
        "arm": "sgd",
        "status": "failed",
        "exposure": 0,
        "errors": [{"type": "RuntimeError", "message": message}],
    }


def test_progress_lines_show_a_hostile_error_message():
    progress, stream = _progress(), io.StringIO()
    display = LineDisplay(progress, stream)
    record = _failed_record(TITLE + CLEAR + RTL)
    progress.ended(record)
    display.update(record)
    display.note("note " + TITLE)
    no_raw_controls(stream.getvalue())
    assert "\\x1b]0;PWNED\\x07" in stream.getvalue()


def test_the_live_table_draws_names_as_text(monkeypatch):
    """rich neither obeys a control character in a note or a cell nor reads `[bold]` in a name as
    markup."""
    import rich.console

    progress = _progress()
    progress.arms.append("[bold]x[/bold]" + TITLE)
    progress.cell("tune", "[bold]x[/bold]" + TITLE).planned = 1
    progress.notes.append("tune-x failed: " + TITLE + CLEAR)
    display = LiveDisplay.__new__(LiveDisplay)
    display.progress = progress
    out = io.StringIO()
    console = rich.console.Console(file=out, color_system=None, width=200, force_terminal=False)
    console.print(display._render())
    text = out.getvalue()
    no_raw_controls(text)
    assert "[bold]x[/bold]" in text and "\\x1b]0;PWNED" in text


def test_rays_colour_codes_leave_its_words():
    from planner._core.text import without_colours

    said = "\x1b[36mray::confirm_task()\x1b[39m (pid=12, ip=10.0.0.1)\x1b[0m worker died"
    assert without_colours(said) == "ray::confirm_task() (pid=12, ip=10.0.0.1) worker died"
    assert without_colours(TITLE) == TITLE  # only colour codes go; anything else is shown, escaped
