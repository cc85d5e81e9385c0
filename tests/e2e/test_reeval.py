"""`plan reeval`: pure comparisons in milliseconds, then real runs re-evaluated through a real
local Ray.

The end-to-end tests copy tests/trainables/reeval_deterministic.py into a
temporary contract folder under a module name of their own, so that editing
the copy (the code-change test) touches nothing else.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from planner import RunError, UsageError, load_run
from planner._cli.main import main
from planner._cli.reeval_text import format_table
from planner._reeval.comparison import SeedRow, compare_seed, verdict
from planner._reeval.differences import Difference, compare_identity
from planner._reeval.prepare import heldout_refusal, next_reeval_number, prepare
from tests._runs import hydra_app, synthetic_contract

TEMPLATE = Path(__file__).resolve().parents[1] / "trainables" / "reeval_deterministic.py"


# ------------------------------------------------------------------ pure parts

IDENTITY = {
    "contract_sha256": "c" * 64,
    "code": {
        "repo": "/src",
        "commit": "a" * 40,
        "dirty": False,
        "diff_sha256": "d" * 64,
        "trainable": "m:train",
        "trainable_source_sha256": "1" * 64,
        "trainable_file": "/src/m.py",
    },
    "python": "3.11.7",
    "packages": {"ray": "2.60.0", "numpy": "2.4.6"},
    "host": {"hostname": "a"},
    "data": {"data/train.csv": "e" * 64},
    "env": {},
}


def changed(**sections):
    out = json.loads(json.dumps(IDENTITY))
    for section, values in sections.items():
        if isinstance(values, dict):
            out[section].update(values)
            for key in [k for k, v in values.items() if v is None]:
                del out[section][key]
        else:
            out[section] = values
    return out


def test_an_identical_identity_has_no_differences_and_host_facts_do_not_count():
    assert (
        compare_identity(IDENTITY, changed(host={"hostname": "b"}, env={"OMP_NUM_THREADS": "1"}))
        == []
    )


def test_every_code_fact_package_and_data_file_that_changed_is_named():
    today = changed(
        code={
            "commit": "b" * 40,
            "dirty": True,
            "diff_sha256": "f" * 64,
            "trainable_source_sha256": "2" * 64,
        },
        packages={"ray": "2.61.0", "numpy": None, "torch": "2.5.0"},
        python="3.12.1",
        data={"data/train.csv": "0" * 64},
    )
    found = {d.what: (d.logged, d.current) for d in compare_identity(IDENTITY, today)}
    assert found == {
        "code.commit": ("a" * 40, "b" * 40),
        "code.dirty": (False, True),
        "code.diff_sha256": ("d" * 64, "f" * 64),
        "code.trainable_source_sha256": ("1" * 64, "2" * 64),
        "python": ("3.11.7", "3.12.1"),
        "packages.ray": ("2.60.0", "2.61.0"),
        "packages.numpy": ("2.4.6", None),
        "packages.torch": (None, "2.5.0"),
        "data.data/train.csv": ("e" * 64, "0" * 64),
    }
    text = str(Difference("code.trainable_source_sha256", "1" * 64, "2" * 64))
    assert text == "code.trainable_source_sha256: 111111111111 (logged) -> 222222222222 (today)"
    assert (
        str(Difference("packages.torch", None, "2.5.0"))
        == "packages.torch: <absent> (logged) -> 2.5.0 (today)"
    )


def test_a_changed_local_module_of_the_trainable_is_named():
    logged = changed(
        code={
            **IDENTITY["code"],
            "local_sources": {"helper.py": "a" * 64, "models/net.py": "b" * 64},
        }
    )
    today = changed(
        code={
            **IDENTITY["code"],
            "local_sources": {
                "helper.py": "c" * 64,
                "models/net.py": "b" * 64,
                "models/new.py": "d" * 64,
            },
        }
    )
    found = {d.what: (d.logged, d.current) for d in compare_identity(logged, today)}
    assert found == {
        "code.local_sources.helper.py": ("a" * 64, "c" * 64),
        "code.local_sources.models/new.py": (None, "d" * 64),
    }
    assert (
        compare_identity(IDENTITY, today) == []
    )  # a log from before local modules were recorded: not compared


def test_a_missing_logged_identity_reports_what_today_knows():
    found = [d.what for d in compare_identity(None, IDENTITY)]
    assert "code.trainable_source_sha256" in found and "packages.ray" in found


def record(status="completed", *values, metric="test_acc"):
    return {
        "status": status,
        "reports": [
            {"step": i + 1, "metrics": {metric: v, "val_acc": 0.0}} for i, v in enumerate(values)
        ],
    }


def test_a_seed_reproduces_within_the_tolerance_and_zero_means_exact():
    exact = compare_seed(
        0, "r", record("completed", 0.1, 0.5), record("completed", 0.2, 0.5), "test_acc", 0.0
    )
    assert exact.reproduced is True and exact.diff == 0.0 and exact.logged == exact.new == 0.5
    off = compare_seed(
        0, "r", record("completed", 0.5), record("completed", 0.5 + 1e-12), "test_acc", 0.0
    )
    assert off.reproduced is False and off.diff == pytest.approx(1e-12)
    assert compare_seed(
        0, "r", record("completed", 0.5), record("completed", 0.51), "test_acc", 0.02
    ).reproduced
    assert not compare_seed(
        0, "r", record("completed", 0.5), record("completed", 0.53), "test_acc", 0.02
    ).reproduced


def test_a_seed_with_another_status_differs_and_one_that_did_not_run_is_no_evidence():
    diverged = compare_seed(
        1, "r", record("completed", 0.5), record("diverged", "nan"), "test_acc", 1.0
    )
    assert (
        diverged.reproduced is False and diverged.new is None and diverged.new_status == "diverged"
    )
    both_diverged = compare_seed(
        1, "r", record("diverged", "nan"), record("diverged", "nan"), "test_acc", 0.0
    )
    assert both_diverged.reproduced is True
    failed = compare_seed(1, "r", record("completed", 0.5), record("failed"), "test_acc", 0.0)
    assert failed.reproduced is None and failed.new_status == "failed"
    missing = compare_seed(1, "r", record("completed", 0.5), None, "test_acc", 0.0)
    assert missing.new_status == "not_run" and missing.reproduced is None
    new = compare_seed(9, "r", None, record("completed", 0.7), "test_acc", 0.0)
    assert new.is_new and new.reproduced is None and new.new == 0.7 and new.diff is None


def test_a_logged_trial_that_continued_from_its_checkpoint_is_named_as_the_likely_cause():
    """The logged seed 0 resumed from epoch 2's checkpoint after an interrupt (another data order
    for its later epochs): the verdict blamed a package difference instead."""
    logged = {
        **record("completed", 0.5),
        "resumed": True,
        "resumed_from": {"path": "trials/x/checkpoints/e.ckpt"},
    }
    differs = compare_seed(0, "r", logged, record("completed", 0.52), "test_acc", 0.0)
    assert differs.reproduced is False and differs.continued
    assert "(logged: continued from its checkpoint)" in format_table([differs])
    assert not compare_seed(
        0, "r", record("completed", 0.5), record("completed", 0.52), "test_acc", 0.0
    ).continued


def row(seed, reproduced, new_status="completed", logged_status="completed"):
    return SeedRow(seed, f"t{seed}", logged_status, 0.5, new_status, 0.5, 0.0, reproduced)


def test_the_verdict_and_its_exit_code():
    assert verdict([row(0, True), row(1, True)]) == ("reproduced", 0)
    assert verdict([row(0, True), row(1, False)]) == ("not_reproduced", 1)
    assert verdict([row(0, False), row(1, None, "failed")]) == (
        "not_reproduced",
        1,
    )  # a difference is evidence
    assert verdict([row(0, True), row(1, None, "failed")]) == ("failed", 3)
    assert verdict([row(0, None, logged_status=None)]) == ("new_seeds", 0)
    assert verdict([row(0, None, "timeout", logged_status=None)]) == ("failed", 3)


def test_the_per_seed_table_marks_each_seed():
    rows = [
        SeedRow(0, "a", "completed", 0.5, "completed", 0.5, 0.0, True),
        SeedRow(1, "b", "completed", 0.5, "completed", 0.75, 0.25, False),
        SeedRow(7, "c", None, None, "completed", 0.6, None, None),
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["seed", "logged", "new", "diff", "result"]
    assert lines[1].split() == ["0", "0.5", "0.5", "+0", "reproduced"]
    assert lines[2].split() == ["1", "0.5", "0.75", "+0.25", "DIFFERS"]
    assert lines[3].split() == ["7", "-", "0.6", "-", "new", "seed"]


def test_the_heldout_cap_refuses_past_it_and_names_the_count_and_the_cap():
    ledger = {"metric": "test_acc", "evaluations": 6, "confirm": 4, "reeval": 2, "cap": 7}
    assert heldout_refusal(ledger, 1) is None
    message = heldout_refusal(ledger, 2)
    assert "evaluated 6 time(s)" in message and "would make 8" in message
    assert (
        "budget.max_heldout_evaluations = 7" in message
        and "re-evaluate at most 1 seed(s)" in message
    )
    assert "the cap is spent" in heldout_refusal({**ledger, "evaluations": 7}, 1)
    assert heldout_refusal({**ledger, "cap": None}, 100) is None
    assert heldout_refusal({**ledger, "metric": None}, 100) is None


def test_reeval_numbers_count_up_from_the_log_and_the_trial_ids():
    assert next_reeval_number([], []) == 1
    assert next_reeval_number([{"reeval": 1}, {"reeval": 2}], []) == 3
    torn = [
        {"phase": "reeval", "trial_id": "reeval-my-arm-s3-4"},
        {"phase": "confirm", "trial_id": "confirm-a-s1"},
    ]
    assert (
        next_reeval_number([{"reeval": 2}], torn) == 5
    )  # a reeval cut short before its record was written


# ------------------------------------------------------------------ the run folder, without Ray


def contract_data(module: str, *, seeds=(0, 1), cap=None, tuning=False) -> dict:
    data = synthetic_contract(
        name="reeval",
        hypothesis="The treatment raises test_acc.",
        trainable=f"{module}:train",
        config={"values": {"recipe": {"name": "a", "level": 0.5, "lr": 0.01, "noise": 0.01}}},
        seeds=list(seeds),
    )
    if cap is not None:
        data["budget"]["max_heldout_evaluations"] = cap
    if tuning:
        data["tuning"] = {
            "trials_per_arm": 2,
            "seeds": [100],
            "space": {"recipe.lr": {"log_uniform": [0.001, 0.1]}},
        }
    return data


def project(folder: Path, **options) -> tuple[Path, Path]:
    """A contract folder with its own copy of the deterministic trainable: (contract path,
    trainable file)."""
    module = f"reeval_det_{uuid.uuid4().hex[:10]}"
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{module}.py"
    shutil.copy(TEMPLATE, source)
    path = folder / "contract.yaml"
    path.write_text(yaml.safe_dump(contract_data(module, **options)))
    return path, source


def synthetic_run(tmp_path: Path, cap: int | None = None) -> Path:
    """A run folder as `plan run` leaves it after tuning, before any confirmation trial ended."""
    from planner._contract.model import Contract
    from planner._store.writer import RunStore

    path, _ = project(tmp_path / "project", tuning=True, cap=cap)
    contract = Contract.model_validate(yaml.safe_load(path.read_text()))
    store = RunStore.create(tmp_path / "runs", contract.name)
    configs = {
        "base": {"recipe": {"name": "a", "level": 0.5, "lr": 0.01, "noise": 0.01}},
        "treat": {"recipe": {"name": "b", "level": 0.7, "lr": 0.01, "noise": 0.01}},
    }
    store.write_frozen(contract, str(path), configs, {"planned_count": 8}, "0.1.0")
    store.write_identity({"code": {}, "packages": {}})
    store.write_selection(
        {
            "rule": "final",
            "arms": {
                "base": {
                    "arm": "base",
                    "trial_id": None,
                    "params": {},
                    "reason": "no tuning trial of this arm ended",
                },
                "treat": {
                    "arm": "treat",
                    "trial_id": "tune-treat-s100-t001",
                    "params": {"recipe.lr": 0.003},
                },
            },
        }
    )
    return store.root


def test_without_confirmation_trials_the_config_is_the_logged_config_with_the_selected_params(
    tmp_path,
):
    root = synthetic_run(tmp_path)
    (tmp_path / "project" / "contract.yaml").write_text("today's contract file is not read")
    plan = prepare(root, "treat", seeds=[5, 6])
    assert plan.config == {"recipe": {"name": "b", "level": 0.7, "lr": 0.003, "noise": 0.01}}
    assert plan.config_source == "configs/treat.yaml with the selected params of selection.json"
    assert (
        plan.new_seeds == [5, 6] and plan.logged == {} and plan.trial_id(5) == "reeval-treat-s5-1"
    )
    assert plan.search_path[0] == str((tmp_path / "project").resolve())


def test_refusals_before_anything_runs(tmp_path):
    root = synthetic_run(tmp_path)
    with pytest.raises(
        UsageError, match="no logged confirmation trials to reproduce; give --seeds"
    ):
        prepare(root, "treat")
    with pytest.raises(
        UsageError, match="no selected config to re-run \\(no tuning trial of this arm ended\\)"
    ):
        prepare(root, "base", seeds=[5])
    with pytest.raises(UsageError, match="--seeds lists 5 more than once"):
        prepare(root, "treat", seeds=[5, 5])
    with pytest.raises(UsageError, match="--tolerance must be a finite number >= 0"):
        prepare(root, "treat", seeds=[5], tolerance=-0.1)
    (root / "contract.yaml").write_text("version: 1\nname: reeval\n")
    with pytest.raises(RunError, match="does not load with this planner version"):
        prepare(root, "treat", seeds=[5])


def test_the_cli_says_what_is_wrong_with_the_folder_and_the_arm(tmp_path, capsys):
    assert main(["reeval", str(tmp_path), "--arm", "treat"]) == 2
    assert "is not a run folder" in capsys.readouterr().err
    root = synthetic_run(tmp_path)
    assert main(["reeval", str(root), "--arm", "treat-x"]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "plan reeval: 'treat-x' is not an arm of this run; its arms are: base (baseline), treat"
    )
    with pytest.raises(
        SystemExit
    ) as ended:  # a tolerance must be a finite number: argparse's usage error
        main(["reeval", str(root), "--arm", "treat", "--seeds", "1", "--tolerance", "nan"])
    assert ended.value.code == 2 and "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------ real runs, real Ray


def run_contract(path: Path, runs: Path) -> Path:
    from planner import run

    result = run(path, runs_dir=runs, quiet=True)
    assert result.state == "completed" and all(d["decision"] == "accept" for d in result.decisions)
    return result.run_dir


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, ray_local):
    """One run, 2 arms x 3 seeds, no cap; the tests below re-evaluate it in turn."""
    base = tmp_path_factory.mktemp("reeval-run")
    path, _ = project(base / "project", seeds=(0, 1, 2))
    return run_contract(path, base / "runs")


def reevals(root: Path) -> list[dict]:
    return load_run(root).reevals


def header(out: list[str]) -> int:
    return next(
        i
        for i, line in enumerate(out)
        if line.split() == ["seed", "logged", "new", "diff", "result"]
    )


def lines_of(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


@pytest.mark.ray
def test_a_deterministic_arm_reproduces_exactly_and_the_reeval_is_logged(finished_run, capsys):
    root = finished_run
    confirm = {
        r["seed"]: r
        for r in load_run(root).records
        if r["phase"] == "confirm" and r["arm"] == "treat"
    }
    decisions_before = (root / "decisions.json").read_text()

    assert main(["reeval", str(root), "--arm", "treat"]) == 0
    out = lines_of(capsys.readouterr().out)
    n = reevals(root)[-1]["reeval"]
    assert out[0] == f"reeval {n} of arm treat in {root}"
    assert "  config:  from the logged confirmation trials" in out
    assert "  seeds:   0, 1, 2" in out
    assert "  metric:  test_acc (final value), tolerance 0" in out
    assert "identity: code, python, packages and data match the log" in out
    table = header(out)
    assert [out[table + i].split()[0::4] for i in (1, 2, 3)] == [
        ["0", "reproduced"],
        ["1", "reproduced"],
        ["2", "reproduced"],
    ]
    assert [out[table + i].split()[3] for i in (1, 2, 3)] == ["+0", "+0", "+0"]
    assert "verdict: reproduced: 3 of 3 logged seeds exactly" in out

    new = [
        r
        for r in load_run(root).records
        if r["phase"] == "reeval" and r["trial_id"].endswith(f"-{n}")
    ]
    assert sorted(r["trial_id"] for r in new) == [f"reeval-treat-s{s}-{n}" for s in (0, 1, 2)]
    for r in new:
        assert (
            r["status"] == "completed"
            and r["exposure"] == 3
            and r["config"] == confirm[r["seed"]]["config"]
        )
        assert r["reports"][-1]["metrics"] == confirm[r["seed"]]["reports"][-1]["metrics"]
        assert (root / "trials" / r["trial_id"]).is_dir()

    logged = reevals(root)[-1]
    assert logged["arm"] == "treat" and logged["seeds"] == [0, 1, 2] and logged["new_seeds"] == []
    assert (
        logged["tolerance"] == 0.0
        and logged["metric"] == "test_acc"
        and logged["verdict"] == "reproduced"
    )
    assert logged["exit_code"] == 0 and logged["identity_differences"] == []
    assert logged["config"] == confirm[0]["config"] and logged["trial_ids"] == [
        r["trial_id"] for r in sorted(new, key=lambda r: r["seed"])
    ]
    for entry in logged["rows"]:
        final = confirm[entry["seed"]]["reports"][-1]["metrics"]["test_acc"]
        assert (
            entry["logged"] == entry["new"] == final
            and entry["diff"] == 0.0
            and entry["reproduced"] is True
        )
    assert (
        logged["started"] <= logged["ended"]
        and logged["identity"]["code"]["trainable_source_sha256"]
    )
    assert (root / "decisions.json").read_text() == decisions_before
    events = [e["event"] for e in load_run(root).events]
    assert events[-1] == "reeval_ended" and "reeval_started" in events


@pytest.mark.ray
def test_status_report_and_load_run_count_reeval_trials_apart_from_confirmation(finished_run):
    from planner._results.render import load_for_report, render
    from planner._results.run_status import format_status, read_status

    root = finished_run
    if not reevals(root):
        assert main(["reeval", str(root), "--arm", "treat"]) == 0
    n_reeval = sum(r["phase"] == "reeval" for r in load_run(root).records)
    status = read_status(root)
    assert status["trials_ended"] == status["trials_planned"] == 6
    assert status["heldout"]["confirm"] == 6 and status["heldout"]["reeval"] == n_reeval
    text = format_status(status)
    assert f"trials ended: 6 of 6 planned (and {n_reeval} in re-evaluation, not planned)" in text
    assert f"(confirm 6, reeval {n_reeval})" in text
    results = load_run(root)
    assert (results.trials["phase"] == "confirm").sum() == 6
    assert (results.trials["phase"] == "reeval").sum() == n_reeval
    assert results.heldout["evaluations"] == 6 + n_reeval and results.budget["trials_ended"] == 6
    markdown = render(load_for_report(root, "md"), "md")
    assert f"{6 + n_reeval} time(s)" in markdown and "## Re-evaluations (plan reeval)" in markdown
    assert "| 1 | treat | 0, 1, 2 | 0 | reproduced | none |" in markdown
    document = json.loads(render(load_for_report(root, "json"), "json"))
    assert [r["reeval"] for r in document["reevals"]] == [r["reeval"] for r in reevals(root)]
    html = render(load_for_report(root, "html"), "html")
    assert (
        "<h2>Re-evaluations (plan reeval)</h2>" in html
        and "<td>0, 1, 2</td><td>0</td><td>reproduced</td>" in html
    )


@pytest.mark.ray
def test_new_seeds_report_a_new_estimate_beside_the_logged_one(finished_run, capsys):
    root = finished_run
    assert main(["reeval", str(root), "--arm", "treat", "--seeds", "7", "8", "9"]) == 0
    out = lines_of(capsys.readouterr().out)
    assert "  seeds:   7 (new), 8 (new), 9 (new)" in out
    assert sum(line.endswith("new seed") for line in out) == 3
    assert any(line.startswith("logged test_acc: mean 0.") and line.endswith("n=3") for line in out)
    assert any(
        line.startswith("new seeds test_acc: mean 0.") and line.endswith("n=3") for line in out
    )
    assert any(
        line.startswith("new seeds vs the logged baseline (welch): effect +0.") for line in out
    )
    assert any(line.startswith("logged decision: accept  effect +0.") for line in out)
    assert "verdict: new seeds only: 3 trial(s) ran; nothing logged to compare" in out

    logged = reevals(root)[-1]
    assert (
        logged["verdict"] == "new_seeds"
        and logged["new_seeds"] == [7, 8, 9]
        and logged["exit_code"] == 0
    )
    assert logged["new_estimate"]["n"] == 3 and logged["logged_estimate"]["n"] == 3
    assert logged["comparison"]["test"] == "welch" and logged["comparison"][
        "effect"
    ] == pytest.approx(0.2, abs=0.05)
    assert logged["comparison"]["ci_low"] > 0
    assert all(
        r["logged"] is None and r["diff"] is None and r["new"] is not None for r in logged["rows"]
    )


@pytest.mark.ray
def test_a_resumed_run_leaves_reeval_trials_out_of_its_counts_and_decisions(finished_run):
    from planner import run

    root = finished_run
    if not reevals(root):
        assert main(["reeval", str(root), "--arm", "treat"]) == 0
    contract_path = json.loads((root / "run.json").read_text())["contract_path"]
    result = run(contract_path, resume=root, quiet=True)
    assert result.state == "completed" and result.trials_ended == 6
    assert json.loads((root / "state.json").read_text())["budget"]["trials_ended"] == 6
    decision = json.loads((root / "decisions.json").read_text())["decisions"][0]
    assert decision["n_arm"] == decision["n_baseline"] == 3


@pytest.mark.ray
def test_after_the_code_changed_its_results_reeval_does_not_claim_reproduction(
    tmp_path, ray_local, capsys
):
    path, source = project(tmp_path / "project", cap=7)
    root = run_contract(path, tmp_path / "runs")
    logged_digest = json.loads((root / "identity.json").read_text())["code"][
        "trainable_source_sha256"
    ]
    text = source.read_text()
    source.write_text(
        text.replace("SHIFT = 0.0 ", "SHIFT = 0.0125 ")
    )  # a different size: no stale .pyc
    assert source.read_text() != text

    assert main(["reeval", str(root), "--arm", "treat"]) == 1
    out = lines_of(capsys.readouterr().out)
    diffs = [line for line in out if line.startswith("  code.")]
    assert len(diffs) == 1 and diffs[0].startswith(
        f"  code.trainable_source_sha256: {logged_digest[:12]} (logged) -> "
    )
    table = header(out)
    assert [out[table + i].split()[-2:] for i in (1, 2)] == [
        ["+0.0125", "DIFFERS"],
        ["+0.0125", "DIFFERS"],
    ]
    assert "verdict: NOT reproduced: 2 of 2 logged seeds differ (tolerance 0)" in out
    assert "identity differences that may explain it: code.trainable_source_sha256" in out
    logged = reevals(root)[-1]
    assert logged["verdict"] == "not_reproduced" and logged["exit_code"] == 1
    assert [d["what"] for d in logged["identity_differences"]] == ["code.trainable_source_sha256"]
    assert all(
        r["reproduced"] is False and r["diff"] == pytest.approx(0.0125) for r in logged["rows"]
    )

    # a trainable that now crashes: the trial failed to run (exit 3); it reported nothing, so the
    # ledger stays at 6
    source.write_text(
        text.replace(
            "    rng = random.Random(trial.seed)\n", "    raise RuntimeError('broken today')\n"
        )
    )
    assert main(["reeval", str(root), "--arm", "treat", "--seeds", "0"]) == 3
    out = lines_of(capsys.readouterr().out)
    assert any(line.split()[:1] == ["0"] and line.endswith("failed (did not run)") for line in out)
    assert reevals(root)[-1]["verdict"] == "failed"

    # the held-out cap: 4 confirmation + 2 reeval evaluations used of 7
    before = len(load_run(root).records)
    assert main(["reeval", str(root), "--arm", "treat", "--seeds", "0", "1"]) == 2
    err = capsys.readouterr().err
    assert "test_acc has been evaluated 6 time(s) in this run (confirm 4, reeval 2)" in err
    assert (
        "would make 8, over budget.max_heldout_evaluations = 7" in err
        and "at most 1 seed(s)" in err
    )
    assert "Traceback" not in err
    assert len(load_run(root).records) == before and len(reevals(root)) == 2


def test_new_seeds_are_compared_with_the_logged_baseline_by_the_contracts_test():
    from planner._contract.model import Contract
    from planner._reeval.comparison import compare_new, estimate

    data = contract_data("m", seeds=(0, 1, 2))
    welch = Contract.model_validate(data)
    base = {0: 0.40, 1: 0.41, 2: 0.42}
    new = {7: 0.60, 8: 0.62, 9: 0.61}
    c = compare_new(welch, "treat", new, base)
    assert (
        c["test"] == "welch"
        and c["effect"] == pytest.approx(0.2)
        and c["ci_low"] > 0
        and c["note"] == ""
    )
    assert (
        compare_new(welch, "base", new, base) is None
    )  # the baseline against itself is not a comparison
    assert compare_new(welch, "treat", {7: 0.6}, base) is None  # one value: mean only
    paired = Contract.model_validate({**data, "acceptance": {"min_effect": 0.05, "test": "paired"}})
    c = compare_new(paired, "treat", new, base)
    assert c["test"] == "welch" and "paired test needs seeds the baseline ran" in c["note"]
    c = compare_new(paired, "treat", {0: 0.60, 1: 0.62, 2: 0.61}, base)
    assert c["test"] == "paired" and c["note"] == ""
    assert estimate([]) == {"n": 0, "mean": None, "sd": None}
    assert estimate([1.0]) == {"n": 1, "mean": 1.0, "sd": None}
    assert estimate([1.0, 3.0]) == {"n": 2, "mean": 2.0, "sd": pytest.approx(2**0.5)}


def test_a_reeval_holding_the_lock_is_named_as_such(tmp_path):
    from planner import RunLockedError
    from planner._store.writer import RunStore

    root = synthetic_run(tmp_path)
    holder = RunStore.open(root)
    holder.lock("plan reeval")
    try:
        with pytest.raises(RunLockedError, match="is in use by `plan reeval` \\(pid"):
            RunStore.open(root).lock()
    finally:
        holder.unlock()
    assert not (root / "lock").exists()


def test_status_names_a_reeval_that_holds_the_lock_without_calling_it_stale(tmp_path):
    from planner._results.run_status import format_status, read_status
    from planner._store.writer import RunStore

    root = synthetic_run(tmp_path)
    RunStore.open(root).write_state("completed", reason="all planned trials ended")
    holder = RunStore.open(root)
    holder.lock("plan reeval")
    try:
        line = next(
            x for x in format_status(read_status(root)).splitlines() if x.startswith("locked by")
        )
    finally:
        holder.unlock()
    assert line.startswith("locked by `plan reeval`, pid ") and "stale" not in line


def test_under_the_lock_the_ledger_is_counted_again_and_the_reeval_renumbered(tmp_path):
    from planner._reeval.rerun import _recheck_under_lock
    from planner._store.writer import RunStore

    root = synthetic_run(tmp_path, cap=5)
    plan = prepare(root, "treat", seeds=[5, 6])
    assert plan.reeval_number == 1 and plan.ledger["evaluations"] == 0
    store = RunStore.open(root)  # meanwhile, another reeval of 4 seeds ended
    store.append("reevals.jsonl", {"reeval": 1, "arm": "treat"})
    for seed in range(4):
        store.record_trial(
            {
                "trial_id": f"reeval-treat-s{seed}-1",
                "phase": "reeval",
                "arm": "treat",
                "seed": seed,
                "status": "completed",
                "reports": [{"step": 3, "metrics": {"test_acc": 0.5}}],
            }
        )
    store.close()
    with pytest.raises(
        UsageError,
        match="evaluated 4 time\\(s\\).*would make 6, over budget.max_heldout_evaluations = 5",
    ):
        _recheck_under_lock(plan)
    plan.seeds = [5]
    _recheck_under_lock(plan)
    assert plan.reeval_number == 2 and plan.trial_id(5) == "reeval-treat-s5-2"


@pytest.mark.ray
def test_a_command_trainable_reproduces_its_selected_config(tmp_path, ray_local, capsys):
    contract = hydra_app(tmp_path, seeds=[0, 1], exposure=3, trials_per_arm=1)
    from planner import run

    result = run(contract, runs_dir=tmp_path / "runs", quiet=True)
    assert result.state == "completed"
    root = result.run_dir
    selected = json.loads((root / "selection.json").read_text())["arms"]["momentum"]["params"][
        "optimizer.lr"
    ]

    assert main(["reeval", str(root), "--arm", "momentum"]) == 0
    out = lines_of(capsys.readouterr().out)
    assert "identity: code, python, packages and data match the log" in out
    assert "verdict: reproduced: 2 of 2 logged seeds exactly" in out
    new = [r for r in load_run(root).records if r["phase"] == "reeval"]
    assert len(new) == 2 and all(r["config"]["optimizer"]["lr"] == selected for r in new)
    assert all(any((root / "trials" / r["trial_id"]).rglob("stdout.log")) for r in new)
    # the command names train.py: an edit to it is an identity difference, not a silent "code
    # matches"
    script = Path(json.loads((root / "identity.json").read_text())["code"]["trainable_file"])
    assert script.name == "train.py"
    script.write_text(script.read_text() + "\n# edited after the run\n")
    edited = prepare(root, "momentum")
    assert "code.trainable_source_sha256" in {d.what for d in edited.differences}
