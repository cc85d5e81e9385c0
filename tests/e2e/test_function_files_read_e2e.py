"""Every file a function trainable's trial read is its identity, as for a `command:`: a YAML the
function opens next to its contract and a local module it imports are in each record's
`inputs.files` (also in a reused worker, where the module was loaded by an earlier trial) and in
identity.json's `files_read`; once the YAML is edited, `plan run --resume` refuses naming it and
`plan reeval` names it, and nothing else; an edited local module is named once, as code."""

from __future__ import annotations

import pytest

from planner import RunError, load_run, run
from planner._reeval.differences import files_read_differences
from planner._reeval.prepare import prepare
from planner._store.read import RunFolder
from tests._runs import contract_writer, synthetic_contract

pytestmark = pytest.mark.ray

TRAINABLE = """\
from pathlib import Path

import yaml

from gain_helper import GAIN


def train(config, trial):
    settings = yaml.safe_load((Path(__file__).parent / "settings.yaml").read_text())
    level = config["recipe"]["level"] * settings["scale"]
    for step in range(1, trial.budget + 1):
        value = GAIN * level * step + 0.001 * trial.seed
        trial.report(step, val_acc=value, test_acc=value)
"""


def test_a_function_trainables_reads_are_its_identity_and_a_changed_one_is_refused(
    ray_local, in_repo, tmp_path
):
    (tmp_path / "settings.yaml").write_text("scale: 1.0\n")
    (tmp_path / "gain_helper.py").write_text("GAIN = 0.1\n")
    (tmp_path / "reads_yaml.py").write_text(TRAINABLE)
    write = contract_writer(synthetic_contract(name="reads"))
    tuning = {
        "trials_per_arm": 2,
        "seeds": [100],
        "sampler": {"name": "random", "seed": 0},
        "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
    }
    path = write(tmp_path, trainable="reads_yaml:train", seeds=[0, 1, 2], tuning=tuning)
    first = run(path, runs_dir=tmp_path / "runs", quiet=True)
    assert first.state == "completed", first

    trials = load_run(first.run_dir).records
    assert {r["phase"] for r in trials} >= {"tune", "confirm"}
    for record in trials:  # each trial's own list, however its worker had been used before
        files = record["inputs"]["files"]
        assert {"settings.yaml", "gain_helper.py", "reads_yaml.py"} <= set(files), record
        assert not any(name.startswith("runs/") for name in files)  # the run folder is not read
    read = RunFolder(first.run_dir).identity()["files_read"]
    assert set(read) == {"settings.yaml", "gain_helper.py", "reads_yaml.py"}
    assert len(read["settings.yaml"]["sha256"]) == 64
    assert files_read_differences(first.run_dir, tmp_path) == []

    (tmp_path / "settings.yaml").write_text("scale: 2.0\n")
    with pytest.raises(RunError, match=r"settings\.yaml: sha256 \w+ then, sha256 \w+ now"):
        run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    (difference,) = files_read_differences(first.run_dir, tmp_path)
    assert difference.what == "files_read.settings.yaml"

    (tmp_path / "settings.yaml").write_text("scale: 1.0\n")  # as it was
    (tmp_path / "gain_helper.py").write_text("GAIN = 0.2\n")  # a local module: named once, as code
    with pytest.raises(
        RunError, match=r"a local module the trainable imports .*\(gain_helper\.py\)"
    ):
        run(path, runs_dir=tmp_path / "runs", resume=first.run_dir, quiet=True)
    named = [d.what for d in prepare(first.run_dir, "treat").differences]
    assert named == ["code.local_sources.gain_helper.py"]
