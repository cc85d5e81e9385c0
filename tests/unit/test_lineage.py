"""Lineage (docs/lineage.md): promotion, baselines from runs and lines, the ledger, plan log,
forking paths.

Run folders are written here in the documented format (docs/run-folder.md) through the run
folder's own writer, and the ledger through the same calls `plan run` makes; no Ray.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner._cli.main import main
from planner._contract.validate import validate as validate_without_lineage
from planner._core.errors import LineageError
from planner._lineage import record
from planner._lineage.ledger import read
from planner._lineage.log import build_log
from planner._lineage.promote import promote, withdraw
from planner._lineage.resolve import ProjectLineage, load_contract, validate
from tests._lineage_runs import (
    FIRST,
    REPO,
    TRAINABLE,
    codes,
    fake_run,
    load_contract_with,
    second,
    write,
)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the trainable imports as tests.trainables.lineage


@pytest.fixture
def project(tmp_path):
    runs = tmp_path / "runs"
    first = fake_run(
        write(tmp_path / "c", FIRST),
        runs,
        {"high": "accept"},
        params={"base": {"recipe.lr": 0.02}, "high": {"recipe.lr": 0.0125}},
    )
    return tmp_path, runs, first


# ---------------------------------------------------------------- promotion


def test_an_accepted_arm_of_a_completed_run_is_promoted_and_becomes_the_line_baseline(project):
    _, runs, first = project
    rec = promote(first, "high", note="clear win")
    assert (
        rec["event"] == "promoted"
        and rec["line"] == "levels"
        and rec["run"] == f"levels/{first.name}"
    )
    assert rec["params"] == {"recipe.lr": 0.0125} and rec["decision"]["decision"] == "accept"
    in_force = read(runs).in_force("levels")
    assert (in_force["run"], in_force["arm"], in_force["note"]) == (
        f"levels/{first.name}",
        "high",
        "clear win",
    )
    # promotion is its own state: the run's decisions are untouched
    assert (
        json.loads((first / "decisions.json").read_text())["decisions"][0]["decision"] == "accept"
    )
    assert "promot" not in (first / "decisions.json").read_text()
    with pytest.raises(LineageError, match="P713"):
        promote(first, "high")
    with pytest.raises(LineageError, match="P712"):
        promote(first, "base")


@pytest.mark.parametrize("decision", ["reject", "inconclusive", "incomplete"])
def test_an_arm_that_was_not_accepted_is_refused_with_its_decision(tmp_path, decision, capsys):
    runs = tmp_path / "runs"
    run = fake_run(
        write(tmp_path / "c", FIRST), runs, {"high": decision}, params={"base": {}, "high": {}}
    )
    assert main(["promote", str(run), "--arm", "high"]) == 1
    err = capsys.readouterr().err
    assert "P711" in err and f"was {decision} (it was {decision})" in err
    assert not any(r["event"] == "promoted" for r in read(runs).records)


def test_an_incomplete_run_is_refused_and_so_is_its_baseline_and_there_is_no_force(
    tmp_path, capsys
):
    runs = tmp_path / "runs"
    run = fake_run(
        write(tmp_path / "c", FIRST),
        runs,
        {"high": "accept"},
        state="budget_exhausted",
        params={"base": {}, "high": {}},
    )
    assert main(["promote", str(run), "--arm", "high"]) == 1
    assert "P710" in capsys.readouterr().err and "budget_exhausted, not completed" in str(
        pytest.raises(LineageError, promote, run, "high").value
    )
    with pytest.raises(SystemExit) as stop:
        main(["promote", str(run), "--arm", "high", "--force"])
    assert stop.value.code == 2


def test_a_withdrawal_needs_a_note_and_the_line_falls_back(project, tmp_path):
    _, runs, first = project
    promote(first, "high")
    second_run = fake_run(write(tmp_path / "c2", second(first)), runs, {"wide": "accept"})
    promote(second_run, "wide")
    assert read(runs).in_force("levels")["arm"] == "wide"
    with pytest.raises(Exception, match="needs --note"):
        withdraw(second_run, "wide", None)
    out = withdraw(second_run, "wide", "the gain did not reproduce")
    assert out["in_force"] == {"run": f"levels/{first.name}", "arm": "high"}
    with pytest.raises(LineageError, match="P714"):
        withdraw(second_run, "wide", "again")


def test_the_ledger_and_lineage_json_hold_no_secret_of_the_free_text_they_are_given(
    tmp_path, monkeypatch
):
    """A run's end reason (an exception's message, `--address ray://user:PASS@...`) and a
    decision's reason are free text: the ledger gets them scrubbed, as state.json and the terminal
    do; params stay exact."""
    monkeypatch.setenv("DB_PASSWORD", "hunter2-LEAKMARK-9f3")
    runs = tmp_path / "runs"
    run = fake_run(
        write(tmp_path / "c", FIRST),
        runs,
        {"high": "accept"},
        params={"base": {"recipe.lr": 0.02}, "high": {"recipe.lr": 0.0125}},
    )
    reason = (
        "cannot connect to the Ray cluster at ray://admin:S3cretLEAKMARK@127.0.0.1:1; Boom: the "
        "db said "
        "hunter2-LEAKMARK-9f3 was wrong"
    )
    record.run_ended(
        run,
        "failed",
        reason,
        [
            {
                "arm": "high",
                "decision": "incomplete",
                "reason": "token hf_LEAKMARKabcdefghijklmnop refused",
            }
        ],
        0.05,
    )
    record.run_started(run, *_loaded(tmp_path / "c" / "contract.yaml", runs), None, resumed=True)
    text = (runs / "ledger.jsonl").read_text()
    assert "LEAKMARK" not in text and "ray://<redacted>@127.0.0.1:1" in text
    ended = [r for r in read(runs).records if r["event"] == "run_ended"][-1]
    assert ended["reason"].endswith("the db said <redacted> was wrong")
    promote(run, "high", note="clear win")
    assert [r for r in read(runs).records if r["event"] == "promoted"][-1]["params"] == {
        "recipe.lr": 0.0125
    }


def _loaded(path: Path, runs: Path):
    loaded = load_contract_with(path, ProjectLineage(runs))
    return loaded.contract, loaded.configs


@pytest.mark.parametrize(
    "note",
    [
        "pushed with hf_LEAKMARKabcdefghijklmnop",
        "password=Hunter2LEAKMARK",
        "see https://admin:LEAKMARKpw@registry.example/x",
        "db said hunter2-LEAKMARK-9f3",
    ],
)
def test_a_note_holding_a_credential_is_refused_at_the_door(project, note, monkeypatch, capsys):
    """`plan promote --note` keeps the note as typed, so a credential in it is refused (exit 2),
    never printed."""
    monkeypatch.setenv("DB_PASSWORD", "hunter2-LEAKMARK-9f3")
    _, runs, first = project
    assert main(["promote", str(first), "--arm", "high", "--note", note]) == 2
    err = capsys.readouterr().err
    assert "--note holds a credential" in err and "LEAKMARK" not in err
    assert "LEAKMARK" not in (runs / "ledger.jsonl").read_text()
    assert not any(r["event"] == "promoted" for r in read(runs).records)
    assert (
        main(["promote", str(first), "--arm", "high", "--note", "clear win, p-value 0.01, lr=3e-4"])
        == 0
    )
    assert main(["promote", str(first), "--arm", "high", "--withdraw", "--note", note]) == 2
    assert read(runs).in_force("levels")["note"] == "clear win, p-value 0.01, lr=3e-4"


# ---------------------------------------------------------------- a baseline from a run


def test_a_from_run_contract_composes_exactly_the_promoted_config_and_validates(project):
    tmp_path, runs, first = project
    promote(first, "high")
    result = validate(write(tmp_path / "c2", second(first)), runs_dir=runs)
    assert result.valid and codes(result) == ["P901"], [d.format() for d in result.diagnostics]
    configs = result.loaded.configs
    logged = yaml.safe_load((first / "configs" / "high.yaml").read_text())
    assert logged["recipe"]["lr"] == 0.01  # composed value; the tuned one is in selection.json
    assert configs["high"] == {"recipe": {"name": "b", "level": 0.7, "lr": 0.0125, "width": 1}}
    assert configs["wide"] == {"recipe": {"name": "b", "level": 0.7, "lr": 0.0125, "width": 2}}
    source = result.summary["baseline_from"]
    assert (source["run"], source["arm"], source["decision"], source["line"]) == (
        f"levels/{first.name}",
        "high",
        "accept",
        "levels",
    )
    assert source["promoted"] and source["params"] == {"recipe.lr": 0.0125}
    wide = next(a for a in result.summary["arms"] if a["name"] == "wide")
    assert wide["diff"] == [{"path": "recipe.width", "baseline": 1, "arm": 2, "change": "changed"}]
    from planner._cli.validate_text import format_result

    assert "baseline arm 'high' of run levels/" in format_result(result)


def test_confirming_a_tuned_baseline_on_the_seeds_it_was_tuned_on_warns(project):
    """P402 across runs: run 1 selected the arm's lr on tuning seed 1000; confirming it on 1000
    flatters it."""
    tmp_path, runs, first = project
    promote(first, "high")
    data = second(first)
    data["seeds"] = [0, 1, 1000]
    result = validate(write(tmp_path / "c2", data), runs_dir=runs)
    (found,) = [d for d in result.diagnostics if d.code == "P936"]
    assert (
        found.severity == "warning"
        and "tuning seeds [1000]" in found.message
        and "recipe.lr=0.0125" in found.message
    )
    assert "P936" not in codes(
        validate(write(tmp_path / "c3", second(first)), runs_dir=runs)
    )  # other seeds


def test_a_line_name_resolves_to_the_baseline_in_force(project):
    tmp_path, runs, first = project
    data = second(first)
    data["baseline"] = "levels"
    path = write(tmp_path / "c2", data)
    missing = validate(path, runs_dir=runs)
    assert not missing.valid and "P705" in codes(missing)
    promote(first, "high")
    result = validate(path, runs_dir=runs)
    assert result.valid, [d.format() for d in result.diagnostics]
    assert result.loaded.contract.baseline.name == "baseline"
    assert result.loaded.configs["baseline"]["recipe"]["lr"] == 0.0125
    data["baseline"] = {"line": "nope"}
    assert "P705" in codes(validate(write(tmp_path / "c3", data), runs_dir=runs))


def test_a_baseline_not_accepted_or_not_promoted_warns(project):
    tmp_path, runs, first = project
    result = validate(write(tmp_path / "c2", second(first)), runs_dir=runs)
    assert result.valid and "P931" in codes(result) and "P930" not in codes(result)
    result = validate(write(tmp_path / "c3", second(first, arm="base")), runs_dir=runs)
    assert {"P930", "P931"} <= set(codes(result))
    assert result.loaded.configs["base"]["recipe"]["lr"] == 0.02


def test_a_changed_trainable_code_warns(project):
    tmp_path, runs, first = project
    promote(first, "high")
    identity = json.loads((first / "identity.json").read_text())
    identity["code"]["trainable_source_sha256"] = (
        "0" * 64
    )  # the code that earned the promotion was other code
    (first / "identity.json").write_text(json.dumps(identity))
    path = write(tmp_path / "c2", second(first))
    result = validate(path, runs_dir=runs)
    p932 = [d for d in result.diagnostics if d.code == "P932"]
    assert result.valid and len(p932) == 1 and "000000000000 in run" in p932[0].message
    from_run = next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if "from_run" in text
    )
    assert p932[0].severity == "warning" and p932[0].line == from_run
    assert (
        validate(write(tmp_path / "c2", second(first)), strict=True, runs_dir=runs).exit_code == 1
    )


def test_an_edited_trainable_file_warns(tmp_path):
    """The real thing: the trainable's source changes after the run that earned the baseline."""
    source = (REPO / "tests" / "trainables" / "lineage.py").read_text()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "mytrain.py").write_text(source)
    runs = tmp_path / "runs"
    first = fake_run(
        write(tmp_path / "c", dict(FIRST, trainable="mytrain:train")),
        runs,
        {"high": "accept"},
        params={"base": {}, "high": {}},
    )
    promote(first, "high")
    path = write(tmp_path / "c", dict(second(first), trainable="mytrain:train"), "second.yaml")
    assert "P932" not in codes(validate(path, runs_dir=runs))
    (tmp_path / "c" / "mytrain.py").write_text(source.replace("0.5 * abs", "0.6 * abs"))
    result = validate(path, runs_dir=runs)
    assert result.valid and "P932" in codes(result)
    other = write(tmp_path / "c", dict(second(first), trainable=TRAINABLE), "third.yaml")
    (p932,) = [d for d in validate(other, runs_dir=runs).diagnostics if d.code == "P932"]
    assert "'mytrain:train' then, 'tests.trainables.lineage:train' now" in p932.message


def test_bad_references_are_errors_with_a_code(project):
    tmp_path, runs, first = project
    assert "P701" in codes(
        validate(write(tmp_path / "a", second(tmp_path / "nowhere")), runs_dir=runs)
    )
    assert "P702" in codes(
        validate(write(tmp_path / "b", second(first, arm="nope")), runs_dir=runs)
    )
    # a tuned arm with nothing selected has no config to start from
    other = fake_run(
        write(tmp_path / "c", FIRST), runs, {"high": "accept"}, params={"base": {"recipe.lr": 0.02}}
    )
    assert "P703" in codes(validate(write(tmp_path / "d", second(other)), runs_dir=runs))
    # a relative from_run is relative to the contract's folder; the hint says the path from there
    import os

    data = second(Path(os.path.relpath(first, REPO)))  # from the working folder (the repository)
    result = validate(write(tmp_path / "e" / "deeper", data), runs_dir=runs)
    assert (
        "P701" in codes(result)
        and f"'../../runs/levels/{first.name}'" in result.diagnostics[0].format()
    )
    data = second(Path("..") / "runs" / "levels" / first.name)  # relative to the contract in f/
    assert validate(write(tmp_path / "f", data), runs_dir=runs).valid
    # the contract stage alone cannot read a run folder
    assert "P700" in codes(validate_without_lineage(tmp_path / "f" / "contract.yaml"))


def test_redacted_values_in_the_logged_config_are_refused(tmp_path):
    # a run folder of an older planner, which logged a credential's value as <redacted> (a contract
    # cannot hold a credential now: P230; `<redacted>` itself is no credential, so it gets to the
    # run folder as is)
    data = dict(
        FIRST,
        config={
            "values": {
                "recipe": {
                    "name": "a",
                    "level": 0.5,
                    "lr": 0.01,
                    "width": 1,
                    "api_key": "<redacted>",
                }
            }
        },
    )
    run = fake_run(
        write(tmp_path / "c", data),
        tmp_path / "runs",
        {"high": "accept"},
        params={"base": {}, "high": {}},
    )
    result = validate(write(tmp_path / "c2", second(run)), runs_dir=tmp_path / "runs")
    assert "P704" in codes(result) and "recipe.api_key" in result.diagnostics[0].message


def test_the_model_keeps_its_schema_codes_for_the_new_forms(tmp_path):
    data = second(Path("x"))
    data["baseline"] = {"from_run": "x"}
    assert "P104" in codes(validate(write(tmp_path / "a", data), runs_dir=tmp_path))
    data["baseline"] = {"name": "b", "overides": []}
    result = validate(
        write(tmp_path / "b", dict(FIRST, baseline=data["baseline"])), runs_dir=tmp_path
    )
    assert codes(result) == ["P100"] and "overrides" in result.diagnostics[0].hint
    no_config = {k: v for k, v in FIRST.items() if k != "config"}
    assert "P104" in codes(validate(write(tmp_path / "c", no_config), runs_dir=tmp_path))


# ---------------------------------------------------------------- the ledger, plan log, forking
# paths


def test_plan_log_json_shows_the_chain(project, capsys):
    tmp_path, runs, first = project
    promote(first, "high", note="first win")
    second_run = fake_run(write(tmp_path / "c2", second(first)), runs, {"wide": "accept"})
    promote(second_run, "wide")
    third = dict(
        second(first),
        name="deeper",
        factor={"name": "depth", "keys": ["recipe.level"]},
        baseline="levels",
        arms=[{"name": "lower", "overrides": ["recipe.level=0.6"]}],
    )
    third_run = fake_run(write(tmp_path / "c3", third), runs, {"lower": "reject"})
    assert main(["log", "--json", "--runs-dir", str(runs)]) == 0
    log = json.loads(capsys.readouterr().out)
    (line,) = log["lines"]
    assert line["line"] == "levels"
    chain = [
        (b["arm"], (b["from"] or {}).get("run"), [x["run"] for x in b["experiments"]])
        for b in line["baselines"]
    ]
    assert chain == [
        ("base", None, [f"levels/{first.name}"]),
        ("high", f"levels/{first.name}", [f"wider/{second_run.name}"]),
        ("baseline", f"wider/{second_run.name}", [f"deeper/{third_run.name}"]),
    ]
    assert [(p["run"], p["arm"]) for p in line["promotions"]] == [
        (f"levels/{first.name}", "high"),
        (f"wider/{second_run.name}", "wide"),
    ]
    assert (line["in_force"]["run"], line["in_force"]["arm"]) == (
        f"wider/{second_run.name}",
        "wide",
    )
    rejected = line["baselines"][2]["experiments"][0]
    assert rejected["decisions"][0]["decision"] == "reject" and rejected["promoted"] == []
    assert main(["log", "--runs-dir", str(runs)]) == 0
    text = capsys.readouterr().out
    assert (
        "baseline in force: arm wide of wider/" in text
        and "nothing promoted: the baseline stays" in text
    )


def test_a_repeated_test_is_counted_with_its_family_wise_alpha(project, capsys):
    tmp_path, runs, first = project
    promote(first, "high")
    path = write(tmp_path / "c2", second(first))
    one = fake_run(path, runs, {"wide": "inconclusive"})
    two = fake_run(
        write(tmp_path / "c2b", dict(second(first), name="wider-again")),
        runs,
        {"wide": "inconclusive"},
    )
    result = validate(
        write(tmp_path / "c2c", dict(second(first), name="wider-third")), runs_dir=runs
    )
    (p934,) = [d for d in result.diagnostics if d.code == "P934"]
    assert "tested 3 times" in p934.message and "inconclusive" in p934.message
    assert "family-wise alpha of 0.143" in p934.message  # 1 - 0.95 ** 3
    three = fake_run(tmp_path / "c2c" / "contract.yaml", runs, {"wide": "accept"})
    facts = json.loads((three / "lineage.json").read_text())
    assert facts["repetition"]["count"] == 3 and facts["repetition"][
        "family_alpha"
    ] == pytest.approx(1 - 0.95**3)
    assert [e["run"] for e in facts["repetition"]["earlier"]] == [
        f"wider/{one.name}",
        f"wider-again/{two.name}",
    ]
    log = build_log(runs)
    (fork,) = [f for f in log["lines"][0]["forking"] if f["kind"] == "repeated_test"]
    assert fork["count"] == 3 and fork["decisions"] == ["inconclusive", "inconclusive", "accept"]
    assert main(["log", "--runs-dir", str(runs)]) == 0
    assert "tested 3 times against the same baseline" in capsys.readouterr().out
    # the report of the later run says so
    from planner._results.render import load_for_report, render

    assert "factor width was tested 3 times" in render(load_for_report(three, "md"), "md")
    assert "<h2>Lineage</h2>" in render(load_for_report(three, "html"), "html")
    from planner import RunResult
    from planner._cli.run_text import format_result  # what `plan run` prints at its end

    end = format_result(RunResult(three, "completed", "", [], 1.0, 10))
    assert "lineage:    Forking paths: factor width was tested 3 times" in end
    assert (
        json.loads(render(load_for_report(three, "json"), "json"))["lineage"]["repetition"]["count"]
        == 3
    )


def test_a_contract_edited_under_the_same_name_after_decisions_warns(project):
    tmp_path, runs, first = project
    path = write(tmp_path / "c", FIRST)
    assert "P933" not in codes(validate(path, runs_dir=runs))
    edited = write(tmp_path / "c", dict(FIRST, acceptance={"min_effect": 0.01}))
    result = validate(edited, runs_dir=runs)
    (p933,) = [d for d in result.diagnostics if d.code == "P933"]
    assert f"run levels/{first.name}" in p933.message and p933.line == 2 and "new name" in p933.hint
    again = fake_run(edited, runs, {"high": "reject"}, params={"base": {}, "high": {}})
    facts = json.loads((again / "lineage.json").read_text())
    assert facts["edited_after_decisions"][0]["run"] == f"levels/{first.name}"
    (fork,) = [f for f in build_log(runs)["lines"][0]["forking"] if f["kind"] == "edited_contract"]
    assert fork["edited_runs"] == [f"levels/{again.name}"]


def test_a_contract_mended_after_a_run_whose_decisions_were_all_incomplete_is_no_edit(tmp_path):
    # the earlier run of the name failed (every decision incomplete): it showed no result to tune
    # the recipe to
    runs = tmp_path / "runs"
    fake_run(
        write(tmp_path / "c", FIRST),
        runs,
        {"high": "incomplete"},
        state="failed",
        params={"base": {"recipe.lr": 0.02}, "high": {"recipe.lr": 0.0125}},
    )
    mended = write(tmp_path / "c", dict(FIRST, acceptance={"min_effect": 0.01}))
    assert "P933" not in codes(validate(mended, runs_dir=runs))


def test_a_run_with_no_end_in_the_ledger_is_read_from_its_folder(project):
    _, runs, first = project
    lines = (runs / "ledger.jsonl").read_text().splitlines()
    (runs / "ledger.jsonl").write_text(
        "\n".join(line for line in lines if '"run_ended"' not in line) + '\n{"eve'
    )
    log = build_log(runs)
    exp = log["lines"][0]["baselines"][0]["experiments"][0]
    assert (
        exp["state"] == "completed"
        and exp["end_from"] == "run folder"
        and exp["decisions"][0]["arm"] == "high"
    )
    assert any("no end in the ledger" in n for n in log["notes"])
    assert any("incomplete" in n for n in log["notes"])  # the torn last line


def test_the_schema_accepts_the_three_baseline_forms():
    from planner._contract.model import json_schema

    forms = json_schema()["properties"]["baseline"]["anyOf"]
    assert {"$ref": "#/$defs/Arm"} in forms and {"$ref": "#/$defs/BaselineRef"} in forms
    assert any(f.get("type") == "string" for f in forms)


def test_load_contract_is_the_public_one():
    import planner

    assert planner.load_contract is load_contract


def test_runs_from_before_the_ledger_get_their_line_from_their_frozen_contracts(project):
    tmp_path, runs, first = project
    second_run = fake_run(write(tmp_path / "c2", second(first)), runs, {"wide": "accept"})
    (runs / "ledger.jsonl").unlink()  # as if both ran before the ledger existed
    rec = promote(second_run, "wide")
    assert rec["line"] == "levels"  # wider's baseline came from a run of the line `levels`
    assert read(runs).in_force("levels")["run"] == f"wider/{second_run.name}"


def test_a_run_that_tested_nothing_does_not_count_itself_among_the_repeated_tests(project):
    """A new user's crash run (every arm incomplete), interrupted run and invalid run each printed
    "factor warmup was tested 2 times ... (this test included)": they tested nothing (P934's own
    rule)."""
    tmp_path, runs, first = project
    promote(first, "high")
    one = fake_run(write(tmp_path / "c2", second(first)), runs, {"wide": "inconclusive"})
    for name, decisions, state in (
        ("wider-crash", {"wide": "incomplete"}, "completed"),
        ("wider-stopped", {"wide": "inconclusive"}, "interrupted"),
        ("wider-invalid", {"wide": "invalid"}, "completed"),
    ):
        run = fake_run(
            write(tmp_path / name, dict(second(first), name=name)), runs, decisions, state=state
        )
        rep = json.loads((run / "lineage.json").read_text())["repetition"]
        assert rep["count"] == 1 and rep["this_run_tested"] is False, (name, rep)
        assert (
            "this run tested nothing" in rep["sentence"] and f"wider/{one.name}" in rep["sentence"]
        )
        assert "this test included" not in rep["sentence"]
        if (
            state == "interrupted"
        ):  # resumed, it fails this time: the sentence says failed, as_tested stays whole
            from planner._lineage.record import run_ended

            as_tested = rep["as_tested"]
            run_ended(run, "failed", "disk full", [], 0.05)
            again = json.loads((run / "lineage.json").read_text())["repetition"]
            assert "(state failed;" in again["sentence"] and again["as_tested"] == as_tested, again
