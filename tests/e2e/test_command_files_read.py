"""Every file a command trial's Python read is its identity: the bootstrap on the trial's PYTHONPATH
records a config file named as an argument and exec'd, a local module, data by size and time, also
for a script started through a wrapper shell script; files the trial wrote are outputs, not inputs,
and an installed package's files (a virtualenv inside the project) are not either."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from planner._trial.command import run_command
from tests.trial_double import TrialDouble


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "config").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "config" / "small.py").write_text("width = 8\n")
    (folder / "helper.py").write_text("SCALE = 2\n")
    (folder / "data" / "train.bin").write_bytes(b"\0" * 4096)
    installed = folder / ".venv" / "lib" / "site-packages"  # a virtualenv inside the project
    installed.mkdir(parents=True)
    (installed / "vendored_dep.py").write_text("X = 1\n")
    (folder / "train.py").write_text(
        textwrap.dedent(
            """
            import json, os, sys
            import helper
            sys.path.insert(0, ".venv/lib/site-packages")
            import vendored_dep  # an installed package's module: identity.json's packages
            for arg in sys.argv[1:]:
                if "=" not in arg:
                    exec(open(arg).read())
            with open("data/train.bin", "rb") as f:
                f.read(16)
            os.makedirs("out", exist_ok=True)
            with open("out/ckpt.txt", "w") as f:
                f.write("x")
            with open("out/ckpt.txt") as f:
                f.read()
            import planner
            planner.report(1, val_acc=width * helper.SCALE / 100)
            """
        )
    )
    (folder / "run.sh").write_text(f'#!/bin/sh\nexec {sys.executable} train.py "$@"\n')
    (folder / "run.sh").chmod(0o755)
    return folder


def test_a_trial_records_what_it_read_through_a_wrapper_script(tmp_path):
    folder = project(tmp_path)
    trial = TrialDouble(dir=str(tmp_path / "runs" / "r1" / "trials" / "t1"), budget=1)
    run_command(
        ["./run.sh", "config/small.py"],
        ["--seed=3"],
        trial,
        cwd=folder,
        hydra_run_dir=False,
        files_roots=[str(folder)],
    )
    files = trial.inputs["files"]  # the virtualenv's module is not among them
    assert set(files) == {"train.py", "helper.py", "config/small.py", "data/train.bin"}
    assert len(files["config/small.py"]["sha256"]) == 64
    assert files["data/train.bin"]["size"] == 4096 and "sha256" not in files["data/train.bin"]
    assert trial.inputs["argv"] == ["--seed=3"]  # what the planner added to the command line


def test_nothing_is_recorded_without_roots_and_the_script_runs_the_same(tmp_path):
    folder = project(tmp_path)
    trial = TrialDouble(dir=str(tmp_path / "t"), budget=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_command(
        [sys.executable, "train.py", "config/small.py"],
        [],
        trial,
        cwd=folder,
        env=env,
        hydra_run_dir=False,
    )
    assert trial.inputs["files"] == {} and trial.reports == [(1, {"val_acc": 0.16})]
