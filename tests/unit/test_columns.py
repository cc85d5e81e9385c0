"""The columnar read of trials.jsonl: the schema check's columns accept what the per-report check accepts.

`schema.check_trial` returns a trial's reports as checked columns when they are regular; every other
shape goes through the per-report check, which names the bad field. `load_run` builds the same frames
from the columns as from the records themselves.
"""

import json
import re

import numpy as np
import pandas as pd
import pytest

from planner._core.errors import RunError
from planner._results import tables
from planner._store import read as rf
from planner._store import schema

BIG = 2**53


def _record(reports):
    return {"trial_id": "t", "status": "completed", "phase": "tune", "arm": "a", "seed": 0, "reports": reports}


REGULAR = [{"step": s, "metrics": {"acc": 0.5 + s / 100, "loss": 1.0 / s}, "time_s": s * 0.5} for s in (1, 2, 3)]
ACCEPTED = {
    "regular": REGULAR,
    "int values": [{"step": 1, "metrics": {"acc": 1}, "time_s": 0.1}],
    "non-finite as text": [{"step": 1, "metrics": {"acc": "nan"}, "time_s": 0.1},
                           {"step": 2, "metrics": {"acc": "-inf"}, "time_s": 0.2}],
    "a null value": [{"step": 1, "metrics": {"acc": None}, "time_s": 0.1}],
    "float steps": [{"step": 1.0, "metrics": {"acc": 0.1}, "time_s": 0.1}],
    "no time_s": [{"step": 1, "metrics": {"acc": 0.1}}],
    "metrics that come and go": [{"step": 1, "metrics": {"acc": 0.1}, "time_s": 0.1},
                                 {"step": 2, "metrics": {"loss": 0.2}, "time_s": 0.2}],
    "a null step": [{"step": None, "metrics": {"acc": 0.1}, "time_s": 0.1}],
    "none": [],
}
REFUSED = {
    "a bool value": ([{"step": 1, "metrics": {"acc": True}, "time_s": 0.1}], "reports[0].metrics.acc"),
    "an int past 2**53": ([{"step": 1, "metrics": {"acc": BIG + 1}, "time_s": 0.1}], "reports[0].metrics.acc"),
    "other text": ([{"step": 1, "metrics": {"acc": 0.1}, "time_s": 0.1},
                    {"step": 2, "metrics": {"acc": "high"}, "time_s": 0.2}], "reports[1].metrics.acc"),
    "a step past 2**53": ([{"step": BIG + 1, "metrics": {"acc": 0.1}, "time_s": 0.1}], "reports[0].step"),
    "a bool step": ([{"step": True, "metrics": {"acc": 0.1}, "time_s": 0.1}], "reports[0].step"),
    "metrics as a list": ([{"step": 1, "metrics": [], "time_s": 0.1}], "reports[0].metrics"),
    "a report that is text": (["step 1"], "reports[0]"),
    "a nested value": ([{"step": 1, "metrics": {"acc": [0.1]}, "time_s": 0.1}], "reports[0].metrics.acc"),
}


@pytest.mark.parametrize("name", ACCEPTED)
def test_reports_the_per_report_check_accepts_pass_with_or_without_columns(name):
    columns = schema.check_trial(_record(ACCEPTED[name]), "line 1")
    if name in ("regular", "int values", "non-finite as text", "a null value", "none"):
        assert columns is not None
        assert columns.names == sorted({n for p in ACCEPTED[name] for n in p["metrics"]})
        assert columns.steps == [p["step"] for p in ACCEPTED[name]]
        assert columns.values == {n: [p["metrics"][n] for p in ACCEPTED[name]] for n in columns.names}
        assert columns.last == [ACCEPTED[name][-1]["metrics"][n] for n in columns.names]
        only = schema.check_trial(_record(ACCEPTED[name]), "line 1", frozenset(columns.names[:1]))
        assert list(only.values) == columns.names[:1] and only.last == columns.last
    else:
        assert columns is None  # not regular: checked report by report, read by the general path


@pytest.mark.parametrize("name", REFUSED)
def test_a_bad_report_is_refused_naming_its_field(name):
    reports, field = REFUSED[name]
    with pytest.raises(RunError, match=re.escape(f"line 1: field `{field}`")):
        schema.check_trial(_record(reports), "line 1")


def test_load_run_builds_the_same_frames_from_columns_as_from_records(tmp_path, monkeypatch):
    from bench.synthetic_run import make_run

    run = make_run(tmp_path / "run", arms=("sgd", "adam"), seeds=3, tune_trials=8, reports_per_trial=6)
    with open(run / "trials.jsonl", "a") as f:  # one record of every accepted shape, after the synthetic ones
        for i, reports in enumerate(ACCEPTED.values()):
            f.write(json.dumps({**_record(reports), "trial_id": f"odd-{i}"}) + "\n")
    columnar = tables.load_run(run)
    assert columnar.reports["trial_id"].astype(str).str.startswith("odd-").any()

    def records_only(self, notes, metrics=None):  # the reader without its columns: the collector takes every record apart
        return ((r, None) for r in self.iter_trials(notes))

    monkeypatch.setattr(rf.RunFolder, "iter_trial_columns", records_only)
    general = tables.load_run(run)
    pd.testing.assert_frame_equal(columnar.trials, general.trials)
    pd.testing.assert_frame_equal(columnar.reports, general.reports)
    assert columnar.violations == general.violations and columnar.heldout == general.heldout
    monkeypatch.undo()
    one = tables.load_run(run, metrics=["val_acc"])
    assert set(one.reports["metric"].astype(str)) == {"val_acc"}
    pd.testing.assert_frame_equal(one.trials, columnar.trials)
    kept = columnar.reports[columnar.reports["metric"].astype(str) == "val_acc"].reset_index(drop=True)
    assert np.array_equal(one.reports["value"].to_numpy(), kept["value"].to_numpy(), equal_nan=True)
    assert one.reports["trial_id"].astype(str).tolist() == kept["trial_id"].astype(str).tolist()
