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
    return {
        "trial_id": "t",
        "status": "completed",
        "phase": "tune",
        "arm": "a",
        "seed": 0,
        "reports": reports,
    }


REGULAR = [
    {"step": s, "metrics": {"acc": 0.5 + s / 100, "loss": 1.0 / s}, "time_s": s * 0.5}
    for s in (1, 2, 3)
]
ACCEPTED = {
    "regular": REGULAR,
    "int values": [{"step": 1, "metrics": {"acc": 1}, "time_s": 0.1}],
    "non-finite as text": [
        {"step": 1, "metrics": {"acc": "nan"}, "time_s": 0.1},
        {"step": 2, "metrics": {"acc": "-inf"}, "time_s": 0.2},
    ],
    "a null value": [{"step": 1, "metrics": {"acc": None}, "time_s": 0.1}],
    "float steps": [{"step": 1.0, "metrics": {"acc": 0.1}, "time_s": 0.1}],
    "no time_s": [{"step": 1, "metrics": {"acc": 0.1}}],
    "metrics that come and go": [
        {"step": 1, "metrics": {"acc": 0.1}, "time_s": 0.1},
        {"step": 2, "metrics": {"loss": 0.2}, "time_s": 0.2},
    ],
    "a null step": [{"step": None, "metrics": {"acc": 0.1}, "time_s": 0.1}],
    "none": [],
}
REFUSED = {
    "a bool value": (
        [{"step": 1, "metrics": {"acc": True}, "time_s": 0.1}],
        "reports[0].metrics.acc",
    ),
    "an int past 2**53": (
        [{"step": 1, "metrics": {"acc": BIG + 1}, "time_s": 0.1}],
        "reports[0].metrics.acc",
    ),
    "other text": (
        [
            {"step": 1, "metrics": {"acc": 0.1}, "time_s": 0.1},
            {"step": 2, "metrics": {"acc": "high"}, "time_s": 0.2},
        ],
        "reports[1].metrics.acc",
    ),
    "a step past 2**53": (
        [{"step": BIG + 1, "metrics": {"acc": 0.1}, "time_s": 0.1}],
        "reports[0].step",
    ),
    "a bool step": ([{"step": True, "metrics": {"acc": 0.1}, "time_s": 0.1}], "reports[0].step"),
    "metrics as a list": ([{"step": 1, "metrics": [], "time_s": 0.1}], "reports[0].metrics"),
    "a report that is text": (["step 1"], "reports[0]"),
    "a nested value": (
        [{"step": 1, "metrics": {"acc": [0.1]}, "time_s": 0.1}],
        "reports[0].metrics.acc",
    ),
}


def _floats(values):
    """Each column as float64, whether the C reader's (typed already) or the Python twin's (the objects)."""
    return {
        n: np.asarray(v, dtype=np.float64) if isinstance(v, memoryview) else tables._float_array(v)
        for n, v in values.items()
    }


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[n], b[n], equal_nan=True) for n in a)


@pytest.mark.parametrize("name", ACCEPTED)
def test_reports_the_per_report_check_accepts_pass_with_or_without_columns(name):
    columns = schema.check_trial(_record(ACCEPTED[name]), "line 1")
    if name in ("regular", "int values", "non-finite as text", "a null value", "none"):
        assert columns is not None
        assert columns.names == sorted({n for p in ACCEPTED[name] for n in p["metrics"]})
        assert list(columns.steps) == [p["step"] for p in ACCEPTED[name]]
        assert _same(
            _floats(columns.values),
            {
                n: tables._float_array([p["metrics"][n] for p in ACCEPTED[name]])
                for n in columns.names
            },
        )
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

    run = make_run(
        tmp_path / "run", arms=("sgd", "adam"), seeds=3, tune_trials=8, reports_per_trial=6
    )
    with open(
        run / "trials.jsonl", "a"
    ) as f:  # one record of every accepted shape, after the synthetic ones
        for i, reports in enumerate(ACCEPTED.values()):
            f.write(json.dumps({**_record(reports), "trial_id": f"odd-{i}"}) + "\n")
    columnar = tables.load_run(run)
    assert columnar.reports["trial_id"].astype(str).str.startswith("odd-").any()

    def records_only(
        self, notes, metrics=None
    ):  # the reader without its columns: the collector takes every record apart
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
    kept = columnar.reports[columnar.reports["metric"].astype(str) == "val_acc"].reset_index(
        drop=True
    )
    assert np.array_equal(one.reports["value"].to_numpy(), kept["value"].to_numpy(), equal_nan=True)
    assert one.reports["trial_id"].astype(str).tolist() == kept["trial_id"].astype(str).tolist()


# ---------------------------------------------------------------- the C reader and its Python twins
#
# planner/_store/_columns.c takes the common case of a trial record in C: its reports into typed columns
# (`take`), the depth rule (`fits`), the record's other fields (`trial_ok`), the run of 19 digits
# (`long_digits`). Each has a Python twin that decides wherever C is not built or does not know. The two
# must give the same answer on every input: generated values, regular and not, check that here.

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from planner._store import bounds, facts  # noqa: E402

BUILT = schema._take is not None
needs_c = pytest.mark.skipif(not BUILT, reason="planner/_store/_columns.c was not built here")

NAMES = st.sampled_from(["acc", "loss", "val/acc", "é", "test_acc"])
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from(
        [None, True, False, "nan", "inf", "-inf", "NaN", "Infinity", "high", BIG, BIG + 1, -BIG - 1]
    ),
    st.lists(st.floats(), max_size=1),
)
STEPS = st.one_of(
    st.integers(min_value=-BIG - 2, max_value=BIG + 2), st.sampled_from([1.0, None, True, "1"])
)
TIMES = st.one_of(
    st.floats(allow_nan=True),
    st.integers(min_value=-(2**1100), max_value=2**1100),
    st.sampled_from([None, True, "nan", "inf", "-inf", "NaN", "Infinity", "-Infinity", "x"]),
)


@st.composite
def report_lists(draw):
    """Mostly regular reports (one set of names), with now and then one thing changed."""
    names = draw(st.lists(NAMES, unique=True, max_size=3))
    reports = []
    for _ in range(draw(st.integers(0, 5))):
        metrics = {
            n: draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False), VALUES))
            for n in names
        }
        report = {
            "step": draw(st.one_of(st.integers(0, 10**6), STEPS)),
            "metrics": metrics,
            "time_s": draw(st.one_of(st.floats(0, 1e6), TIMES)),
        }
        change = draw(st.integers(0, 12))
        if change == 1:
            report.pop(draw(st.sampled_from(["step", "metrics", "time_s"])))
        elif change == 2:
            metrics[draw(NAMES)] = 0.5
        elif change == 3 and metrics:
            metrics.pop(next(iter(metrics)))
        elif change == 4:
            report = draw(st.sampled_from(["step 1", 1, None, [1]]))
        elif change == 5:
            report["metrics"] = draw(st.sampled_from([[], None, "m"]))
        reports.append(report)
    return reports


def _normal(columns, twin):
    """A ReportColumns as plain values: the C reader's typed columns, the twin's converted as the collector does."""
    if columns is None:
        return None
    if twin:
        steps, times = list(columns.steps), tables._float_array(columns.times)
    else:
        steps, times = list(columns.steps), np.asarray(columns.times, dtype=np.float64)
    return steps, times, columns.names, columns.last, _floats(columns.values), columns.numeric


@needs_c
@settings(max_examples=1500, deadline=None)
@given(report_lists(), st.one_of(st.none(), st.frozensets(NAMES, max_size=2)))
def test_the_c_columns_and_their_python_twin_agree_on_every_report_list(reports, wanted):
    c, py = schema._report_columns(reports, wanted), schema._python_columns(reports, wanted)
    assert (c is None) == (py is None), (reports, c, py)
    if c is None:
        return
    assert c.typed and not py.typed
    a, b = _normal(c, False), _normal(py, True)
    assert (
        a[0] == b[0]
        and np.array_equal(a[1], b[1], equal_nan=True)
        and a[2] == b[2]
        and a[5] == b[5]
    )
    assert len(a[3]) == len(b[3]) and all(x is y or x == y for x, y in zip(a[3], b[3], strict=True))
    assert _same(a[4], b[4])


def test_the_c_reader_takes_the_reports_a_run_writes():
    """Not only that the twins agree: on the shape every run writes, the C reader (where built) gives columns."""
    columns = schema.check_trial(_record(REGULAR), "line 1")
    assert columns is not None and columns.typed == BUILT
    assert list(columns.steps) == [1, 2, 3] and list(columns.times) == [0.5, 1.0, 1.5]


def _nested(depth, width=1, leaf=0):
    value = leaf
    for i in range(depth):
        value = [value] * width if i % 2 else {"k": value, "n": i}
    return value


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 70), st.integers(1, 2), st.sampled_from([0, [], {}, "x", 2**70]), st.booleans()
)
def test_the_c_depth_rule_and_its_python_twin_agree(depth, width, leaf, with_reports):
    from planner._store._columns import fits

    width = width if depth <= 12 else 1  # shared branches: 2**depth paths for both to walk

    value = {"config": _nested(depth, width, leaf), "reports": _nested(80) if with_reports else []}
    skip = bounds.SCHEMA_CHECKED if with_reports else frozenset()
    assert fits(value, with_reports) is bounds._fits(value, 0, skip=skip)
    assert fits(_nested(depth, width, leaf), False) is bounds._fits(_nested(depth, width, leaf), 0)


@needs_c
def test_the_c_depth_rule_leaves_a_subclass_to_its_twin():
    from planner._store._columns import fits

    class Mapping(dict):
        pass

    assert fits({"a": Mapping(b=1)}, False) is None


@needs_c
@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=60), st.integers(0, 25), st.binary(max_size=10))
def test_the_c_long_digits_and_its_python_twin_agree(head, run, tail):
    data = head + b"7" * run + tail
    from planner._store._columns import long_digits

    assert long_digits(data) is bounds._long_digits(data)
    assert long_digits(memoryview(data)) is bounds._long_digits(data)


FIELD_VALUES = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(min_value=-BIG - 2, max_value=BIG + 2),
    st.floats(),
    st.booleans(),
    st.just([]),
    st.just({}),
    st.just([{"type": 1}]),
    st.just(["a string violation"]),
    st.just([{"kind": "x", "step": float("nan")}]),
    st.just({"train": {"presentations": -1}}),
    st.just({"train": None}),
    st.just(
        {
            "train": {
                "groups": {"g": {"distinct": 1, "fingerprint": "f"}},
                "overlap": {"test": {"k": 2}},
            }
        }
    ),
    st.just({"train": {"overlap": {"test": {"k": -2}}}}),
)
FIELDS = [
    "trial_id",
    "phase",
    "arm",
    "status",
    "started",
    "ended",
    "host",
    "contract_sha256",
    "seed",
    "index",
    "attempts",
    "pid",
    "exposure",
    "duration_s",
    "params",
    "config",
    "errors",
    "violations",
    "splits",
]


@needs_c
@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), FIELD_VALUES, max_size=6), st.booleans())
def test_the_c_record_check_passes_only_what_its_python_twin_passes(changed, drop_id):
    from planner._store._columns import trial_ok

    record = {
        **_record(REGULAR),
        "attempts": 1,
        "errors": [],
        "violations": [],
        "exposure": 3,
        **changed,
    }
    if drop_id:
        record.pop("trial_id")
    try:
        schema._trial_fields(record)
        schema._trial_lists(record)
        passes = True
    except schema._Bad:
        passes = False
    assert trial_ok(record) == passes, record


# ---------------------------------------------------------------- reports read from the line's text

FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e3, 1e3),
    st.sampled_from([0.1, 1e-05, 1e22, 1e23, 5e-324, 2.0**53, -0.0, 123456789.12345678, 1e300]),
)


@st.composite
def trial_lines(draw):
    """A trial record's line as a run writes it (json.dumps), now and then with one thing a run never writes."""
    odd = (
        draw(st.integers(0, 3)) == 0
    )  # one time in four, a name, a step or a value a run never writes
    plain = ["acc", "loss", "val/acc", "a b"]
    names = draw(
        st.lists(
            st.sampled_from(plain + (['q"', "é", "x\\\\y"] if odd else [])),
            unique=True,
            min_size=1,
            max_size=3,
        )
    )
    value = st.one_of(
        FLOATS,
        st.integers(-BIG - 1, BIG + 1),
        st.sampled_from(["nan", "inf", "-inf", None] + ([True, "x"] if odd else [])),
    )
    step = st.one_of(st.integers(0, 10**6), STEPS) if odd else st.integers(-5, 10**15)
    time = (
        st.one_of(FLOATS, st.integers(0, 10**20), st.just("x"))
        if odd
        else st.one_of(FLOATS, st.integers(0, 99))
    )
    reports = [
        {
            "step": draw(step),
            "metrics": {n: draw(st.one_of(FLOATS, value)) for n in names},
            "time_s": draw(time),
        }
        for _ in range(draw(st.integers(0, 4)))
    ]
    record = {
        "trial_id": "t",
        "phase": draw(st.sampled_from(["tune", "confirm"])),
        "arm": "a",
        "seed": 1,
        "params": {"lr": 0.1},
        "config": draw(st.sampled_from([{"a": 1}, {"reports": [{"step": 1}]}])),
        "status": "completed",
        "exposure": 3,
        "reports": reports,
        "attempts": 1,
        "errors": [],
        "violations": [],
        "started": "2026-12-01T00:00:00Z",
        "duration_s": 1.5,
    }
    record.update(
        draw(
            st.dictionaries(
                st.sampled_from(["seed", "pid", "exposure", "errors"]), FIELD_VALUES, max_size=1
            )
        )
    )
    line = json.dumps(
        record, default=str
    ).encode()  # NaN as a bare token too: what a planted line may hold
    change = draw(st.integers(0, 8))
    if change == 1:
        line = json.dumps(record, separators=(",", ":")).encode()
    elif change == 2:
        line = (
            line[:-1] + b', "reports": ' + json.dumps(reports[:1]).encode() + b"}"
        )  # a key twice: the last wins
    elif change == 3 and len(line) > 10:
        cut = draw(st.integers(1, len(line) - 1))
        line = line[:cut] + draw(st.sampled_from([b"", b" ", b"1", b"]", b"}", b'"'])) + line[cut:]
    return line + b"\n"


def _whole(line):
    """The whole-line reader: (record, columns) or the RunError it raises."""
    try:
        record = rf._loads(line, "line 1")
        if not isinstance(record, dict):
            return "not a record"
        return record, schema.check_trial(record, "line 1")
    except RunError as error:
        return str(error)
    except ValueError:
        return "damaged"


@needs_c
@settings(max_examples=2500, deadline=None)
@given(trial_lines(), st.one_of(st.none(), st.just(frozenset({"acc"}))))
def test_reports_read_from_the_text_are_what_the_whole_line_reader_reads(line, wanted):
    whole = _whole(line)
    try:
        scanned = rf.scanned_trial(line, "line 1", wanted)
    except RunError as error:
        assert str(error) == whole  # the same refusal, naming the same field
        return
    if scanned is None:
        return  # the whole-line reader takes it, as before
    assert not isinstance(whole, str), (line, whole)
    record, columns = scanned
    full, full_columns = whole
    assert full_columns is not None  # text the scan reads is regular reports
    summary = record.pop("summary")
    assert summary == facts.summarize_reports(full)
    assert record == {**full, "reports": []}
    assert columns.line == line and rf.whole_record(line, "line 1") == full
    a, b = _normal(columns, False), _normal(full_columns, not full_columns.typed)
    assert (
        a[0] == b[0]
        and np.array_equal(a[1], b[1], equal_nan=True)
        and a[2] == b[2]
        and a[5] == b[5]
    )
    assert all(type(x) is type(y) and (x == y or x != x) for x, y in zip(a[3], b[3], strict=True))
    if wanted is None:
        assert _same(a[4], b[4])
    else:
        assert a[4].keys() == {n for n in b[4] if n in wanted} and _same(
            a[4], {n: b[4][n] for n in a[4]}
        )


def test_the_text_reader_takes_the_lines_a_run_writes(tmp_path):
    """The twins agree above; here, on what every run writes, the text reader (where built) is the one used."""
    line = json.dumps(_record(REGULAR)).encode() + b"\n"
    scanned = rf.scanned_trial(line, "line 1")
    if not BUILT:  # without the C reader every line is read whole
        assert rf._scan is None and scanned is None
        return
    record, columns = scanned
    assert record["reports"] == [] and columns.typed and list(columns.steps) == [1, 2, 3]
    assert record["summary"] == facts.summarize_reports(_record(REGULAR))


@needs_c
def test_the_c_reader_runs_no_python_code_of_a_key():
    """A key whose hash or equality is Python code (built in memory; JSON never makes one) could change what
    the C reader holds while it reads: the reader leaves such values to its twin (a review found a crash)."""
    from planner._store import _columns

    reports = [{"step": i, "metrics": {"a": 0.5}, "time_s": 0.1} for i in range(3)]

    class Clearing:
        def __hash__(self):
            return hash("a")

        def __eq__(self, other):
            reports.clear()
            return False

    with pytest.raises(TypeError, match="wanted"):
        _columns.take(reports, {Clearing()})
    assert len(reports) == 3  # refused before any lookup could run it
    odd = {"a": 1}
    odd[Clearing()] = 2  # (its insertion beside "a" runs it, here, once)
    assert _columns.take([{"step": 1, "metrics": odd, "time_s": 0}], None) is None
    assert (
        _columns.take([{"step": 1, "metrics": {"a": 1, 1: 2}, "time_s": 0}], None) is None
    )  # unsortable names
    record = {"trial_id": "t", "status": "completed"}
    record[Clearing()] = 1
    assert _columns.trial_ok(record) is False

    class Text(str):
        pass

    deep = 0
    for _ in range(70):
        deep = [deep]
    assert _columns.fits({Text("reports"): deep}, True) is None  # the twin, which skips it, decides


def test_a_record_read_from_its_text_keeps_the_reports_its_violations_need(tmp_path, monkeypatch):
    """A tuning trial that reported the held-out metric in every report (regular reports: read from the
    text) and one past the exposure: load_run finds both violations, at their steps, as the whole-line reader
    does, and keeps those trials' reports."""
    from bench.synthetic_run import make_run

    run = make_run(
        tmp_path / "run",
        arms=("sgd", "adam"),
        seeds=2,
        tune_trials=3,
        reports_per_trial=4,
        with_failures=False,
    )
    peek = [
        {"step": s, "metrics": {"val_acc": 0.5, "test_acc": 0.4}, "time_s": s * 0.1}
        for s in (2, 3, 4)
    ]
    past = [{"step": s, "metrics": {"val_acc": 0.5}, "time_s": s * 0.1} for s in (1, 4, 9)]
    with open(run / "trials.jsonl", "a") as f:
        f.write(json.dumps({**_record(peek), "trial_id": "peek", "exposure": 4}) + "\n")
        f.write(json.dumps({**_record(past), "trial_id": "past", "exposure": 9}) + "\n")
    if BUILT:
        line = (run / "trials.jsonl").read_bytes().splitlines()[-1]
        assert rf.scanned_trial(line, "line 1") is not None  # read from the text, not parsed whole
    columnar = tables.load_run(run)
    found = {
        (v["trial_id"], v["kind"], v["step"])
        for v in columnar.violations
        if v["trial_id"] in ("peek", "past")
    }
    assert found == {("peek", "heldout_in_tuning", 2), ("past", "report_past_budget", 9)}

    def records_only(self, notes, metrics=None):
        return ((r, None) for r in self.iter_trials(notes))

    monkeypatch.setattr(rf.RunFolder, "iter_trial_columns", records_only)
    general = tables.load_run(run)
    assert columnar.violations == general.violations and columnar.heldout == general.heldout
    pd.testing.assert_frame_equal(columnar.reports, general.reports)
