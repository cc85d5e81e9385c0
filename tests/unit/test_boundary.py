"""The run folder is a boundary (docs/reliability.md, "Hostile and careless run folders").

Each test plants one case a hostile or careless user could leave in a run folder, a contract or the
environment, and checks what planner does: nothing read or written outside the folder, no secret
stored or printed, no resolver called, a sentence and an exit code instead of a traceback. The
run-level cases (a real run, Ray, subprocesses) are in tests/e2e/test_boundary_e2e.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from planner import RunError
from planner._cli.main import main
from planner._core.redact import Redactor, looks_secret
from planner._store import read as rf
from planner._store.files import write_atomic
from planner._store.jsonl import AppendFile, heal
from planner._store.lock import acquire
from tests._contract_helpers import FIXTURES, write_contract
from tests._run_folders import OUTSIDE, cli, outside

# ----------------------------------------------------------------------------- links and special
# files


def test_symlinked_lock_is_refused_and_its_target_kept(run):
    """The lock code followed the link, called it stale, wrote its JSON into the target and deleted
    the link."""
    (run / "lock").symlink_to(outside(run))
    with pytest.raises(RunError, match="lock is a symbolic link"):
        acquire(run, command="plan reeval")
    assert outside(run).read_text() == OUTSIDE and (run / "lock").is_symlink()


def test_a_lock_is_released_only_if_it_is_still_ours(run):
    held = acquire(run)
    os.replace(run / "lock", run / "lock.moved")
    (run / "lock").symlink_to(outside(run))  # someone swapped a link in while we held it
    held.release()
    assert (run / "lock").is_symlink() and outside(run).read_text() == OUTSIDE


@pytest.mark.parametrize("command", ["status", "report", "export"])
def test_symlinked_trials_jsonl_is_refused_by_every_reader(run, command, capsys):
    (run / "trials.jsonl").unlink()
    (run / "trials.jsonl").symlink_to(outside(run))
    code, out, err = cli([command, str(run)], capsys)
    assert code == 3 and "trials.jsonl is a symbolic link" in err and "precious" not in out + err


def test_symlinked_trials_jsonl_is_never_healed_or_appended(run):
    """resume's torn-line healing truncated the link's target, and appends went to it."""
    target = outside(run)
    target.write_text(OUTSIDE + "half a line")
    (run / "trials.jsonl").unlink()
    (run / "trials.jsonl").symlink_to(target)
    with pytest.raises(RunError, match="symbolic link"):
        heal(run / "trials.jsonl")
    with pytest.raises(RunError, match="symbolic link"):
        AppendFile(run / "trials.jsonl")
    assert target.read_text() == OUTSIDE + "half a line"


@pytest.mark.parametrize("planted", ["file", "folder"])
@pytest.mark.parametrize("command", ["status", "report"])
def test_symlinked_configs_are_refused(run, planted, command, capsys):
    arm = sorted((run / "configs").glob("*.yaml"))[0]
    if planted == "file":
        arm.unlink()
        arm.symlink_to(outside(run))
    else:
        elsewhere = run.parents[2] / "elsewhere"
        shutil.move(run / "configs", elsewhere)
        (run / "configs").symlink_to(elsewhere)
    code, out, err = cli([command, str(run)], capsys)
    if command == "status":  # status does not read configs at all: nothing of the target is shown
        assert code == 0 and "precious" not in out + err
        return
    assert code == 3 and "symbolic link" in err and "precious" not in out + err


@pytest.mark.parametrize("command", ["status", "report", "export"])
def test_a_fifo_as_trials_jsonl_is_refused_without_waiting(run, command, capsys):
    (run / "trials.jsonl").unlink()
    os.mkfifo(run / "trials.jsonl")
    code, _, err = cli([command, str(run)], capsys)
    assert code == 3 and "trials.jsonl is a FIFO" in err


@pytest.mark.parametrize("name", ["trials.jsonl", "state.json", "lock"])
def test_dev_zero_linked_in_is_refused_without_reading(run, name, capsys):
    """A link to /dev/zero grew memory until MemoryError (exit 70)."""
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to("/dev/zero")
    code, _, err = cli(["status", str(run)], capsys)
    assert code == 3 and f"{name} is a symbolic link" in err


def test_a_huge_line_is_refused_not_read_into_memory(run, monkeypatch, capsys):
    import planner._store.read as read_module

    monkeypatch.setattr(read_module, "LINE_CAP", 1024)
    with open(run / "trials.jsonl", "ab") as f:
        f.write(b'{"trial_id": "' + b"x" * 4096 + b'"}\n')
    code, _, err = cli(["status", str(run)], capsys)
    assert code == 3 and "longer than" in err


def test_a_json_file_past_its_cap_is_refused(run):
    from planner._store.files import read_inside

    (run / "state.json").write_bytes(b" " * 2048 + b"{}")
    with pytest.raises(RunError, match="past the"):
        read_inside(run, run / "state.json", cap=1024)


# ----------------------------------------------------------------------------- wrongly typed files

WRONG = [
    ("state.json", {"state": 5, "budget": "x"}, "state"),
    ("plan.json", {"phases": 7}, "phases"),
    ("decisions.json", {"decisions": "nope"}, "decisions"),
    (
        "trials.jsonl",
        {"trial_id": "t", "status": "completed", "reports": [{"step": "a", "metrics": [1]}]},
        "reports[0].step",
    ),
    ("trials.jsonl", {"trial_id": "t", "status": ["x"]}, "status"),
    ("trials.jsonl", {"trial_id": "t", "status": "failed", "violations": 7}, "violations"),
    ("trials.jsonl", {"trial_id": "t", "status": "completed", "exposure": 10**400}, "exposure"),
    ("trials.jsonl", {}, "trial_id"),
    ("lock", {"pid": 2**62, "host": "h"}, "pid"),
    ("events.jsonl", {"event": 3}, "event"),
    ("trials.jsonl", {"trial_id": "t", "status": "completed", "splits": "x"}, "splits"),
    (
        "trials.jsonl",
        {"trial_id": "t", "status": "completed", "splits": {"train": 5}},
        "splits.train",
    ),
    (
        "trials.jsonl",
        {"trial_id": "t", "status": "completed", "splits": {"train": {"presentations": "x"}}},
        "splits.train.presentations",
    ),
    ("trials.jsonl", {"trial_id": "t", "status": "completed", "params": [1, 2]}, "params"),
    (
        "trials.jsonl",
        {"trial_id": "t", "status": "failed", "errors": [{"type": 1, "message": 2}]},
        "errors[0].type",
    ),
    ("identity.json", {"code": "x"}, "code"),
    ("lineage.json", {"line": "l", "baseline": "x", "repetition": 3}, "baseline"),
]
AUDITED = ("trials.jsonl", "identity.json", "state.json")  # what `plan audit` reads of these
UNREAD = {
    ("identity.json", "status"),
    ("lineage.json", "status"),
}  # (file, command): the command never reads it


def _plant(run: Path, name: str, value: dict) -> None:
    text = (
        json.dumps(value)
        if "exposure" not in value
        else json.dumps(value).replace(json.dumps(value["exposure"]), str(10**400))
    )
    if name.endswith(".jsonl"):
        with open(run / name, "a") as f:
            f.write(text + "\n")
    else:
        (run / name).write_text(text)


@pytest.mark.parametrize(("name", "value", "field"), WRONG, ids=[f"{n}:{f}" for n, _, f in WRONG])
def test_a_wrongly_typed_file_gets_one_sentence_exit_3_in_every_reader(
    run, name, value, field, capsys, tmp_path
):
    """status, report (md, json, html), export, audit and load_run give the same verdict: the file
    and the field."""
    _plant(run, name, value)
    if (
        name == "events.jsonl"
    ):  # read by resume, reeval and a sequential report: the reader itself refuses
        with pytest.raises(RunError, match=re.escape(f"`{field}`")):
            rf.open_run(run).events()
        return
    verdicts = set()
    for args in (
        ["status", str(run)],
        ["report", str(run)],
        ["report", str(run), "--format", "json"],
        ["report", str(run), "--format", "html"],
        ["export", str(run), "-o", str(tmp_path / "x")],
        ["audit", str(run)],
        ["audit", str(run), "--json"],
    ):
        if (
            (name == "lock" and args[0] == "export")
            or (args[0] == "audit" and name not in AUDITED)
            or (name, args[0]) in UNREAD
        ):
            continue
        code, _, err = cli(args, capsys)
        assert code == 3, (args, err)
        assert name in err and f"`{field}`" in err, err
        verdicts.add(err.split(": ", 1)[1])
    assert len(verdicts) == 1
    if name != "lock":
        from planner import load_run

        with pytest.raises(RunError, match=re.escape(f"`{field}`")):
            load_run(run)


def test_mlflow_reads_through_the_same_reader(run):
    from planner._results.mlflow import read_run_folder

    _plant(run, "trials.jsonl", {"trial_id": "t", "status": ["x"]})
    with pytest.raises(RunError, match="field `status`"):
        read_run_folder(run)


# ----------------------------------------------------------------------------- one JSON-lines
# policy


def test_one_json_lines_policy_for_every_reader(run):
    """A torn last line is skipped with a note; a torn line followed by a whole record keeps the
    record."""
    from planner._results.mlflow import read_run_folder
    from planner._store.writer import read_jsonl

    whole = rf.read_jsonl(run / "trials.jsonl").records
    with open(run / "trials.jsonl", "a") as f:
        f.write('{"trial_id": "half", "pha' + json.dumps({**whole[0], "trial_id": "glued"}) + "\n")
        f.write('{"trial_id": "torn", "sta')
    read = rf.read_jsonl(run / "trials.jsonl")
    ids = [r["trial_id"] for r in read.records]
    assert ids[-1] == "glued" and "half" not in ids and "torn" not in ids and len(read.notes) == 2
    assert [r["trial_id"] for r in read_jsonl(run / "trials.jsonl")] == ids
    assert read_run_folder(run).lines_skipped == 2
    assert {t["trial_id"] for t in read_run_folder(run).trials} == set(ids)


# ----------------------------------------------------------------------------- secrets

SECRET_VALUES = ["sk-live-PLANTED1", "hunter2-PLANTED2", "PASSW0RD-PLANTED3", "hf_PLANTED4token"]


def test_the_one_secret_name_rule():
    for name in (
        "API_TOKEN",
        "db_password",
        "apiKey",
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
        "wandb_token",
        "dbpassword",
        "client-secret",
        "X_AUTH",
        "my.credentials",
    ):
        assert looks_secret(name), name
    for name in (
        "max_tokens",
        "seed_key",
        "keyboard",
        "author",
        "PWD",
        "url",
        "db.url",
        "passes",
        "lr",
    ):
        assert not looks_secret(name), name


def test_url_userinfo_is_always_redacted():
    r = Redactor.for_run({"db": {"url": "postgres://svc:PASSW0RD-PLANTED3@host/x"}}, environ={})
    assert r.scrub({"db": {"url": "postgres://svc:PASSW0RD-PLANTED3@host/x"}}) == {
        "db": {"url": "postgres://<redacted>@host/x"}
    }
    assert "PLANTED3" not in r.text("could not connect: password PASSW0RD-PLANTED3 rejected")
    assert (
        Redactor().text("see https://user:tok@example.com/a")
        == "see https://<redacted>@example.com/a"
    )


def test_env_secrets_and_urls_in_env_are_cut():
    r = Redactor.for_run(
        environ={"HF_TOKEN": "hf_PLANTED4token", "DATABASE_URL": "mysql://me:hunter2-PLANTED2@db/x"}
    )
    assert "PLANTED" not in r.text("token hf_PLANTED4token and hunter2-PLANTED2")


@pytest.mark.parametrize("pieces", [2, 1000], ids=["two-pieces", "char-by-char"])
def test_a_secret_printed_in_pieces_is_cut(tmp_path, pieces):
    """Scrubbing worked per write, so a secret printed in two pieces (or a character at a time) got
    through."""
    from planner._trial.limits import CappedOutput

    secret = "sk-live-PLANTED1"
    out = CappedOutput(
        str(tmp_path / "output.log"), scrub=Redactor.for_run({"api_key": secret}, environ={}).text
    )
    line = f"the key is {secret}, ok\n"
    size = max(1, len(line) // pieces)
    for i in range(0, len(line), size):
        out.write(line[i : i + size])
    out.write("no newline at the end " + secret)
    out.close()
    text = (tmp_path / "output.log").read_text()
    assert "PLANTED1" not in text and text.count("<redacted>") == 2


def test_output_past_the_cap_is_counted_not_scrubbed(tmp_path):
    """A trial printing 20 MiB paid the scrubber for every line it then dropped (3 s past a trial's
    time limit once the scrubber knew more token shapes): past the cap, text is only counted."""
    from planner._trial.limits import CappedOutput

    scrubbed = []
    out = CappedOutput(
        str(tmp_path / "output.log"), cap=1000, scrub=lambda s: scrubbed.append(s) or s
    )
    for _ in range(50):
        out.write("x" * 99 + "\n")
    out.close()
    assert (
        sum(map(len, scrubbed)) == 1000
    )  # up to the cap: every character scrubbed before it is kept
    assert out.kept == 1000 and out.dropped == 4000
    text = (tmp_path / "output.log").read_text()
    assert text.startswith("x" * 99) and "4000 more characters" in text


def test_command_logs_are_scrubbed_across_reads(tmp_path):
    from planner._trial.processes import BoundedLog

    log = BoundedLog(
        tmp_path / "stdout.log",
        1 << 20,
        redactor=Redactor.for_run({"password": "hunter2-PLANTED2"}, environ={}),
    )
    for chunk in (
        b"pass: hunt",
        b"er2-PLAN",
        b"TED2\nnext ",
        "é hunter2-PLANTED2".encode()[:3],
        "é hunter2-PLANTED2".encode()[3:],
    ):
        log.write(chunk)
    log.close()
    assert "PLANTED2" not in (tmp_path / "stdout.log").read_text()


def test_validate_json_prints_no_secret(tmp_path, capsys):
    """`plan validate --json` printed an override `+db_password=...` raw."""
    text = (
        (FIXTURES / "inline.yaml")
        .read_text()
        .replace(
            "data: {batch_size: 32}",
            "data: {batch_size: 32}\n    db: {url: 'postgres://svc:PASSW0RD-PLANTED3@h/x', "
            "password: hunter2-PLANTED2}",
        )
        .replace(
            "overrides: [model.width=64]",
            "overrides: [model.width=64, +db_password=sk-live-PLANTED1]",
        )
    )
    path = write_contract(tmp_path, text)
    for args in (["validate", "--json", str(path)], ["validate", str(path)]):
        _, out, err = cli(args, capsys)
        assert "PLANTED" not in out + err


# ----------------------------------------------------------------------------- resolvers

SPELLINGS = {
    "oc.env": "'+v=${oc.env:HF_TOKEN}'",
    "built name, double quotes": "'+v=\"${${r}:HF_TOKEN}\"'",
    "built name, single quotes": "\"+v='${${r}:HF_TOKEN}'\"",
    "nested in an argument": "\"+v='${oc.select:x,${oc.env:HF_TOKEN}}'\"",
    "escaped": "'+v=\"\\\\${oc.env:HF_TOKEN}\"'",
    "a custom resolver": "'+v=${my_resolver:1}'",
    "decode": "'+v=${oc.decode:\"${r}\"}'",
}


@pytest.mark.parametrize("override", list(SPELLINGS.values()), ids=list(SPELLINGS))
def test_no_resolver_by_any_spelling_in_an_override(tmp_path, override, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_PLANTED4token")
    text = (
        (FIXTURES / "inline.yaml")
        .read_text()
        .replace("data: {batch_size: 32}", "data: {batch_size: 32}\n    r: oc.env")
    )
    text = text.replace("overrides: [model.width=64]", f"overrides: [model.width=64, {override}]")
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, text))], capsys)
    assert code == 1 and "PLANTED4" not in out + err
    assert any(d["code"] in ("P205", "P203") for d in json.loads(out)["diagnostics"])


@pytest.mark.parametrize(
    "value",
    [
        "${${r}:HF_TOKEN}",
        "${oc.env:HF_TOKEN}",
        "pre ${${r}:HF_TOKEN} post",
        "${oc.select:missing,${${r}:HF_TOKEN}}",
    ],
)
def test_no_resolver_in_inline_values(tmp_path, value, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_PLANTED4token")
    text = (
        (FIXTURES / "inline.yaml")
        .read_text()
        .replace(
            "data: {batch_size: 32}",
            f"data: {{batch_size: 32}}\n    r: oc.env\n    v: {json.dumps(value)}",
        )
    )
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, text))], capsys)
    assert code == 1 and "PLANTED4" not in out + err and "P205" in out


@pytest.mark.parametrize("where", ["value", "defaults"])
def test_no_resolver_in_hydra_config_files(tmp_path, where, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_PLANTED4token")
    conf = tmp_path / "conf"
    shutil.copytree(FIXTURES / "conf", conf)
    primary = next(p for p in conf.glob("*.yaml"))
    text = primary.read_text()
    if where == "value":
        text += "\nr: oc.env\nleak: ${${r}:HF_TOKEN}\n"
    else:
        text = text.replace("  - schedule: constant", "  - schedule: ${oc.env:HF_TOKEN}", 1)
        assert "oc.env" in text
    primary.write_text(text)
    contract = (FIXTURES / "hydra.yaml").read_text().replace("dir: conf", f"dir: {conf}")
    assert "name: train" in contract and primary.stem == "train"
    path = tmp_path / "contract.yaml"
    for module in FIXTURES.glob("fixture_*.py"):
        shutil.copy(module, tmp_path / module.name)
    path.write_text(contract)
    code, out, err = cli(["validate", "--json", str(path)], capsys)
    assert code == 1 and "PLANTED4" not in out + err and "P205" in out


# ----------------------------------------------------------------------------- numbers, imports,
# text

NON_FINITE = [
    ("min_effect: 0.01}", "min_effect: .inf}"),
    ("exposure: 5}", "exposure: 5, max_wall_time: .nan}"),
    ("exposure: 5}", "exposure: 5, max_trial_time: .inf}"),
    ("exposure: 5}", "exposure: .inf}"),
    ("exposure: 5}", "exposure: 5, resources: {cpu: .nan}}"),
    ("min_effect: 0.01}", "min_effect: 0.01, alpha: .nan}"),
]


@pytest.mark.parametrize(("old", "new"), NON_FINITE, ids=[n for _, n in NON_FINITE])
def test_non_finite_numbers_are_refused_with_p420(tmp_path, old, new, capsys):
    text = (FIXTURES / "inline.yaml").read_text().replace(old, new)
    code, out, _ = cli(["validate", "--json", str(write_contract(tmp_path, text))], capsys)
    assert code == 1 and [
        d["code"] for d in json.loads(out)["diagnostics"] if d["severity"] == "error"
    ] == ["P420"]


@pytest.mark.parametrize(
    "args",
    [
        ["power", str(FIXTURES / "inline.yaml"), "--sd", "inf"],
        ["reeval", "runs/x", "--arm", "a", "--tolerance", "nan"],
    ],
    ids=["sd", "tolerance"],
)
def test_non_finite_command_line_numbers_are_usage_errors(args, capsys):
    with pytest.raises(SystemExit) as ended:
        main(args)
    assert ended.value.code == 2 and "finite number" in capsys.readouterr().err


@pytest.mark.parametrize("call", ["os._exit(0)", "os.abort()", "__import__('posix')._exit(0)"])
def test_a_module_that_ends_the_process_at_import_fails_validation(tmp_path, call, capsys):
    (tmp_path / "exiter.py").write_text(f"import os\n{call}\ndef train(config, trial):\n    pass\n")
    text = (FIXTURES / "inline.yaml").read_text().replace("fixture_trainable:train", "exiter:train")
    code, out, _ = cli(["validate", "--json", str(write_contract(tmp_path, text))], capsys)
    assert code == 1
    (diag,) = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "error"]
    assert (
        diag["code"] == "P421"
        and ("os.abort()" if "abort" in call else "os._exit(0)") in diag["message"]
    )


def test_terminal_escapes_are_shown_not_obeyed(run, capsys):
    with open(run / "trials.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "trial_id": "evil",
                    "phase": "tune",
                    "arm": "sgd",
                    "status": "failed",
                    "errors": [{"type": "E", "message": "\x1b]0;pwned\x07\x1b[2J\rgone"}],
                }
            )
            + "\n"
        )
    code, out, _ = cli(["status", str(run)], capsys)
    assert code == 0 and "\x1b" not in out and "\r" not in out and "\\x1b]0;pwned" in out


ESC = "\x1b]0;PWNED\x07\x1b[2J"


def test_audit_shows_escapes_from_the_run_folder_not_obeys_them(run, capsys):
    """`plan audit` printed a record's arm, status, a params key, a violation and the state's
    reason raw."""
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({**state, "reason": ESC}))
    with open(run / "trials.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "trial_id": "evil",
                    "phase": "tune",
                    "arm": ESC,
                    "status": "failed" + ESC,
                    "params": {ESC: 1},
                    "violations": [{"kind": ESC, "message": ESC}],
                    "errors": [{"type": "E", "message": ESC}],
                }
            )
            + "\n"
        )
    code, out, err = cli(["audit", str(run)], capsys)
    assert code in (0, 1), err
    assert "\x1b" not in out + err and "\\x1b]0;PWNED" in out, out


def test_plan_log_shows_escapes_from_the_ledger_not_obeys_them(run, capsys):
    from planner._lineage.ledger import append

    runs = run.parents[1]
    append(
        runs,
        "run_started",
        run=f"demo/{run.name}",
        line="demo" + ESC,
        name="demo",
        hypothesis=ESC,
        baseline={"arm": "sgd"},
    )
    code, out, err = cli(["log", "--runs-dir", str(runs)], capsys)
    assert code == 0, err
    assert "\x1b" not in out + err and "\\x1b]0;PWNED" in out, out


def test_a_huge_finite_metric_is_drawn_in_the_html_report(run, tmp_path, capsys):
    """A metric of 1.7e308 (finite, so the schema lets it through) crashed the curves (`arange:
    cannot compute length`, exit 70)."""
    lines = (run / "trials.jsonl").read_text().splitlines()
    for i, line in enumerate(
        lines
    ):  # every report of every trial: the median and the spread are huge too
        r = json.loads(line)
        for report in r.get("reports") or []:
            report["metrics"] = {k: 1.7e308 for k in report.get("metrics") or {}}
        lines[i] = json.dumps(r)
    (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = cli(
        ["report", str(run), "--format", "html", "-o", str(tmp_path / "r.html")], capsys
    )
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert page.count('class="plotly-graph-div"') >= 3  # the curves, the forest, the cost


def test_markdown_escapes_names_from_the_run_folder(run, capsys):
    contract = (run / "contract.yaml").read_text()
    import yaml

    data = yaml.safe_load(contract)
    data["factor"]["name"] = "<img src=x onerror=alert(1)>"
    data["hypothesis"] = "[click](javascript:alert(1)) <script>x</script>"
    (run / "contract.yaml").write_text(yaml.safe_dump(data))
    code, out, _ = cli(["report", str(run)], capsys)
    assert (
        code == 0
        and "<img" not in out
        and "<script" not in out
        and not re.search(r"(?<!\\)\]\(javascript", out)
    )
    assert "**&lt;img src=x onerror=alert(1)&gt;**" in out


# ----------------------------------------------------------------------------- -o targets and
# atomic writes


def test_report_o_does_not_overwrite_a_file_that_is_not_a_report(run, tmp_path, capsys):
    contract = tmp_path / "contract.yaml"
    contract.write_text("name: mine\n")
    code, _, err = cli(["report", str(run), "-o", str(contract)], capsys)
    assert code == 2 and "--force" in err and contract.read_text() == "name: mine\n"
    for fmt in ("md", "json", "html"):  # a report is replaced by the next one
        report = tmp_path / f"report.{fmt}"
        assert cli(["report", str(run), "--format", fmt, "-o", str(report)], capsys)[0] == 0
        assert cli(["report", str(run), "--format", fmt, "-o", str(report)], capsys)[0] == 0
    assert cli(["report", str(run), "-o", str(contract), "--force"], capsys)[0] == 0
    assert contract.read_text().startswith("# Run report")


def test_report_o_onto_a_folder_leaves_nothing_behind(run, tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    code, _, err = cli(["report", str(run), "-o", str(folder)], capsys)
    assert code == 2 and "folder" in err and list(folder.iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_atomic_writer_leaves_nothing_behind_on_failure(tmp_path):
    (tmp_path / "target").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path / "target", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "victim")
    write_atomic(link, "new")  # the link is replaced, its target never written
    assert (
        not (tmp_path / "victim").exists() and not link.is_symlink() and link.read_text() == "new"
    )


def test_export_into_a_linked_export_folder_is_refused(run, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "export").symlink_to(elsewhere)
    code, _, err = cli(["export", str(run)], capsys)
    assert code == 3 and "symbolic link" in err and list(elsewhere.iterdir()) == []


def test_no_resolver_among_the_sampled_values(tmp_path, capsys):
    """A `choice` value reaches the config and a command's Hydra app unresolved: one calling a
    resolver is refused."""
    text = (FIXTURES / "inline.yaml").read_text() + (
        "tuning:\n  trials_per_arm: 2\n  seeds: [100]\n  space:\n"
        "    optimizer.name: {choice: [sgd, '${${r}:HF_TOKEN}']}\n"
    )
    code, out, _ = cli(["validate", "--json", str(write_contract(tmp_path, text))], capsys)
    assert code == 1 and "P205" in [d["code"] for d in json.loads(out)["diagnostics"]]


def test_a_linked_output_log_or_trial_folder_is_never_written_through(run, tmp_path):
    """A resumed trial writes its output.log in trials/<id>/: a link planted there (or as the
    folder) is refused."""
    from planner._store.writer import RunStore
    from planner._trial.limits import captured_output

    victim = outside(run)
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "output.log").symlink_to(victim)
    with captured_output(str(tmp_path / "trial" / "output.log")) as stream:
        print("this goes nowhere near the victim")
    assert (
        stream is not None and stream.path is None and victim.read_text() == OUTSIDE
    )  # counted, kept nowhere
    (run / "trials").mkdir(exist_ok=True)
    (run / "trials" / "t-linked").symlink_to(tmp_path / "trial")
    with pytest.raises(RunError, match="link or not a folder"):
        RunStore(run).trial_dir("t-linked")
