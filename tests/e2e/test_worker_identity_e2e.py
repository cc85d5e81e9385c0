"""A real run through Ray Tune with ASHA: identity.json names the package a
function trainable imported in its body, a reeval names a changed version of it, and no attempt
ledger of a trial ASHA stopped is left open."""

from __future__ import annotations

import json

import pytest

from planner import load_run, run
from planner._reeval.prepare import prepare
from tests._runs import contract_writer, synthetic_contract

pytestmark = pytest.mark.ray

write = contract_writer(
    synthetic_contract(
        name="worker-identity", trainable="tests.trainables.worker_ends:imports_inside"
    )
)


def test_a_body_import_reaches_identity_json_and_asha_stops_close_their_ledgers(
    ray_local, in_repo, tmp_path
):
    tuning = {
        "trials_per_arm": 6,
        "seeds": [100],
        "sampler": {"name": "random", "seed": 0},
        "space": {"recipe.lr": {"log_uniform": [1.0e-4, 1.0]}},
        "early_stop": {"rule": "asha", "grace": 1, "reduction_factor": 3},
    }
    result = run(
        write(tmp_path, tuning=tuning, seeds=[0, 1, 2]), runs_dir=tmp_path / "runs", quiet=True
    )
    assert result.state == "completed"
    root = result.run_dir
    records = load_run(root).records
    assert any("mpmath" in (r.get("modules") or []) for r in records)
    identity = json.loads((root / "identity.json").read_text())
    assert identity["packages"].get(
        "mpmath"
    )  # no import statement names it: only the workers saw it

    stopped = [r for r in records if r["status"] == "early_stopped"]
    assert stopped, "ASHA stopped no trial: the ledger check below would check nothing"
    for r in stopped:
        attempts = json.loads(
            (root / "trials" / r["trial_id"] / ".planner-attempts.json").read_text()
        )["attempts"]
        assert [a["ended"] for a in attempts] == ["early_stopped"], r["trial_id"]
        assert attempts[0]["step"] == r["exposure"]

    identity["packages"]["mpmath"] = "0.0.1"  # the run's mpmath, as if it was upgraded since
    (root / "identity.json").write_text(json.dumps(identity))
    found = {d.what: (d.logged, d.current) for d in prepare(root, "treat").differences}
    assert found["packages.mpmath"][0] == "0.0.1" and found["packages.mpmath"][1] not in (
        None,
        "0.0.1",
    )
