"""load_run on synthetic run folders: shapes, exact contents, tolerance of torn files, export."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner import RunError, UsageError, load_run
from planner._cli.main import main
from tests._runs import SYNTHETIC_ARMS, synthetic_run

ROOT = Path(__file__).resolve().parents[2]
ARMS = SYNTHETIC_ARMS


def _records(run_dir: Path) -> dict[str, dict]:
    return {
        r["trial_id"]: r
        for r in map(json.loads, (run_dir / "trials.jsonl").read_text().splitlines())
    }


def test_trials_has_one_row_per_trial_with_its_columns(results, run_dir):
    t = results.trials
    assert len(t) == 3 * 8 + 3 * 5
    for col in [
        "trial_id",
        "phase",
        "arm",
        "seed",
        "index",
        "status",
        "exposure",
        "attempts",
        "duration_s",
        "started",
        "ended",
        "host",
        "param.optimizer.lr",
        "param.model.dropout",
        "final.val_acc",
        "final.loss",
        "final.test_acc",
    ]:
        assert col in t.columns, col
    assert t["trial_id"].is_unique
    assert t.groupby("phase", observed=True).size().to_dict() == {"tune": 24, "confirm": 15}
    assert list(t["arm"].cat.categories) == list(
        ARMS
    )  # the baseline first, then the arms in contract order
    assert str(t["started"].dtype).startswith("datetime64") and t["started"].notna().all()
    rec = _records(run_dir)["tune-sgd-s1000-t001"]
    row = t.set_index("trial_id").loc["tune-sgd-s1000-t001"]
    assert row["param.optimizer.lr"] == rec["params"]["optimizer.lr"]
    assert row["final.val_acc"] == rec["reports"][-1]["metrics"]["val_acc"]
    assert row["exposure"] == rec["exposure"] and row["n_reports"] == len(rec["reports"])
    assert np.isnan(row["final.test_acc"])  # tuning does not report the held-out metric


def test_statuses_failures_and_errors_are_exact(results):
    t = results.trials
    counts = t["status"].astype(str).value_counts().to_dict()
    assert counts["failed"] == 1 and counts["diverged"] == 1 and counts["protocol_error"] == 1
    failed = t.set_index("trial_id").loc["tune-adam-s1000-t004"]
    assert failed["attempts"] == 2
    assert failed["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert {f["trial_id"]: f["status"] for f in results.failures} == {
        "tune-adam-s1000-t004": "failed",
        "tune-adam-s1000-t005": "diverged",
        "tune-adam-s1000-t006": "protocol_error",
        "confirm-sgd-s0": "completed",
    }
    assert results.failures[0]["where"] == 'File "/home/user/project/train.py", line 17, in step'


def test_reports_long_format_matches_the_records(results, run_dir):
    r = results.reports
    assert list(r.columns) == [
        "trial_id",
        "phase",
        "arm",
        "seed",
        "step",
        "metric",
        "value",
        "time_s",
    ]
    records = _records(run_dir)
    expected = sum(len(p["metrics"]) for rec in records.values() for p in rec["reports"])
    assert len(r) == expected
    one = r[(r["trial_id"] == "confirm-adam-s3") & (r["metric"] == "val_acc")]
    raw = records["confirm-adam-s3"]["reports"]
    assert one["step"].tolist() == [p["step"] for p in raw]
    assert one["value"].tolist() == [p["metrics"]["val_acc"] for p in raw]
    assert one["time_s"].tolist() == [p["time_s"] for p in raw]
    assert (
        (one["arm"] == "adam").all()
        and (one["seed"] == 3).all()
        and (one["phase"] == "confirm").all()
    )
    held = r[r["metric"] == "test_acc"]
    # once per confirmation trial at the last step, once in the tuning trial that broke the rule
    assert len(held) == 15 + 1 and set(held["step"]) == {10, 3}
    diverged = r[(r["trial_id"] == "tune-adam-s1000-t005") & (r["metric"] == "val_acc")]
    assert np.isnan(diverged["value"].iloc[-1]) and diverged["value"].iloc[:-1].notna().all()
    loss = r[(r["trial_id"] == "tune-adam-s1000-t005") & (r["metric"] == "loss")]["value"]
    assert loss.iloc[-1] == np.inf  # stored as the string "inf"


def test_decisions_has_one_row_per_treatment_arm(results, run_dir):
    d = results.decisions
    doc = json.loads((run_dir / "decisions.json").read_text())
    assert d["arm"].tolist() == ["adam", "adamw"]
    assert d["decision"].tolist() == [x["decision"] for x in doc["decisions"]]
    assert d["effect"].tolist() == [x["effect"] for x in doc["decisions"]]
    assert d["n_arm"].tolist() == [5, 5]


def test_heldout_ledger_budget_and_violations(results):
    h = results.heldout
    assert (
        h["metric"],
        h["evaluations"],
        h["confirm"],
        h["reeval"],
        h["tuning_exposures"],
        h["cap"],
    ) == ("test_acc", 15, 15, 0, 1, 60)
    assert h["by_arm"] == {"sgd": 5, "adam": 5, "adamw": 5} and h["over_cap"] is False
    kinds = {(v["kind"], v["trial_id"], v["step"]) for v in results.violations}
    assert kinds == {
        ("heldout_in_tuning", "tune-adam-s1000-t007", 3),
        ("report_past_budget", "tune-adam-s1000-t006", 11),
    }
    assert {v["source"] for v in results.violations} == {
        "logged",
        "error",
    }  # diverged is a result, not a violation
    b = results.budget
    assert b["trials_ended"] == b["trials_planned"] == 39
    assert b["steps"] == int(results.trials["exposure"].sum()) and b["steps_planned"] == 390


def test_violations_not_logged_are_found_in_the_reports(tmp_path, run_dir):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    lines = (copy / "trials.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for rec in records:
        rec["violations"] = []
    (copy / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    found = {
        (v["kind"], v["trial_id"], v["source"]) for v in load_run(copy, reports=False).violations
    }
    assert found == {
        ("heldout_in_tuning", "tune-adam-s1000-t007", "reports"),
        ("report_past_budget", "tune-adam-s1000-t006", "error"),
    }


def test_a_torn_last_line_is_skipped_and_noted(tmp_path, results):
    torn = synthetic_run(tmp_path / "torn", torn=True)
    assert not (torn / "trials.jsonl").read_text().endswith("\n")
    again = load_run(torn)
    assert len(again.trials) == len(results.trials)
    assert len(again.notes) == 1 and "line 40" in again.notes[0] and "skipped" in again.notes[0]


def test_a_torn_line_inside_the_file_keeps_the_record_glued_after_it(tmp_path, run_dir, results):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    lines = (copy / "trials.jsonl").read_text().splitlines(keepends=True)
    # a crash cut line 6 short, then the resumed run appended line 7 right after it
    lines[5] = lines[5][:200] + lines[6]
    del lines[6]
    lines[10] = lines[10][:40] + "\n"  # a line damaged beyond repair
    (copy / "trials.jsonl").write_text("".join(lines))
    res = load_run(copy)
    assert len(res.trials) == len(results.trials) - 2  # the record torn on line 6, and line 11
    assert json.loads(lines[5][200:])["trial_id"] in set(res.trials["trial_id"])
    assert res.notes == [
        "line 6 of trials.jsonl starts with a write cut short (a crash before a resume): "
        "that part was skipped, the whole record after it kept",
        "line 11 of trials.jsonl is damaged (not valid JSON) and was skipped",
    ]
    (copy / "trials.jsonl").write_text("[1, 2]\n")
    with pytest.raises(RunError, match="line 1 of .* is not a JSON object"):
        load_run(copy)


def test_bad_folders_are_clear_usage_errors(tmp_path, run_dir):
    with pytest.raises(UsageError, match="does not exist"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a run folder"):
        load_run(tmp_path / "empty")
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "state.json").write_text('{"state": "runn')
    with pytest.raises(RunError, match="state.json is not valid JSON"):
        load_run(copy)


def test_a_run_without_trials_or_decisions_loads_empty_frames(tmp_path, run_dir):
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("contract.yaml", "run.json", "plan.json"):
        shutil.copy(run_dir / name, copy / name)
    res = load_run(copy)
    assert len(res.trials) == 0 and len(res.reports) == 0
    assert (
        res.decisions["arm"].tolist() == ["adam", "adamw"]
        and res.decisions["decision"].isna().all()
    )
    assert res.run_state == "unknown"


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_writes_the_three_tables(tmp_path, run_dir, results, fmt, capsys):
    out = tmp_path / "export"
    assert main(["export", str(run_dir), "--format", fmt, "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{n}.{fmt}" for n in ("trials", "reports", "decisions")
    )
    read = pd.read_parquet if fmt == "parquet" else pd.read_csv
    trials = read(out / f"trials.{fmt}")
    assert len(trials) == len(results.trials) and "param.optimizer.lr" in trials.columns
    assert len(read(out / f"reports.{fmt}")) == len(results.reports)
    assert read(out / f"decisions.{fmt}")["decision"].tolist() == ["accept", "inconclusive"]
    assert capsys.readouterr().out.count("wrote ") == 3


def test_cli_errors_are_one_sentence_not_a_traceback(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["status", str(tmp_path)]) == 2
    assert main(["export", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        err.splitlines()[0]
        == f"plan report: {tmp_path / 'missing'} does not exist: give the path of a run folder, "
        f"like runs/<name>/<run id>"
    )


def test_report_status_and_export_never_import_ray(run_dir, tmp_path):
    code = (
        "import sys\n"
        "from planner._cli.main import main\n"
        f"assert main(['status', {str(run_dir)!r}]) == 0\n"
        f"assert main(['report', {str(run_dir)!r}, '--format', 'json', '-o', "
        f"{str(tmp_path / 'r.json')!r}]) == 0\n"
        f"assert main(['report', {str(run_dir)!r}, '--format', 'html', '-o', "
        f"{str(tmp_path / 'r.html')!r}]) == 0\n"
        f"assert main(['export', {str(run_dir)!r}, '-o', {str(tmp_path / 'export')!r}]) == 0\n"
        "bad = sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["run_state"] == "completed"


def test_metrics_filter_and_no_reports_keep_every_final_value(run_dir, results):
    only = load_run(run_dir, metrics=["val_acc"])
    assert set(only.reports["metric"].astype(str)) == {"val_acc"}
    assert len(only.reports) == int((results.reports["metric"] == "val_acc").sum())
    none = load_run(run_dir, reports=False)
    assert len(none.reports) == 0 and list(none.reports.columns) == list(results.reports.columns)
    for res in (only, none):
        pd.testing.assert_frame_equal(res.trials, results.trials)


def test_a_trial_logged_twice_keeps_its_last_record(tmp_path, run_dir, results):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    lines = (copy / "trials.jsonl").read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    rerun = dict(first, status="completed", attempts=3, reports=first["reports"][:1])
    (copy / "trials.jsonl").write_text("".join(lines) + json.dumps(rerun) + "\n")
    res = load_run(copy)
    assert len(res.trials) == len(results.trials) and res.trials["trial_id"].is_unique
    row = res.trials.set_index("trial_id").loc[first["trial_id"]]
    assert row["attempts"] == 3 and row["n_reports"] == 1
    assert (res.reports["trial_id"] == first["trial_id"]).sum() == len(
        first["reports"][0]["metrics"]
    )
    assert len(res.reports) == len(results.reports) - sum(
        len(p["metrics"]) for p in first["reports"][1:]
    )
    assert res.notes == ["1 trial(s) were logged twice; the last record of each is used"]


def test_irregular_reports_are_read_one_metric_at_a_time(tmp_path, run_dir):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rec = json.loads((copy / "trials.jsonl").read_text().splitlines()[0])
    rec["trial_id"] = "tune-sgd-s1000-t999"
    rec["reports"] = [
        {"step": 1, "metrics": {"val_acc": 0.5}},
        {"step": 2, "metrics": {"loss": 1.0}, "time_s": 2.0},
        {"step": 3, "metrics": {"val_acc": "nan", "loss": 0.5}, "time_s": 3.0},
    ]
    (copy / "trials.jsonl").write_text(json.dumps(rec) + "\n")
    res = load_run(copy)
    r = res.reports
    # metrics in name order within a trial; a report without a metric has no row for it
    assert r[["step", "metric"]].astype(str).values.tolist() == [
        ["2", "loss"],
        ["3", "loss"],
        ["1", "val_acc"],
        ["3", "val_acc"],
    ]
    assert r["value"].iloc[:3].tolist() == [1.0, 0.5, 0.5] and np.isnan(
        r["value"].iloc[3]
    )  # "nan" reads as NaN
    assert np.isnan(r["time_s"].iloc[2]) and r["time_s"].iloc[3] == 3.0
    assert np.isnan(res.trials["final.val_acc"].iloc[0]) and res.trials["final.loss"].iloc[0] == 0.5


def test_a_damaged_record_is_refused_naming_the_field_not_a_crash(tmp_path, run_dir):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rec = json.loads((copy / "trials.jsonl").read_text().splitlines()[0])
    rec.update(
        trial_id="tune-sgd-s1000-t998",
        seed="x",
        exposure=2.5,
        attempts=True,
        reports="oops",
        errors="bad",
        violations=[1],
        started="yesterday",
        duration_s="long",
    )
    with open(copy / "trials.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    # one schema check for every reader (docs/run-folder.md): the first field of the wrong type,
    # named, exit 3
    with pytest.raises(
        RunError, match=r"line 40 of .*trials.jsonl: field `seed` is 'x', not a whole number"
    ):
        load_run(copy)
    assert main(["status", str(copy)]) == 3


def test_cli_exit_codes_and_notes(tmp_path, run_dir, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "decisions.json").write_text("{")
    assert main(["report", str(copy), "--format", "json"]) == 3  # a run file that cannot be read
    err = capsys.readouterr().err
    assert err == f"plan report: {copy / 'decisions.json'} is not valid JSON: the file is damaged\n"
    (copy / "decisions.json").unlink()
    with open(copy / "trials.jsonl", "a") as f:
        f.write('{"trial_id": "tune-sgd')
    assert main(["report", str(copy), "--format", "md", "-o", str(tmp_path / "r.md")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        "plan report: note: the last line of trials.jsonl (line 40) is incomplete"
    )
    assert (
        main(["report", str(copy), "--format", "md", "-o", str(tmp_path / "missing" / "r.md")]) == 2
    )
    assert "cannot write" in capsys.readouterr().err
