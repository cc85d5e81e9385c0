"""The directions the tuning and the decision read their metrics in: `metric.mode` for the tuning
metric, `metric.heldout_mode` (default: mode) for a held-out decision metric, and validate's
P416/P417/P935, which stop a contract whose decision would read a metric backwards (tune on
val_loss, min; decide on test_acc)."""

from __future__ import annotations

import pytest

from planner._contract.decidable import direction_of
from planner._contract.model import Contract
from planner._contract.validate import validate
from planner._dispatch.decision import decide_arms
from tests._contract_helpers import edited, write_contract
from tests._runs import synthetic_contract


def _codes(tmp_path, metric: str) -> dict[str, str]:
    path = write_contract(
        tmp_path, edited("inline.yaml", [("metric: {name: loss, mode: min}", f"metric: {metric}")])
    )
    return {
        d.code: d.severity for d in validate(path).diagnostics if d.code in ("P416", "P417", "P935")
    }


@pytest.mark.parametrize(
    "metric, expected",
    [
        (
            "{name: val_loss, mode: min, heldout: test_acc}",
            {"P417": "error"},
        ),  # the new user's contract
        ("{name: val_acc, mode: max, heldout: test_loss}", {"P417": "error"}),
        (
            "{name: val_loss, mode: min, heldout: test_acc, heldout_mode: max}",
            {},
        ),  # said how: accepted
        ("{name: val_loss, mode: min, heldout: test_loss}", {}),
        ("{name: val_acc, mode: max, heldout: test_acc}", {}),
        (
            "{name: val_acc, mode: min}",
            {"P935": "warning"},
        ),  # a wrong mode for a name that says its direction
        ("{name: val_loss, mode: min, heldout: test_acc, heldout_mode: min}", {"P935": "warning"}),
        ("{name: loss, mode: min, heldout_mode: max}", {"P416": "error"}),
        (
            "{name: score, mode: min, heldout: test_score}",
            {},
        ),  # names that say nothing: nothing is claimed
    ],
)
def test_validate_stops_a_decision_that_would_read_its_metric_backwards(tmp_path, metric, expected):
    assert _codes(tmp_path, metric) == expected


@pytest.mark.parametrize(
    "name, direction",
    [
        ("val_loss", "min"),
        ("train_loss_epoch", "min"),
        ("valPerplexity", "min"),
        ("eval/wer", "min"),
        ("test_acc", "max"),
        ("eval_f1", "max"),
        ("val/accuracy", "max"),
        ("mAP_50", None),
        ("map_50", "max"),
        ("score", None),
        ("epoch", None),
        ("top1_err", None),
        ("val_acc_loss", None),
    ],
)
def test_a_metric_name_says_its_direction_only_when_it_holds_one_kind_of_word(name, direction):
    assert direction_of(name) == direction


def _confirm(arm: str, seed: int, test_acc: float) -> dict:
    return {
        "trial_id": f"confirm-{arm}-s{seed}",
        "phase": "confirm",
        "arm": arm,
        "seed": seed,
        "status": "completed",
        "reports": [{"step": 3, "metrics": {"val_loss": 1.0 - test_acc, "test_acc": test_acc}}],
    }


def test_the_decision_reads_the_heldout_metric_in_its_own_direction():
    data = synthetic_contract(
        metric={"name": "val_loss", "mode": "min", "heldout": "test_acc", "heldout_mode": "max"},
        seeds=[0, 1, 2, 3, 4, 5],
        # an exact shift: the paired test (the default) decides it by the sign rule over 6 seeds
        acceptance={"min_effect": 0.01},
    )
    contract = Contract.model_validate(data)
    assert contract.metric.decision_mode == "max" and contract.metric.mode == "min"
    records = [_confirm("base", s, 0.80 + 0.002 * s) for s in range(6)]
    records += [_confirm("treat", s, 0.90 + 0.002 * s) for s in range(6)]
    (row,) = decide_arms(contract, records)
    assert row["effect"] == pytest.approx(0.10) and row["decision"] == "accept", (
        row
    )  # a higher test_acc is better
    data["metric"].pop(
        "heldout_mode"
    )  # read in mode's direction (what P417 now refuses): the sign flips
    (row,) = decide_arms(Contract.model_validate(data), records)
    assert row["effect"] == pytest.approx(-0.10) and row["decision"] != "accept", row
