"""What a trial read, noted in-process (planner._trial.reads, the rules a function trainable's
worker and a command's bootstrap share): files read below the roots while a trial records, outputs
and the run folder left out, nothing noted before or after; the trainable's local modules listed
even when they were imported before the trial started."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from pathlib import Path

from planner._store.identity import read_facts, trainable_sources
from planner._trial.reads import Recorder, recording


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "runs" / "r1" / "trials" / "t1").mkdir(parents=True)
    (root / "conf.yaml").write_text("lr: 0.1\n")
    (root / "configurator.py").write_text("beta2 = 0.99\n")
    (root / "data.bin").write_bytes(b"\0" * 64)
    (root / "lib" / "site-packages").mkdir(parents=True)
    (root / "lib" / "site-packages" / "dep.py").write_text("X = 1\n")
    (tmp_path / "elsewhere.yaml").write_text("a: 1\n")
    return root


def test_the_files_read_while_recording_are_named_and_nothing_else(tmp_path):
    root = project(tmp_path)
    (tmp_path / "before.yaml").write_text("b: 1\n")
    recorder = Recorder([str(root)], [str(root / "runs" / "r1")])
    (root / "conf.yaml").read_text()  # before the trial: not its read
    with recording(recorder):
        (root / "conf.yaml").read_text()
        exec(compile((root / "configurator.py").read_text(), str(root / "configurator.py"), "exec"))
        with open(root / "data.bin", "rb") as handle:
            handle.read(8)
        (root / "out.txt").write_text("written")  # an output
        (root / "out.txt").read_text()  # read back: still an output
        (root / "runs" / "r1" / "trials" / "t1" / "log.txt").write_text("x")  # the run folder
        (root / "lib" / "site-packages" / "dep.py").read_text()  # an installed package's
        (tmp_path / "elsewhere.yaml").read_text()  # outside the roots
        worker = threading.Thread(target=(root / "configurator.py").read_bytes)
        worker.start()  # a thread the trainable started reads for it
        worker.join()
    (root / "data.bin").read_bytes()
    read, written = recorder.read()
    facts = read_facts(read, written, root)
    assert sorted(facts) == ["conf.yaml", "configurator.py", "data.bin"]
    assert set(facts["conf.yaml"]) == {"sha256"} and set(facts["data.bin"]) == {"size", "mtime_ns"}
    assert str(root / "out.txt") in written


def test_after_a_trial_its_recorder_notes_nothing_more(tmp_path):
    root = project(tmp_path)
    first, second = Recorder([str(root)]), Recorder([str(root)])
    with recording(first):
        (root / "conf.yaml").read_text()
    with recording(second):  # the hook is installed once; only the current recorder notes
        (root / "data.bin").read_bytes()
    (root / "configurator.py").read_text()
    assert first.read()[0] == {str(root / "conf.yaml")}
    assert second.read()[0] == {str(root / "data.bin")}


def test_an_import_is_noted_and_a_module_loaded_earlier_is_still_listed(tmp_path, monkeypatch):
    root = project(tmp_path)
    package = root / "trainpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("WIDTH = 4\n")
    (package / "train.py").write_text(
        "from trainpkg import model\n\ndef train(config, trial):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(root))
    for name in ("trainpkg", "trainpkg.model", "trainpkg.train"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    recorder = Recorder([str(root)])
    with recording(recorder):
        importlib.import_module("trainpkg.train")
    noted = {Path(p).name for p in recorder.read()[0]}
    assert {"model.py", "train.py"} <= noted
    later = Recorder([str(root)])
    with recording(later):  # a second trial in this process: nothing imported anew
        importlib.import_module("trainpkg.train")
    assert not later.read()[0]
    sources = trainable_sources(package / "train.py", "trainpkg.train")
    assert {p.name for p in sources} == {"__init__.py", "model.py", "train.py"}


def test_the_walk_of_local_modules_follows_an_edit(tmp_path):
    root = project(tmp_path)
    (root / "helper.py").write_text("Y = 2\n")
    (root / "train_walk.py").write_text("import json\n")
    assert [p.name for p in trainable_sources(root / "train_walk.py", "train_walk")] == [
        "train_walk.py"
    ]
    (root / "train_walk.py").write_text("import json\nimport helper\n")
    stat = (root / "train_walk.py").stat()
    later = time.time_ns() + 10**9  # a new mtime, whatever the file system's resolution
    os.utime(root / "train_walk.py", ns=(stat.st_atime_ns, later))
    names = sorted(p.name for p in trainable_sources(root / "train_walk.py", "train_walk"))
    assert names == ["helper.py", "train_walk.py"]
