"""The run folder's one schema: what the writer appends reads back whole, what it does not describe
is stopped at the writer, non-finite metric values read in one pass, and a bad field is named."""

import json
import math
import re

import pytest

import planner
from planner import RunError
from planner._core.records import StoredTrial
from planner._store.read import open_run
from planner._store.writer import RunStore

FULL = {
    "trial_id": "tune-sgd-s1-t000",
    "status": "completed",
    "phase": "tune",
    "arm": "sgd",
    "seed": 1,
    "index": 0,
    "params": {"optimizer.lr": 0.1},
    "config": {"optimizer": {"lr": 0.1, "betas": [0.9, 0.99]}},
    "exposure": 3,
    "reports": [
        {"step": s, "metrics": {"val_acc": 0.1 * s, "loss": v}, "time_s": 0.5 * s}
        for s, v in ((1, 2.0), (2, "nan"), (3, "-inf"))
    ],
    "attempts": 2,
    "errors": [{"attempt": 1, "type": "WorkerDied", "message": "gone", "traceback": ""}],
    "violations": [
        {"kind": "split_overlap", "step": 2, "splits": ["train", "test"], "by": "unit"},
        "an older run's note",
    ],
    "notes": ["a declared metric no row held"],
    "splits": {
        "train": {
            "presentations": 10,
            "distinct": 8,
            "fingerprint": "ab12",
            "groups": {"patient": {"distinct": 3, "fingerprint": "cd34"}},
            "overlap": {"test": {"unit": 0, "patient": 1}},
        }
    },
    "started": "2026-01-01T00:00:00Z",
    "ended": "2026-01-01T00:00:03Z",
    "duration_s": 3.25,
    "host": "h",
    "pid": 4242,
    "node_id": None,
    "contract_sha256": "0" * 64,
    "disk_bytes": 1024,
    "modules": ["torch"],
    "resumed": True,
    "resumed_from": {"path": "trials/x/ckpt", "sha256": "f" * 64, "held": 2, "reports": []},
    "inputs": {
        "argv": ["--lr=0.1", "config/small.py"],
        "files": {
            "config/small.py": {"sha256": "e" * 64},
            "data/train.bin": {"size": 9, "mtime_ns": 1},
        },
    },
}


def test_the_full_record_covers_every_field_of_the_schema():
    assert set(FULL) == set(StoredTrial.__annotations__)


def test_a_record_with_every_field_reads_back_as_it_was_written(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    store.record_trial(FULL)
    store.close()
    (store.root / "contract.yaml").write_text("name: demo\n")
    assert open_run(store.root).trials().records == [FULL]


def test_a_field_the_schema_does_not_describe_is_stopped_at_the_writer(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    with pytest.raises(RunError, match=r"does not describe \(in `surprise`\)"):
        store.record_trial({**FULL, "surprise": 1})
    with pytest.raises(RunError, match=r"in `reports`"):
        store.record_trial({**FULL, "reports": [{"step": 1, "metrics": {}, "extra": 2}]})
    store.close()
    assert not (store.root / "trials.jsonl").read_bytes()


def test_a_record_every_reader_would_refuse_is_refused_at_the_writer(tmp_path):
    store = RunStore.create(tmp_path, "demo")
    with pytest.raises(RunError, match="field `seed` is 'x', not a whole number"):
        store.record_trial({**FULL, "seed": "x"})


def _folder(tmp_path, lines):
    run = RunStore.create(tmp_path, "demo").root
    (run / "contract.yaml").write_text("name: demo\n")
    (run / "trials.jsonl").write_text("".join(line + "\n" for line in lines))
    return run


def test_non_finite_metric_values_read_as_floats_old_tokens_too(tmp_path):
    """The stored strings (and the bare NaN / Infinity tokens of Python's json) become NaN and the
    infinities in load_run's frames; the record keeps the stored form."""
    written = json.dumps(FULL)
    tokens = written.replace('"nan"', "NaN").replace('"-inf"', "-Infinity")
    tokens = tokens.replace('"trial_id": "tune-sgd-s1-t000"', '"trial_id": "old"')
    run = _folder(tmp_path, [written, tokens])
    records = open_run(run).trials().records
    assert records[0]["reports"][1]["metrics"]["loss"] == "nan"
    assert math.isnan(records[1]["reports"][1]["metrics"]["loss"])
    reports = planner.load_run(run).reports
    loss = reports[reports["metric"] == "loss"].sort_values(["trial_id", "step"])
    for trial in ("old", "tune-sgd-s1-t000"):
        values = loss[loss["trial_id"] == trial]["value"].tolist()
        assert values[0] == 2.0 and math.isnan(values[1]) and values[2] == -math.inf


@pytest.mark.parametrize(
    ("field", "value", "sentence"),
    [
        (
            "reports",
            [{"step": 1, "metrics": {"a": "oops"}}],
            "reports[0].metrics.a` is 'oops', not a number, or \"nan\"",
        ),
        ("reports", [{"step": 1.5e30}], "reports[0].step` is 1.5e+30, not a number up to 2**53"),
        ("attempts", -1, "attempts` is -1, not a whole number of at least 0"),
        ("violations", [{"kind": 3}], "violations[0].kind` is 3, not text"),
        (
            "splits",
            {"a": {"groups": {"g": {"distinct": "x"}}}},
            "splits.a.groups.g.distinct` is 'x'",
        ),
        ("errors", [{"type": None, "message": ["m"]}], "errors[0].message` is ['m'], not text"),
    ],
)
def test_the_bad_field_is_named_from_the_decoders_path(tmp_path, field, value, sentence):
    run = _folder(tmp_path, [json.dumps({**FULL, field: value})])
    with pytest.raises(RunError, match=r"line 1 of .*trials.jsonl: field `" + re.escape(sentence)):
        open_run(run).trials()
