"""The run folder is a boundary, round 2 (issue 22; docs/reliability.md, "Hostile and careless run
folders").

Record exactly and refuse credentials; scrub every printed credential; never write through a link,
hard or symbolic; damaged folders get a sentence; files that lie are not believed. Each test plants
one case and failed before the change it guards. The run-level cases are in
tests/e2e/test_boundary_e2e.py.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
import yaml

from planner._core.errors import LinkedFileError, RunError
from planner._core.redact import REDACTED, Redactor
from planner._store.files import rewrite_tree
from planner._store.jsonl import AppendFile, heal
from planner._store.lock import acquire
from tests._contract_helpers import FIXTURES, write_contract
from tests._run_folders import OUTSIDE, cli, outside

# round 1's planted run folder: a fresh copy of a completed synthetic run, and a file outside it


def inline(tmp_path: Path, values: str = "", overrides: str = "", extra: str = "") -> Path:
    """The inline fixture contract with `values` added to config.values, `overrides` to
    config.overrides."""
    text = (FIXTURES / "inline.yaml").read_text()
    if values:
        text = text.replace("data: {batch_size: 32}", "data: {batch_size: 32}\n" + values)
    if overrides:
        text = text.replace(
            "    data: {batch_size: 32}\n",
            f"    data: {{batch_size: 32}}\n  overrides: [{overrides}]\n",
            1,
        )
    return write_contract(tmp_path, text + extra)


# ----------------------------------------------------------------------------- 1. record exactly,
# refuse credentials

ORDINARY = (
    "    model2: {token_dropout: 0.1, max_token_length: 512, pad_token_id: 0, skip_pass: 3}\n"
    "    tokenizer: {pad_token: '<pad>', bos_token: '<s>', eos_token: '</s>', unk_token: '[UNK]'}\n"
)


def test_ordinary_keys_with_credential_words_are_valid(tmp_path, capsys):
    """`token_dropout`, `max_token_length`, `pad_token_id`, `skip_pass` and a tokenizer's
    `pad_token: <pad>`."""
    code, out, err = cli(["validate", str(inline(tmp_path, ORDINARY))], capsys)
    assert code == 0, out + err


def test_what_a_trainable_receives_is_recorded_exactly(tmp_path):
    """model.token_dropout was logged as <redacted> in configs/, the frozen contract,
    selection.json and the records; a resume then gave every confirmation trial the string
    '<redacted>'."""
    from planner._contract.validate import load_contract
    from planner._core.version import VERSION
    from planner._store.writer import RunStore

    loaded = load_contract(
        inline(
            tmp_path,
            ORDINARY,
            extra="tuning:\n  trials_per_arm: 2\n  seeds: [1000]\n"
            "  space:\n    model2.token_dropout: {uniform: [0.0, 0.5]}\n",
        )
    )
    contract, configs = loaded.contract, loaded.configs
    store = RunStore.create(tmp_path / "runs", contract.name)
    store.redactor = Redactor.for_run(
        contract.frozen(), *configs.values()
    )  # as the driver builds it
    store.write_frozen(contract, str(loaded.path), configs, {"phases": []}, VERSION)
    params = {"model2.token_dropout": 0.25}
    store.write_selection({"arms": {"wide": {"trial_id": "t", "params": params}}})
    store.record_trial(
        {"trial_id": "t", "status": "completed", "config": configs["wide"], "params": params}
    )
    store.event("trial_started", trial_id="t", params=params)
    assert yaml.safe_load((store.root / "configs" / "wide.yaml").read_text()) == configs["wide"]
    frozen = yaml.safe_load((store.root / "contract.yaml").read_text())
    assert frozen["tuning"]["space"]["model2.token_dropout"]["uniform"] == [0.0, 0.5]
    assert (
        json.loads((store.root / "selection.json").read_text())["arms"]["wide"]["params"] == params
    )
    record = json.loads((store.root / "trials.jsonl").read_text())
    assert record["config"] == configs["wide"] and record["params"] == params
    assert REDACTED not in "".join(p.read_text() for p in store.root.rglob("*") if p.is_file())


CREDENTIALS = {
    "a password under its name": ("    db: {password: hunter2-PLANTED2}\n", ""),
    "nested api.key of an sk- shape": ("    api: {key: sk-live-PLANTED1xyz}\n", ""),
    "an arm-only override": ("", "'+model.db_password=PLANTED6pw'"),
    "a URL with userinfo": ("    db: {url: 'postgres://svc:PASSW0RD-PLANTED3@h/x'}\n", ""),
    "a GitHub token under an unknown name": ("    thing: ghp_PLANTED7abcdefghijklmnop\n", ""),
    "an AWS key id": ("    thing: AKIAPLANTED812345678\n", ""),
    "a JWT": ("    thing: eyJPLANTED9a.eyJzdWIiOiIx.c2lnbmF0dXJl\n", ""),
    "a Slack webhook": ("    hook: https://hooks.slack.com/services/T0/B0/PLANTED10\n", ""),
    "a Slack token": ("    thing: xoxb-PLANTED11-abcdef\n", ""),
    "a PEM private key": (
        '    thing: "-----BEGIN PRIVATE KEY-----\\nPLANTED12\\n-----END PRIVATE KEY-----"\n',
        "",
    ),
    "a Hugging Face token in a list": ("    things: [a, hf_PLANTED4tokenxyz]\n", ""),
    "a URL with JSON-escaped slashes": (
        "    db: {url: 'https:\\/\\/svc:PLANTED20pw@db.example.com\\/x'}\n",
        "",
    ),
    "a lowercased AWS key id": ("    thing: akiaplanted2abcdefgh\n", ""),
    "SQL IDENTIFIED BY": ("    init_sql: \"CREATE USER app IDENTIFIED BY 'PLANTED21pw'\"\n", ""),
    "Postgres PASSWORD": ("    init_sql: \"CREATE ROLE app LOGIN PASSWORD 'PLANTED22pw'\"\n", ""),
    "a netrc line": ("    netrc: machine api.example.com login bob password PLANTED23pw\n", ""),
}


@pytest.mark.parametrize(("values", "overrides"), list(CREDENTIALS.values()), ids=list(CREDENTIALS))
def test_a_credential_in_a_contract_is_refused_without_printing_it(
    tmp_path, values, overrides, capsys
):
    path = inline(tmp_path, values, overrides)
    code, out, err = cli(["validate", str(path)], capsys)
    assert code == 1 and "P230" in out and "PLANTED" not in out + err, out + err
    assert "environment" in out
    code, out, err = cli(["validate", "--json", str(path)], capsys)
    assert code == 1 and "PLANTED" not in out + err
    assert any(d["code"] == "P230" for d in json.loads(out)["diagnostics"])


def test_a_credential_in_an_arm_override_or_a_tuning_choice_is_refused(tmp_path, capsys):
    text = (
        (FIXTURES / "inline.yaml")
        .read_text()
        .replace(
            "overrides: [model.width=128]",
            "overrides: [model.width=128, '+auth_token=PLANTED13abc']",
        )
    )
    text += (
        "tuning:\n  trials_per_arm: 2\n  seeds: [1000]\n  space:\n"
        "    optimizer.name: {choice: [sgd, sk-proj-PLANTED14abcdef]}\n"
    )
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, text))], capsys)
    paths = {d["path"] for d in json.loads(out)["diagnostics"] if d["code"] == "P230"}
    assert code == 1 and "PLANTED" not in out + err
    assert "arms.0.overrides.1" in paths and "tuning.space.optimizer.name.choice.1" in paths, paths


def test_credential_flags_in_command_are_refused(tmp_path, capsys):
    """`command: python t.py --hf-token X --db-password Y` was kept in contract.yaml, identity.json
    and reports."""
    text = (
        (FIXTURES / "inline.yaml")
        .read_text()
        .replace(
            "trainable: fixture_trainable:train",
            "command: python t.py --hf-token PLANTED15x --db-password PLANTED16y",
        )
    )
    code, out, err = cli(["validate", str(write_contract(tmp_path, text))], capsys)
    assert code == 1 and "P230" in out and "PLANTED" not in out + err, out + err


@pytest.mark.parametrize(
    "planted",
    [
        "value",
        "hydra node credential",
        "hydra node resolver",
        "hydra node, now and oc.env",
        "hydra node, now alone",
    ],
)
def test_hydra_files_hold_no_credential_and_their_hydra_node_no_resolver(
    tmp_path, planted, capsys, monkeypatch
):
    """`${oc.env:HF_TOKEN}` in a Hydra file's hydra: node passed validation, and the token became a
    log file name."""
    monkeypatch.setenv("HF_TOKEN", "hf_PLANTED4tokenxyz")
    conf = tmp_path / "conf"
    shutil.copytree(FIXTURES / "conf", conf)
    primary = conf / "train.yaml"
    data = yaml.safe_load(primary.read_text())
    if planted == "value":
        data["wandb"] = {"api_key": "PLANTED17key"}
    elif planted == "hydra node credential":
        data["hydra"] = {"job": {"env_set": {"WANDB_API_KEY": "PLANTED18key"}}}
    elif planted == "hydra node resolver":
        data["hydra"] = {"job": {"name": "${oc.env:HF_TOKEN}"}}
    elif planted == "hydra node, now and oc.env":
        data["hydra"] = {"run": {"dir": "outputs/${now:%Y-%m-%d}/${oc.env:HF_TOKEN}"}}
    else:  # how Hydra apps are written: Hydra's own clock resolver is allowed in its own node
        data["hydra"] = {"run": {"dir": "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"}}
    primary.write_text(yaml.safe_dump(data, sort_keys=False))
    contract = (FIXTURES / "hydra.yaml").read_text().replace("dir: conf", f"dir: {conf}")
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, contract))], capsys)
    codes = {d["code"] for d in json.loads(out)["diagnostics"]}
    if planted == "hydra node, now alone":
        assert code == 0, out
        return
    assert code == 1 and "PLANTED" not in out + err, out
    assert ("P230" if "credential" in planted or planted == "value" else "P205") in codes, codes


@pytest.mark.parametrize(
    "planted", ["linked primary file", "linked group folder", "link loop and a FIFO"]
)
def test_linked_hydra_files_are_checked_as_hydra_reads_them(tmp_path, planted, capsys, monkeypatch):
    """conf/train.yaml a link to ../shared/train.yaml whose hydra: node reads $HF_TOKEN was not
    read by the check (links were skipped) but Hydra follows it: P205 was skipped and the token
    became a log file's name. A link loop ends, and a FIFO named like a YAML file does not stall
    validation."""
    monkeypatch.setenv("HF_TOKEN", "hf_PLANTED4tokenxyz")
    conf, shared = tmp_path / "conf", tmp_path / "shared"
    shutil.copytree(FIXTURES / "conf", conf)
    shared.mkdir()
    if planted == "linked primary file":
        data = yaml.safe_load((conf / "train.yaml").read_text())
        data["hydra"] = {"job": {"name": "${oc.env:HF_TOKEN}"}}
        (shared / "train.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        (conf / "train.yaml").unlink()
        (conf / "train.yaml").symlink_to("../shared/train.yaml")
    elif planted == "linked group folder":
        shutil.move(conf / "optimizer", shared / "optimizer")
        (shared / "optimizer" / "unused.yaml").write_text(
            "name: x\nwandb: {api_key: PLANTED19key}\n"
        )
        (conf / "optimizer").symlink_to(shared / "optimizer", target_is_directory=True)
    else:
        (conf / "schedule" / "loop").symlink_to("..", target_is_directory=True)
        os.mkfifo(conf / "schedule" / "pipe.yaml")
    contract = (FIXTURES / "hydra.yaml").read_text().replace("dir: conf", f"dir: {conf}")
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, contract))], capsys)
    diagnostics = json.loads(out)["diagnostics"]
    if planted == "link loop and a FIFO":
        assert code == 0, out
        return
    assert code == 1 and "PLANTED" not in out + err, out
    expected = (
        ("P205", "train.yaml: hydra.job.name")
        if planted == "linked primary file"
        else ("P230", "optimizer/unused.yaml: wandb.api_key")
    )
    assert any(
        d["code"] == expected[0] and d["message"].startswith(expected[1]) for d in diagnostics
    ), diagnostics


@pytest.mark.parametrize("planted", ["a link to a large tree", "a deep tree", "a link to /"])
def test_a_linked_folder_in_the_config_dir_is_walked_within_bounds(
    tmp_path, planted, capsys, monkeypatch
):
    """The walk of config.dir followed a linked folder in full (only its YAML files were counted):
    a link to /, or to a data tree, was walked to its end. Now it stops at a bound and says so
    (P907, a warning)."""
    from planner._contract import compose

    conf, big = tmp_path / "conf", tmp_path / "big"
    shutil.copytree(FIXTURES / "conf", conf)
    if planted == "a link to a large tree":
        monkeypatch.setattr(compose, "MAX_CONFIG_ENTRIES", 100)
        big.mkdir()
        for i in range(300):
            (big / f"shard-{i:03}.bin").write_bytes(b"")
        (conf / "data").symlink_to(big, target_is_directory=True)
        stopped = "100 names listed (in "
    elif planted == "a deep tree":
        deep = big
        for _ in range(compose.MAX_CONFIG_DEPTH + 8):
            deep = deep / "d"
        deep.mkdir(parents=True)
        (deep / "unused.yaml").write_text(
            "wandb: {api_key: PLANTED19key}\n"
        )  # past the bound: not read
        (conf / "data").symlink_to(big, target_is_directory=True)
        stopped = f"{compose.MAX_CONFIG_DEPTH} folders deep (in "
    else:
        monkeypatch.setattr(compose, "MAX_CONFIG_ENTRIES", 500)
        (conf / "root").symlink_to("/", target_is_directory=True)
        stopped = "500 names listed (in "
    files = compose.config_files(conf)
    assert files.cut is not None and files.cut.startswith(stopped), files.cut
    assert conf / "train.yaml" in files  # the config dir's own files come first
    contract = (FIXTURES / "hydra.yaml").read_text().replace("dir: conf", f"dir: {conf}")
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, contract))], capsys)
    p907 = [d for d in json.loads(out)["diagnostics"] if d["code"] == "P907"]
    assert len(p907) == 1 and p907[0]["severity"] == "warning", out
    assert p907[0]["message"].startswith(
        f"the walk of config.dir {str(conf)!r} stopped at {stopped}"
    )
    if planted != "a link to /":  # / may hold a YAML file of a credential's shape
        assert code == 0 and "PLANTED" not in out, out


@pytest.mark.parametrize(
    "planted",
    [
        "a FIFO as the primary config",
        "a FIFO as an arm's option",
        "a link to a device in a defaults list",
        "a dangling link as the primary",
    ],
)
def test_a_config_file_that_is_not_a_regular_file_is_named_as_such(tmp_path, planted, capsys):
    """Hydra passes over a config file that is not a regular file and says it is not found ("Cannot
    find primary config 'train'", "no such option ... available: sgd") while the file is there: a
    FIFO or a device."""
    conf = tmp_path / "conf"
    shutil.copytree(FIXTURES / "conf", conf)
    file, what, where = {
        "a FIFO as the primary config": ("train.yaml", "a FIFO (named pipe)", "config 'train'"),
        "a FIFO as an arm's option": (
            "optimizer/adam.yaml",
            "a FIFO (named pipe)",
            "arm 'adam': override 'optimizer=adam'",
        ),
        "a link to a device in a defaults list": (
            "schedule/constant.yaml",
            "a character device",
            "the defaults list of config 'train'",
        ),
        "a dangling link as the primary": ("train.yaml", "a link to nothing", "config 'train'"),
    }[planted]
    (conf / file).unlink()
    if "FIFO" in planted:
        os.mkfifo(conf / file)
    else:
        (conf / file).symlink_to("/dev/zero" if "device" in planted else tmp_path / "gone.yaml")
    contract = (FIXTURES / "hydra.yaml").read_text().replace("dir: conf", f"dir: {conf}")
    code, out, err = cli(["validate", "--json", str(write_contract(tmp_path, contract))], capsys)
    errors = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "error"]
    assert code == 1 and [d["code"] for d in errors] == ["P207"], out
    assert errors[0]["message"].startswith(f"{where}: {conf / file} is {what}"), errors[0][
        "message"
    ]


def test_the_driver_redactor_changes_no_recorded_value():
    """Redactor.for_run(frozen, *configs) as the driver builds it: `scrub` keeps config and params
    as they are."""
    config = {"model": {"token_dropout": 0.1, "pad_token": "<pad>"}, "note": "max_token_length=5"}
    redactor = Redactor.for_run(config, environ={"HF_TOKEN": "hf_PLANTED4tokenxyz"})
    record = {
        "config": config,
        "params": {"model.token_dropout": 0.2},
        "errors": [{"message": "login as token=hf_PLANTED4tokenxyz failed"}],
    }
    scrubbed = redactor.scrub(record)
    assert scrubbed["config"] == config and scrubbed["params"] == record["params"]
    assert "PLANTED" not in json.dumps(scrubbed["errors"])
    assert redactor.scrub(config) == config


# ----------------------------------------------------------------------------- 2. scrub what is
# printed

PRINTED = {
    "Authorization: Bearer <jwt>": "Authorization: Bearer "
    "eyJhbGciOiJIUzI1NiJ9.eyJQTEFOVEVEIjoxfQ.c2lnPLANTED",
    "Authorization: Basic <b64>": "Authorization: Basic dXNlcjpQTEFOVEVEcGFzcw==PLANTED",
    "Authorization: Token <x>": "authorization: Token PLANTEDabc123",
    "header in a dict repr": "{'Authorization': 'Digest PLANTED-abc'}",
    "--password V --token V": "run.py --password PLANTEDpw --token PLANTEDtok --api-key=PLANTEDkey",
    "--hf-token X --db-password Y": "python t.py --hf-token PLANTEDx --db-password PLANTEDy",
    "password=ab,CDEF": "password=ab,CDEF-PLANTED next",
    "name: value with punctuation": "db_password: 'ab;c}d PLANTED'",
    "a URL password holding @ and /": "postgres://svc:p@ss/w0rd-PLANTED@db.example/x",
    "ghp_ under an unknown name": "using ghp_PLANTEDabcdefghijklmnop now",
    "sk- under an unknown name": "key is sk-PLANTEDabcdefghijk",
    "hf_ under an unknown name": "hf_PLANTEDtokenabcdef",
    "AKIA under an unknown name": "id AKIAPLANTED123456789",
    "a Slack webhook": "posting to https://hooks.slack.com/services/T000/B000/PLANTEDxyz",
}


@pytest.mark.parametrize("text", list(PRINTED.values()), ids=list(PRINTED))
def test_free_text_loses_every_credential(text):
    assert "PLANTED" not in Redactor.for_run(environ={}).text(text)


def test_a_repr_escaped_environment_secret_is_cut():
    """A password with a quote or a backslash, printed through repr() or json.dumps, kept its
    escaped form."""
    secret = "it's\\PLANTED-pw"
    redactor = Redactor.for_run(environ={"DB_SECRET": secret})
    for shown in (repr({"x": secret}), json.dumps({"x": secret}), repr(secret)):
        assert "PLANTED" not in redactor.text(shown), shown


def test_ordinary_names_in_free_text_are_kept():
    text = (
        "max_tokens=5 pad_token_id: 0 model.token_dropout=0.1 skip_pass=3 pad_token: <pad> "
        "--token_dropout 0.2"
    )
    assert Redactor.for_run(environ={}).text(text) == text


# ----------------------------------------------------------------------------- 3. never write
# through a link


@pytest.mark.parametrize("name", ["trials.jsonl", "events.jsonl"])
def test_a_hardlinked_jsonl_file_is_refused_for_writing(run, name):
    """`cp -al` snapshots: --resume appended 6 records to a hard link's other name and cut its last
    line."""
    target = outside(run)
    target.write_text(OUTSIDE + "half a line")
    (run / name).unlink(missing_ok=True)
    os.link(target, run / name)
    with pytest.raises(LinkedFileError, match="hard links"):
        AppendFile(run / name)
    with pytest.raises(LinkedFileError, match="hard links"):
        heal(run / name)
    assert target.read_text() == OUTSIDE + "half a line"


def test_a_hardlinked_lock_is_refused(run):
    """A stale lock hardlinked to a file outside: taking it over wrote the lock's JSON into that
    file."""
    target = outside(run)
    target.write_text(json.dumps({"pid": 2**30, "host": os.uname().nodename, "started": "x"}))
    before = target.read_text()
    os.link(target, run / "lock")
    with pytest.raises(LinkedFileError):
        acquire(run)
    assert target.read_text() == before


def test_the_ledger_and_its_lock_are_opened_as_the_run_lock(tmp_path):
    """A link as runs/ledger.jsonl.lock created a file outside; a hardlinked ledger took the
    appends."""
    from planner._lineage.ledger import append

    runs = tmp_path / "runs"
    runs.mkdir()
    target = tmp_path / "elsewhere.txt"
    (runs / "ledger.jsonl.lock").symlink_to(target)
    with pytest.raises(RunError, match="symbolic link"):
        append(runs, "run_started", run="a/b")
    assert not target.exists()
    (runs / "ledger.jsonl.lock").unlink()
    target.write_text(OUTSIDE)
    os.link(target, runs / "ledger.jsonl")
    with pytest.raises(LinkedFileError):
        append(runs, "run_started", run="a/b")
    assert target.read_text() == OUTSIDE


def test_a_fifo_as_the_ledger_lock_is_refused_at_once(tmp_path):
    """A FIFO as the ledger lock hung `plan run` with no output."""
    from planner._lineage.ledger import append

    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkfifo(runs / "ledger.jsonl.lock")
    raised: list[BaseException] = []

    def attempt():
        try:
            append(runs, "run_started", run="a/b")
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            raised.append(error)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the hung open so the thread can end
        fd = os.open(runs / "ledger.jsonl.lock", os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
    assert (
        not worker.is_alive()
        and raised
        and isinstance(raised[0], RunError)
        and "FIFO" in str(raised[0])
    )


def _hydra_outputs(trial: Path) -> Path:
    hydra = trial / "attempt-1" / "hydra"
    (hydra / ".hydra").mkdir(parents=True)
    (hydra / ".hydra" / "config.yaml").write_text("password: hunter2-PLANTED\n")
    return hydra


def test_the_tree_rewrite_follows_no_link(tmp_path):
    """The scrub of a trial's Hydra folder rewrote an outside .pypirc and a docker config.json
    through a link."""
    trial = tmp_path / "trials" / "t1"
    hydra = _hydra_outputs(trial)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".pypirc").write_text("password = hunter2-PLANTED\n")
    (hydra / "linked_dir").symlink_to(elsewhere)
    (hydra / "linked_file.txt").symlink_to(elsewhere / ".pypirc")
    os.link(elsewhere / ".pypirc", hydra / "hardlinked.txt")
    redact = Redactor.for_run(environ={}).text
    assert rewrite_tree(trial, hydra, redact) == 2  # config.yaml and the hard link's own name
    assert "PLANTED" not in (hydra / ".hydra" / "config.yaml").read_text()
    assert "PLANTED" not in (hydra / "hardlinked.txt").read_text()
    assert (elsewhere / ".pypirc").read_text() == "password = hunter2-PLANTED\n"


def test_the_tree_rewrite_refuses_a_linked_folder(tmp_path):
    trial = tmp_path / "trials" / "t1"
    (trial / "attempt-1").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text('{"auths": {"ghcr.io": {"auth": "PLANTEDxyz"}}}')
    (trial / "attempt-1" / "hydra").symlink_to(elsewhere)
    with pytest.raises(RunError, match="link"):
        rewrite_tree(trial, trial / "attempt-1" / "hydra", Redactor.for_run(environ={}).text)
    assert "PLANTEDxyz" in (elsewhere / "config.json").read_text()


# ----------------------------------------------------------------------------- 6. damaged folders
# get a sentence

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


def test_names_are_drawn_as_written_and_escaped():
    """A metric named `val_$\\sqrt{acc$` ended the html report in matplotlib's mathtext parser
    (exit 70); an arm named `<b>&` must stay text in a plot, not markup."""
    from planner._results.plots import figure_html, forest_figure, label

    name, arm = "val_$\\sqrt{acc$", "<b>&a$b"
    rows = [{"arm": arm, "decision": "accept", "effect": 0.1, "ci_low": 0.05, "ci_high": 0.15}]
    fig = forest_figure(rows, 0.01, name)
    assert fig.data[0].y == ("&lt;b&gt;&amp;a$b",) and label(arm) == "&lt;b&gt;&amp;a$b"
    assert name in fig.layout.xaxis.title.text
    assert "<b>" not in figure_html(fig, "plot-forest")


# ----------------------------------------------------------------------------- 7. check what a
# file claims


def _forge(run: Path, decision: str, low: float, high: float) -> None:
    doc = json.loads((run / "decisions.json").read_text())
    doc["decisions"][0].update(decision=decision, effect=(low + high) / 2, ci_low=low, ci_high=high)
    (run / "decisions.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("decision", "low", "high"),
    [("accept", -0.02, 0.05), ("reject", 0.03, 0.09)],
    ids=["accept with 0 in the CI", "reject with the CI above min_effect"],
)
@pytest.mark.parametrize("command", ["status", "report"])
def test_a_decision_that_does_not_follow_from_its_numbers_is_flagged(
    run, decision, low, high, command, capsys
):
    _forge(run, decision, low, high)
    code, out, err = cli([command, str(run)], capsys)
    assert code == 0 and "does not follow" not in err
    assert f"says sgd {decision}" in out or "does not follow" in out or "give" in out, out
    assert "the file was edited or is damaged" in out, out


def test_a_consistent_decision_is_not_flagged(run, capsys):
    code, out, _ = cli(["status", str(run)], capsys)
    assert code == 0 and "edited or is damaged" not in out


def test_plan_log_marks_a_promotion_its_run_folder_does_not_back(run, capsys):
    """A ledger line promoting the never-tested baseline was shown by `plan log` as the baseline in
    force."""
    from planner._lineage.ledger import append

    runs = run.parents[1]
    key = f"demo/{run.name}"
    append(runs, "run_started", run=key, line="demo", name="demo", baseline={"arm": "sgd"})
    append(runs, "promoted", run=key, arm="sgd", line="demo", note="forged")
    code, out, err = cli(["log", "--runs-dir", str(runs)], capsys)
    assert code == 0, err
    assert "UNVERIFIED" in out and "no decision for arm sgd" in out, out


def test_audit_next_does_not_replace_an_existing_file(run, tmp_path, capsys):
    """`plan audit RUN --next contract.yaml` replaced the user's contract without a word."""
    mine = tmp_path / "contract.yaml"
    mine.write_text("my contract\n")
    code, _, err = cli(["audit", str(run), "--next", str(mine)], capsys)
    assert code == 2 and "--force" in err and mine.read_text() == "my contract\n"
    code, _, err = cli(["audit", str(run), "--next", str(mine), "--force"], capsys)
    assert code == 0, err


def test_plan_promote_refuses_an_accept_its_numbers_do_not_give(run, capsys):
    """A decisions.json forged to `accept` (its CI includes 0) was promoted into the ledger as it
    said."""
    doc = json.loads((run / "decisions.json").read_text())
    arm = doc["decisions"][0]["arm"]
    selection = json.loads(
        (run / "selection.json").read_text()
    )  # the synthetic run selects for its baseline only
    tuned = next(
        r
        for r in map(json.loads, (run / "trials.jsonl").read_text().splitlines())
        if r["phase"] == "tune" and r["arm"] == arm
    )
    selection["arms"][arm] = {"arm": arm, "trial_id": tuned["trial_id"], "params": tuned["params"]}
    (run / "selection.json").write_text(json.dumps(selection))
    _forge(run, "accept", -0.02, 0.05)
    code, out, err = cli(["promote", str(run), "--arm", arm], capsys)
    assert code == 1 and "P711" in err and "do not give accept" in err, out + err
    assert not (run.parents[1] / "ledger.jsonl").exists()


def test_a_baseline_from_a_run_whose_accept_does_not_follow_is_flagged(tmp_path, monkeypatch):
    """`baseline: {from_run: ...}` believed a decisions.json forged to `accept` (its CI includes
    0)."""
    from planner._lineage.resolve import validate
    from tests._lineage_runs import FIRST, REPO, codes, fake_run, second, write

    monkeypatch.chdir(REPO)  # the lineage trainable imports as tests.trainables.lineage
    runs = tmp_path / "runs"
    first = fake_run(
        write(tmp_path / "c", FIRST),
        runs,
        {"high": "accept"},
        params={"base": {"recipe.lr": 0.02}, "high": {"recipe.lr": 0.0125}},
    )
    assert "P930" not in codes(validate(write(tmp_path / "c2", second(first)), runs_dir=runs))
    doc = json.loads((first / "decisions.json").read_text())
    doc["decisions"][0]["ci_low"] = -0.1
    (first / "decisions.json").write_text(json.dumps(doc))
    result = validate(write(tmp_path / "c3", second(first)), runs_dir=runs)
    assert "P930" in codes(result) and any(
        "do not give accept" in d.message for d in result.diagnostics
    )


def test_a_command_attempts_scrub_writes_nothing_through_a_linked_hydra_folder(tmp_path):
    """Issue 22 case 1: trials/<id>/attempt-1/hydra replaced by a link to an outside folder; the
    scrub that --resume runs (a killed attempt's Hydra files) rewrote the outside .pypirc and
    docker config.json."""
    from planner._trial.command import scrub_files

    trial = tmp_path / "trials" / "t1"
    (trial / "attempt-1").mkdir(parents=True)
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / ".pypirc").write_text("[pypi]\npassword = hunter2-PLANTED\n")
    (outside / "config.json").write_text(
        '{"auths": {"ghcr.io": {"auth": "aHVudGVyMi1QTEFOVEVE"}}}\n'
    )
    (trial / "attempt-1" / "hydra").symlink_to(outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    with pytest.raises(RunError):
        scrub_files(trial / "attempt-1" / "hydra", Redactor.for_run(environ={}))
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


def test_the_credential_refusals_hint_survives_the_terminals_scrubber():
    """A new user saw the hint as "say `export HF_TOKEN=<redacted> read with ...": planner's own
    advice was scrubbed as if it held a credential, and its backtick never closed."""
    from planner._contract.credentials import HINT

    assert Redactor.for_run(environ={}).text(HINT) == HINT


@pytest.mark.parametrize("depth", [62, 63, 64, 65, 66])
@pytest.mark.parametrize("where", ["config", "errors", "top", "reports"])
def test_the_quick_bounds_check_gives_the_walks_verdict(depth, where):
    """`quick_ok` skips the walk only where `check_value` would pass: a value nested to the limit,
    in a trial record with a hundred reports (most of its brackets) or in a small record, at every
    depth around it."""
    from planner._store.bounds import check_value, quick_ok

    deep = json.loads("[" * depth + "[1]" + "]" * depth)
    reports = [{"step": i, "metrics": {"loss": 0.5}, "time_s": 1.0} for i in range(100)]
    record = {"trial_id": "t", "status": "completed", "reports": reports}
    value = {
        "top": deep,
        "config": {"trial_id": "t", "status": "completed", "config": {"x": deep}, "reports": []},
        "errors": {**record, "errors": [{"type": "E", "message": "m", "traceback": deep}]},
        "reports": {**record, "reports": [*reports, {"step": 1, "metrics": {"x": deep}}]},
    }[where]
    try:
        check_value(value, "here")
        walked = True
    except RunError:
        walked = False
    assert quick_ok(json.dumps(value).encode(), value) is walked
