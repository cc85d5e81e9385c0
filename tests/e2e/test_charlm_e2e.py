"""examples/charlm, unchanged, under `plan run`: a nanoGPT-style script (a config file named as an
argument and exec'd, `--key=value` read with literal_eval, metrics only printed) decides with
`format: stdout` and `args: literal`; its identity lists the config file it was given, and
`--resume` refuses once that file is edited."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import RunError, load_run, run
from planner._reeval.differences import files_read_differences
from planner._reeval.prepare import prepare
from planner._store.read import RunFolder
from tests._runs import example_app

pytestmark = pytest.mark.ray


def _app(tmp_path: Path) -> Path:
    def edit(contract: dict) -> None:
        contract["seeds"] = [0, 1]
        contract["budget"]["exposure"] = 40
        contract["tuning"]["trials_per_arm"] = 1

    return example_app("charlm", tmp_path, edit)


def test_the_example_decides_and_its_identity_is_every_file_it_read(ray_local, tmp_path):
    contract = _app(tmp_path)
    result = run(contract, runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = load_run(result.run_dir).records
    assert all(r["status"] == "completed" for r in trials), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in trials
    ]
    for r in trials:  # every evaluation it printed, step 0 included, is a report
        assert [report["step"] for report in r["reports"]] == [0, 20, 40]
        argv = r["inputs"]["argv"]
        assert f"--seed={r['seed']}" in argv and "--max_iters=40" in argv
        assert f"--hidden={64 if r['arm'] == 'hidden64' else 0}" in argv
    (decision,) = result.decisions
    assert decision["arm"] == "hidden64" and decision["decision"] == "accept", decision

    read = RunFolder(result.run_dir).identity()["files_read"]
    assert {"config/small.py", "configurator.py", "train.py"} <= set(read)
    assert len(read["config/small.py"]["sha256"]) == 64
    assert not any(name.startswith(("out", "runs")) for name in read)  # outputs are not inputs
    assert files_read_differences(result.run_dir, contract.parent) == []  # nothing changed
    # a reeval of the unchanged example names no difference: its local module model.py among them
    plan = prepare(result.run_dir, "hidden64")
    assert "model.py" in plan.identity["code"]["local_sources"] and "model.py" in read
    assert [str(d) for d in plan.differences] == []

    config = contract.parent / "config" / "small.py"
    config.write_text(config.read_text().replace("batch_size = 32", "batch_size = 16"))
    with pytest.raises(RunError, match=r"config/small\.py: sha256 \w+ then, sha256 \w+ now"):
        run(contract, runs_dir=tmp_path / "runs", resume=result.run_dir, quiet=True)
    (difference,) = prepare(result.run_dir, "hidden64").differences
    assert difference.what == "files_read.config/small.py"
