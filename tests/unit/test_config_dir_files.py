"""The files of a contract's config.dir read as Hydra reads them: through links (their credentials
and resolvers checked), within bounds (a linked folder to a large or deep tree, or to /, stops the
walk with a warning), and a config file that is not a regular file named as such."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from tests._contract_helpers import FIXTURES, write_contract
from tests._run_folders import cli


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
