"""The run identity: code of the trainable's repository, packages, data, allow-listed
environment."""

import subprocess
import sys
from pathlib import Path

from planner._reeval.differences import compare_identity
from planner._store.identity import (
    code_identity,
    command_code_identity,
    data_fingerprints,
    env_snapshot,
    packages,
    sha256_path,
)


def git(cwd, *args):
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    )


def test_code_identity_is_the_trainables_repository_not_the_cwd(tmp_path, monkeypatch):
    repo = tmp_path / "elsewhere"
    repo.mkdir()
    (repo / "mytrain_mod.py").write_text("def train(config, trial):\n    pass\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "x")
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("mytrain_mod", None)
    info = code_identity("mytrain_mod:train", [str(repo)])
    assert Path(info["repo"]) == repo.resolve()
    assert len(info["commit"]) == 40 and info["dirty"] is False
    clean_diff = info["diff_sha256"]
    (repo / "mytrain_mod.py").write_text("def train(config, trial):\n    return 1\n")
    dirty = code_identity("mytrain_mod:train", [str(repo)])
    assert dirty["dirty"] is True and dirty["diff_sha256"] != clean_diff
    assert dirty["trainable_source_sha256"] != info["trainable_source_sha256"]


def test_a_script_git_does_not_track_makes_its_repository_dirty(tmp_path):
    """A new script beside a clean commit: `git status --untracked-files=no` is empty, so the run
    said `dirty: false` for code that no commit holds."""
    app = _committed(tmp_path / "app", {"README": "x\n"})
    (app / "train.py").write_text("print(1)\n")
    assert command_code_identity("python train.py", app)["dirty"] is True
    _committed(app, {"train.py": "print(1)\n"})
    assert command_code_identity("python train.py", app)["dirty"] is False


def _committed(app, files: dict[str, str]):
    """`app` a git repository (made if new) with `files` written and committed; `app`."""
    if not (app / ".git").exists():
        app.mkdir(exist_ok=True)
        git(app, "init", "-q")
    for name, text in files.items():
        (app / name).write_text(text)
    git(app, "add", *files)
    git(app, "commit", "-qm", "x")
    return app


def test_an_untracked_local_module_makes_the_repository_dirty_and_is_named_once(tmp_path):
    """train.py tracked, the helper.py it imports not: the run said dirty: false. Reached through a
    link to the project, the helper keeps its own name (a resume through another path is not a
    changed module)."""
    from planner._contract.model import Contract
    from planner._store.identity import run_identity

    app = _committed(tmp_path / "app", {"train.py": "from helper import GAIN\nprint(GAIN)\n"})
    (app / "helper.py").write_text("GAIN = 1\n")
    contract = Contract.model_validate(
        {
            "version": 1,
            "name": "lit",
            "hypothesis": "h",
            "command": "python train.py",
            "config": {"values": {"x": 1}},
            "factor": {"name": "x", "keys": ["x"]},
            "baseline": {"name": "a", "overrides": ["x=1"]},
            "arms": [{"name": "b", "overrides": ["x=2"]}],
            "metric": {"name": "acc", "mode": "max"},
            "acceptance": {"min_effect": 0.01},
            "seeds": [0, 1],
            "budget": {"exposure": 2},
        }
    )
    code = run_identity(contract, app, [])["code"]
    assert code["dirty"] is True and list(code["local_sources"]) == ["helper.py"]
    _committed(app, {"helper.py": "GAIN = 1\n"})
    assert run_identity(contract, app, [])["code"]["dirty"] is False
    (tmp_path / "link").symlink_to(app)
    assert list(run_identity(contract, tmp_path / "link", [])["code"]["local_sources"]) == [
        "helper.py"
    ]


def test_a_trainable_outside_git_still_gets_its_source_hash(tmp_path):
    (tmp_path / "loose_mod.py").write_text("def train(c, t):\n    pass\n")
    info = code_identity("loose_mod:train", [str(tmp_path)])
    assert info["repo"] is None and len(info["trainable_source_sha256"]) == 64


def test_a_command_trainable_records_the_script_it_names_so_a_reeval_sees_an_edit(tmp_path):
    """`python train.py` -> train.py's sha256 and its repository's commit, compared like a
    module's."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "train.py").write_text("print(1)\n")
    git(app, "init", "-q")
    git(app, "add", ".")
    git(app, "commit", "-qm", "x")
    logged = command_code_identity("python train.py --lr 0.1", app)
    assert logged["trainable"] == "command: python train.py --lr 0.1"
    assert Path(logged["trainable_file"]) == (app / "train.py").resolve()
    assert len(logged["trainable_source_sha256"]) == 64 and len(logged["commit"]) == 40
    assert logged["dirty"] is False
    (app / "train.py").write_text("print(2)\n")
    today = command_code_identity("python train.py --lr 0.1", app)
    changed = {d.what for d in compare_identity({"code": logged}, {"code": today})}
    assert {"code.trainable_source_sha256", "code.dirty", "code.diff_sha256"} <= changed
    none = command_code_identity("echo hello", app)
    assert none["trainable_file"] is None and none["trainable_source_sha256"] is None


def test_environment_is_allow_listed_and_credentials_redacted():
    env = {
        "OMP_NUM_THREADS": "2",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "HOME": "/root",
        "RAY_ADDRESS": "ray://user:pw@head:10001",
        "WANDB_API_KEY": "k",
    }
    snap = env_snapshot(env)
    assert snap == {"OMP_NUM_THREADS": "2", "RAY_ADDRESS": "ray://<redacted>@head:10001"}


def test_packages_name_versions_of_what_matters():
    found = packages()
    for name in ("planner", "ray", "optuna", "pydantic", "numpy"):
        assert name in found


def test_data_fingerprints_hash_files_and_folders(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("a")
    (tmp_path / "f.bin").write_bytes(b"xyz")
    prints = data_fingerprints(["d", "f.bin", "missing"], tmp_path)
    assert prints["missing"] is None and len(prints["d"]) == 64
    before = sha256_path(tmp_path / "d")
    (tmp_path / "d" / "a.txt").write_text("b")
    assert sha256_path(tmp_path / "d") != before
