"""The record is what ran: under `plan run`, every trial's recorded config
is the config the Hydra app composed (its `.hydra/config.yaml`), with the seed, the budget and the
tuned values planner sets, and the keys that interpolate them; `${hydra:runtime.output_dir}` is
allowed and kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner import load_run, run
from planner._cli.main import main
from planner._contract.paths import resolve
from planner._lineage.ledger import config_sha256
from tests._runs import example_app

pytestmark = pytest.mark.ray


def _app(tmp_path: Path) -> Path:
    def edit(contract: dict) -> None:
        contract["seeds"] = [3, 4]
        contract["budget"]["exposure"] = 3
        contract["tuning"]["trials_per_arm"] = 2
        contract["tuning"].pop("early_stop")

    path = example_app("unchanged_app", tmp_path, edit)
    app = path.parent
    conf = yaml.safe_load((app / "conf" / "config.yaml").read_text())
    conf["trainer"]["max_epochs"] = 20  # the app's own default: the budget of 3 must win
    conf["data"]["split_seed"] = "${seed}"  # follows the trial's seed (21.6)
    conf["run_name"] = (
        # a tuned value, the seed and the budget
        "lr${optimizer.lr}-s${seed}-e${trainer.max_epochs}"
    )
    conf["output_dir"] = "${hydra:runtime.output_dir}"  # the Trainer idiom (24.7)
    conf["ckpt_dir"] = (
        "${hydra:runtime.output_dir}/s${seed}"  # Hydra's resolver and the seed in one value
    )
    (app / "conf" / "config.yaml").write_text(yaml.safe_dump(conf, sort_keys=False))
    return path


def test_every_record_holds_the_config_the_script_received(ray_local, tmp_path):
    result = run(_app(tmp_path), runs_dir=tmp_path / "runs", quiet=True)

    assert result.state == "completed", result
    trials = load_run(result.run_dir).records
    assert len(trials) == 8 and all(r["status"] == "completed" for r in trials), [
        (r["trial_id"], r["status"], r["errors"][:1]) for r in trials
    ]
    _check_records(result.run_dir, trials)
    # the arms' configs and the lineage hash hold the budget that ran
    configs = {
        p.stem: yaml.safe_load(p.read_text()) for p in (result.run_dir / "configs").glob("*.yaml")
    }
    assert {arm: c["trainer"]["max_epochs"] for arm, c in configs.items()} == {
        "raw": 3,
        "standardized": 3,
    }
    lineage = json.loads((result.run_dir / "lineage.json").read_text())
    assert lineage["baseline"]["config_sha256"] == config_sha256(configs["raw"])

    # a reeval re-runs one config on each seed: the logged configs differ only where the seed
    # reaches them
    assert main(["reeval", str(result.run_dir), "--arm", "standardized", "--seeds", "3", "5"]) == 0
    reeval = [r for r in load_run(result.run_dir).records if r["phase"] == "reeval"]
    assert sorted(r["seed"] for r in reeval) == [3, 5]
    _check_records(result.run_dir, reeval)


def _check_records(run_dir: Path, records: list[dict]) -> None:
    for r in records:
        saved = r["config"]
        hydra_dir = run_dir / "trials" / r["trial_id"] / "attempt-1" / "hydra"
        received = yaml.safe_load((hydra_dir / ".hydra" / "config.yaml").read_text())
        assert saved == resolve(received), r["trial_id"]
        # the script's Hydra got an interpolation to resolve, not its escaped text
        assert received["ckpt_dir"] in (
            "${hydra:runtime.output_dir}/s${seed}",
            f"${{hydra:runtime.output_dir}}/s{r['seed']}",
        )
        assert saved["ckpt_dir"] == f"${{hydra:runtime.output_dir}}/s{r['seed']}"
        assert saved["seed"] == r["seed"] and saved["data"]["split_seed"] == r["seed"]
        assert saved["trainer"]["max_epochs"] == 3
        assert saved["run_name"] == f"lr{saved['optimizer']['lr']}-s{r['seed']}-e3"
        assert saved["output_dir"] == "${hydra:runtime.output_dir}"
        for key, value in r[
            "params"
        ].items():  # a tuning trial's sampled value is in its config too
            assert saved["optimizer"][key.split(".")[1]] == value
