"""Credentials in a contract and in its Hydra config files (docs/reliability.md, "Hostile and
careless run folders"): each is refused (P230) without being printed, a resolver in a Hydra file's
hydra: node is refused (P205), and an ordinary value whose name holds a credential's word is valid
and recorded exactly as the trainable receives it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from planner._core.redact import REDACTED, Redactor
from tests._contract_helpers import FIXTURES, write_contract
from tests._run_folders import cli


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
