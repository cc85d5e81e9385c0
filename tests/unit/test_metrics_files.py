"""Metrics read from an app's own log (planner._trial.metrics_files): pure parsing on bytes.

The CSV cases follow Lightning's CSVLogger (lightning/fabric/loggers/csv_logs.py,
_ExperimentWriter): a header of the sorted keys seen so far, `step` always among
them, train and validation rows written apart with empty cells, and the whole
file rewritten with a wider header when a new key appears.
"""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from planner import TrialProtocolError
from planner._trial.metrics_files import (
    MetricsFileTail,
    MetricsReader,
    MetricsSpec,
    csv_table,
    jsonl_table,
    results_values,
    tensorboard_table,
    trainer_state_table,
)


class LightningCsvWriter:
    """Lightning's _ExperimentWriter.log_metrics/save, on bytes in memory (same algorithm, no
    fsspec)."""

    def __init__(self):
        self.metrics: list[dict] = []
        self.keys: list[str] = []
        self.content = b""

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.metrics.append({**metrics, "step": step})

    def save(self) -> None:
        if not self.metrics:
            return
        new_keys = set().union(*self.metrics) - set(self.keys)
        self.keys.extend(new_keys)
        self.keys.sort()
        exists = bool(self.content)
        if new_keys and exists:  # rewrite the file with the new header
            old = list(csv.DictReader(io.StringIO(self.content.decode(), newline="")))
            self.content = b""
            self._write(old, header=True)
        self._write(self.metrics, header=not exists)
        self.metrics = []

    def _write(self, rows, header):
        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=self.keys)
        if header:
            writer.writeheader()
        writer.writerows(rows)
        self.content += out.getvalue().encode()


def spec(**kw) -> MetricsSpec:
    base = dict(
        file="metrics.csv",
        format="csv",
        step="epoch",
        names={"val_acc": "val_acc"},
        require="val_acc",
        step_base=0,
    )
    return MetricsSpec(**{**base, **kw})


def lightning_epochs(writer: LightningCsvWriter, epochs: range, batches: int = 2) -> None:
    step = 0
    for epoch in epochs:
        for _ in range(batches):
            step += 1
            writer.log_metrics({"train_loss": 1.0 / step, "epoch": epoch}, step)
        writer.log_metrics(
            {"val_acc": 0.5 + epoch / 10, "val_loss": 1.0 - epoch / 10, "epoch": epoch}, step
        )
        writer.save()


def test_lightning_layout_sparse_rows_give_one_report_per_validation_epoch():
    writer = LightningCsvWriter()
    lightning_epochs(writer, range(3))
    header = writer.content.decode().splitlines()[0]
    assert header == "epoch,step,train_loss,val_acc,val_loss"  # sorted, step included
    reader = MetricsReader(spec(names={"val_acc": "val_acc", "val_loss": "val_loss"}))
    reports = reader.feed(writer.content)
    assert [s for s, _ in reports] == [1, 2, 3]  # epochs 0, 1, 2 with step_base 0
    assert reports[0][1] == {"val_acc": 0.5, "val_loss": 1.0}
    assert reports[2][1]["val_acc"] == pytest.approx(0.7)


def test_a_csv_that_pandas_wrote_with_its_index_is_read():
    """`pd.DataFrame(rows).to_csv(path)` (index=True, the default) writes a first column with no
    name; every trial of a new user's script failed on 'an empty or repeated column name'."""
    import pandas as pd

    data = (
        pd.DataFrame([{"epoch": e, "val_acc": 0.5 + e / 10} for e in range(1, 4)]).to_csv().encode()
    )
    assert data.decode().splitlines()[0] == ",epoch,val_acc"
    reports = MetricsReader(spec(step_base=1)).feed(data, final=True)
    assert reports == [(1, {"val_acc": 0.6}), (2, {"val_acc": 0.7}), (3, {"val_acc": 0.8})]
    for header in (
        b"epoch,,val_acc\n",
        b"epoch,val_acc,epoch\n",
    ):  # an unnamed column elsewhere, a repeated one
        with pytest.raises(TrialProtocolError, match="empty or repeated column name"):
            csv_table(header + b"1,2,3\n")


def test_lightning_rewrite_with_a_wider_header_yields_only_new_rows():
    writer = LightningCsvWriter()
    writer.log_metrics({"train_loss": 0.9, "epoch": 0}, 1)
    writer.save()  # the first file holds train rows only
    reader = MetricsReader(spec())
    assert reader.feed(writer.content) == []
    assert reader.columns == ["epoch", "step", "train_loss"]
    before = writer.content
    writer.log_metrics({"val_acc": 0.6, "epoch": 0}, 1)
    writer.save()  # new keys: the file is rewritten with a wider header
    assert writer.content.splitlines()[0] != before.splitlines()[0]
    assert reader.feed(writer.content) == [(1, {"val_acc": 0.6})]
    lightning_epochs(writer, range(1, 3))
    assert [s for s, _ in reader.feed(writer.content)] == [2, 3]
    assert reader.feed(writer.content) == []  # the same content again: nothing new


def test_a_file_caught_mid_rewrite_waits_for_the_rest():
    writer = LightningCsvWriter()
    lightning_epochs(writer, range(3))
    reader = MetricsReader(spec())
    assert len(reader.feed(writer.content)) == 3
    truncated = writer.content[:40]  # the writer truncated the file and wrote the header and a bit
    assert reader.feed(truncated) == []
    lightning_epochs(writer, range(3, 4))
    assert [s for s, _ in reader.feed(writer.content)] == [4]
    with pytest.raises(TrialProtocolError, match="fewer than the"):
        reader.feed(truncated, final=True)


def test_a_partial_last_line_is_read_once_complete():
    content = b"epoch,val_acc\n0,0.5\n1,0.6"
    reader = MetricsReader(spec())
    assert reader.feed(content) == [(1, {"val_acc": 0.5})]
    assert reader.feed(content + b"5\n") == [(2, {"val_acc": 0.65})]


def test_at_the_end_an_unterminated_whole_row_counts_a_torn_one_does_not():
    assert [r for _, r in csv_table(b"epoch,val_acc\n0,0.5\n1,0.6", final=True).rows] == [
        {"epoch": "0", "val_acc": "0.5"},
        {"epoch": "1", "val_acc": "0.6"},
    ]
    assert len(csv_table(b"epoch,val_acc,x\n0,0.5,1\n1,0.6", final=True).rows) == 1
    assert csv_table(b"epoch,val_acc", final=True).columns == ["epoch", "val_acc"]


def test_csv_row_with_more_cells_than_the_header_is_a_protocol_error():
    with pytest.raises(TrialProtocolError, match="line 2 has 3 cells, the header has 2"):
        csv_table(b"epoch,val_acc\n0,0.5,9\n", where="m.csv")


def test_steps_must_increase_and_name_the_rows():
    reader = MetricsReader(spec(step_base=1))
    with pytest.raises(
        TrialProtocolError, match=r"line 3: step 1 does not follow step 2 of line 2"
    ):
        reader.feed(b"epoch,val_acc\n2,0.5\n1,0.6\n")


def test_a_row_with_the_metric_but_no_step_or_a_fractional_step_is_an_error():
    with pytest.raises(TrialProtocolError, match="no step 'epoch'"):
        MetricsReader(spec()).feed(b"epoch,val_acc\n,0.5\n")
    with pytest.raises(
        TrialProtocolError,
        match="whole number: the metric was logged between two whole values.*metrics.step: step",
    ):  # and how to read it instead
        MetricsReader(spec()).feed(b"epoch,val_acc\n0.5,0.5\n")
    assert MetricsReader(spec()).feed(b"epoch,val_acc\n2.0,0.5\n") == [(3, {"val_acc": 0.5})]


def test_non_numbers_are_errors_and_nan_is_a_number():
    with pytest.raises(TrialProtocolError, match="'val_acc' is 'high', not a number"):
        MetricsReader(spec()).feed(b"epoch,val_acc\n0,high\n")
    ((step, metrics),) = MetricsReader(spec()).feed(b"epoch,val_acc\n0,nan\n")
    assert step == 1 and math.isnan(metrics["val_acc"])


def test_names_map_planner_metrics_to_columns_and_only_those_are_read():
    reader = MetricsReader(spec(names={"val_acc": "valid/acc", "loss": "valid/loss"}))
    content = b"epoch,valid/acc,valid/loss,lr\n0,0.5,0.7,0.1\n1,0.6,,0.1\n"
    assert reader.feed(content) == [(1, {"val_acc": 0.5, "loss": 0.7}), (2, {"val_acc": 0.6})]


def test_jsonl_rows_skip_rows_without_the_metric_and_torn_lines():
    lines = [
        {"step": 1, "loss": 0.9},
        {"step": 1, "val_acc": 0.5},
        {"step": 2, "val_acc": 0.6, "note": None},
    ]
    content = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    reader = MetricsReader(spec(format="jsonl", step="step", step_base=1))
    assert reader.feed(content + b'{"step": 3, "val') == [
        (1, {"val_acc": 0.5}),
        (2, {"val_acc": 0.6}),
    ]
    assert reader.feed(content + b'{"step": 3, "val', final=True) == []  # torn at the end: skipped
    assert jsonl_table(content).columns == ["step", "loss", "val_acc"]


def test_jsonl_line_that_is_not_an_object_is_an_error():
    with pytest.raises(TrialProtocolError, match="line 2 is a JSON list"):
        jsonl_table(b'{"step": 1}\n[1, 2]\n', where="log.jsonl")
    with pytest.raises(TrialProtocolError, match="line 1 is not JSON"):
        jsonl_table(b"step=1\n", where="log.jsonl")


def trainer_state(history: list[dict]) -> bytes:
    """What transformers' TrainerState.save_to_json writes: the dataclass as JSON, indent 2, sorted
    keys."""
    state = {
        "best_metric": None,
        "epoch": history[-1]["epoch"] if history else 0,
        "global_step": 0,
        "is_hyper_param_search": False,
        "log_history": history,
        "max_steps": 30,
        "num_train_epochs": 3,
        "total_flos": 0,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }
    return (json.dumps(state, indent=2, sort_keys=True) + "\n").encode()


def test_trainer_state_log_history_rewritten_whole_at_each_save():
    history = [
        {"epoch": 0.5, "learning_rate": 1e-3, "loss": 0.8, "step": 5},
        {"epoch": 1.0, "eval_accuracy": 0.7, "eval_loss": 0.6, "step": 10},
    ]
    reader = MetricsReader(
        spec(
            format="hf_trainer_state", step="step", step_base=1, names={"val_acc": "eval_accuracy"}
        )
    )
    assert reader.feed(trainer_state(history)) == [(10, {"val_acc": 0.7})]
    history += [
        {"epoch": 1.5, "loss": 0.5, "step": 15},
        {"epoch": 2.0, "eval_accuracy": 0.8, "step": 20},
    ]
    whole = trainer_state(history)
    assert reader.feed(whole[: len(whole) // 2]) == []  # caught mid-write: not whole JSON yet
    assert reader.feed(whole) == [(20, {"val_acc": 0.8})]
    assert "eval_accuracy" in trainer_state_table(whole).columns


def test_trainer_state_by_epoch_counts_the_float_epochs():
    history = [
        {"epoch": 1.0, "eval_accuracy": 0.7, "step": 10},
        {"epoch": 2.0, "eval_accuracy": 0.8, "step": 20},
    ]
    reader = MetricsReader(
        spec(
            format="hf_trainer_state", step="epoch", step_base=1, names={"val_acc": "eval_accuracy"}
        )
    )
    assert [s for s, _ in reader.feed(trainer_state(history))] == [1, 2]


def test_trainer_state_that_is_no_trainer_state_is_an_error():
    with pytest.raises(TrialProtocolError, match="no `log_history`"):
        trainer_state_table(b'{"epoch": 1}')
    with pytest.raises(TrialProtocolError, match="not JSON"):
        trainer_state_table(b'{"log_history": [', final=True)


def test_without_names_the_held_out_metric_is_dropped_during_tuning():
    full = spec(names={"val_acc": "val_acc", "test_acc": "test_acc"})
    assert dict(full.without("test_acc").names) == {"val_acc": "val_acc"}
    assert full.without("val_acc") is full  # the required metric stays
    assert MetricsSpec.from_dict(full.to_dict()) == full


# ------------------------------------------------------------------ the tail, on real files


def test_tail_finds_the_newest_glob_match_and_reads_as_it_grows(tmp_path):
    tail = MetricsFileTail(tmp_path, spec(file="logs/version_*/metrics.csv"))
    assert tail.read_new() == []
    assert (
        "never appeared" in tail.nothing_read()
        and "nothing else was written" in tail.nothing_read()
    )
    folder = tmp_path / "logs" / "version_0"
    folder.mkdir(parents=True)
    path = folder / "metrics.csv"
    path.write_bytes(b"epoch,step,train_loss\n0,1,0.9\n")
    assert tail.read_new() == []
    assert (
        "never held 'val_acc'" in tail.nothing_read()
        and "epoch, step, train_loss" in tail.nothing_read()
    )
    path.write_bytes(b"epoch,step,train_loss,val_acc\n0,1,0.9,\n0,1,,0.5\n")
    assert tail.read_new() == [(1, {"val_acc": 0.5})]
    with open(path, "ab") as f:
        f.write(b"1,2,,0.6")
    assert tail.read_new() == []
    assert tail.finish() == ([(2, {"val_acc": 0.6})], None)


def test_tail_mid_run_parse_error_is_raised_only_when_it_persists(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"epoch,val_acc\n0,0.5,1\n")
    tail = MetricsFileTail(tmp_path, spec())
    assert tail.read_new() == []  # perhaps caught mid-rewrite: read again later
    import time

    time.sleep(0.25)
    with pytest.raises(TrialProtocolError, match="has 3 cells"):
        tail.read_new()


def test_tail_names_what_the_folder_holds_when_the_file_never_appears(tmp_path):
    (tmp_path / "train.log").write_text("x")
    tail = MetricsFileTail(tmp_path, spec(file="metrics.csv"))
    tail.finish()
    message = tail.nothing_read()
    assert "'metrics.csv' never appeared" in message and "train.log" in message


def test_a_failing_feed_changes_nothing_so_the_next_read_fails_the_same_way():
    reader = MetricsReader(spec(step_base=1))
    bad = b"epoch,val_acc\n2,0.5\n1,0.6\n"
    for _ in range(2):
        with pytest.raises(TrialProtocolError, match="step 1 does not follow step 2"):
            reader.feed(bad)
    assert reader.seen == 0 and reader.last_step is None


# ------------------------------------------------------------------ frameworks' own logs, as they
# write them

DATA = __import__("pathlib").Path(__file__).parent / "data"
LIGHTNING_CSV = (
    DATA / "lightning_metrics.csv"
).read_bytes()  # examples/lightning, 3 epochs, as Lightning 2.6 wrote it
LIGHTNING_NAMES = {
    "val_acc": "val_acc",
    "val_loss": "val_loss",
    "train_loss": "train_loss_epoch",
    "test_acc": "test_acc",
}


def lightning_spec(heldout: bool = True, **kw) -> MetricsSpec:
    full = spec(names=LIGHTNING_NAMES, heldout="test_acc", **kw)
    return full if heldout else full.without("test_acc")


def csv_column(content: bytes, name: str) -> list[float]:
    return [float(r[name]) for r in csv.DictReader(io.StringIO(content.decode())) if r[name]]


def fed_line_by_line(reader: MetricsReader, content: bytes) -> list[tuple[int, list]]:
    """(lines read, reports) at each growth of the file, then the reports at the script's end."""
    lines = content.splitlines(keepends=True)
    out = [(n, reader.feed(b"".join(lines[:n]))) for n in range(1, len(lines) + 1)]
    return [(n, r) for n, r in out if r] + [(len(lines), reader.feed(content, final=True))]


def test_lightning_csv_train_validation_and_test_rows_merge_into_one_report_per_epoch():
    reader = MetricsReader(lightning_spec())
    reports = reader.feed(LIGHTNING_CSV, final=True)
    assert [s for s, _ in reports] == [
        1,
        2,
        3,
    ]  # epochs 0..2; the test row (epoch 3) is no report of its own
    assert [m["train_loss"] for _, m in reports] == csv_column(LIGHTNING_CSV, "train_loss_epoch")
    assert [m["val_acc"] for _, m in reports] == csv_column(LIGHTNING_CSV, "val_acc")
    assert [m["val_loss"] for _, m in reports] == csv_column(LIGHTNING_CSV, "val_loss")
    # trainer.test()'s row after fit (its own epoch, no val_acc) is the last report's held-out value
    assert reports[-1][1]["test_acc"] == csv_column(LIGHTNING_CSV, "test_acc")[0]
    assert all("test_acc" not in m for _, m in reports[:-1])
    assert reader.notes() == []


def test_lightning_csv_read_as_it_grows_gives_the_same_reports_without_waiting_for_the_next_epoch():
    whole = MetricsReader(lightning_spec(heldout=False)).feed(LIGHTNING_CSV, final=True)
    grown = fed_line_by_line(MetricsReader(lightning_spec(heldout=False)), LIGHTNING_CSV)
    assert [r for _, reports in grown for r in reports] == whole
    rows = list(csv.DictReader(io.StringIO(LIGHTNING_CSV.decode())))
    epoch_end = [
        i + 2 for i, r in enumerate(rows) if r["train_loss_epoch"]
    ]  # file lines of the epoch-end train rows
    # each epoch's report is handed on as soon as its epoch-end train row is read (an
    # early-stopping rule sees it then)
    assert [n for n, _ in grown[:-1]] == epoch_end


def test_during_tuning_the_test_row_is_not_read_and_nothing_waits_for_it():
    reports = MetricsReader(lightning_spec(heldout=False)).feed(LIGHTNING_CSV)
    assert [s for s, _ in reports] == [1, 2, 3] and all("test_acc" not in m for _, m in reports)


def test_the_held_out_report_waits_for_the_test_row_then_is_handed_on():
    reader = MetricsReader(lightning_spec())
    without_test = LIGHTNING_CSV[: LIGHTNING_CSV.rstrip(b"\n").rfind(b"\n") + 1]
    assert [s for s, _ in reader.feed(without_test)] == [
        1,
        2,
    ]  # the last epoch waits: test_acc may still come
    ((step, metrics),) = reader.feed(LIGHTNING_CSV)
    assert step == 3 and metrics["test_acc"] == csv_column(LIGHTNING_CSV, "test_acc")[0]


def test_a_rewrite_with_the_test_columns_keeps_train_validation_and_test_values():
    writer = (
        LightningCsvWriter()
    )  # Lightning's writer: the test row's new columns rewrite the whole file
    step = 0
    for epoch in range(2):
        for _ in range(3):
            step += 1
            writer.log_metrics({"train_loss_step": 1.0 / step, "epoch": epoch}, step)
            writer.save()
        writer.log_metrics({"val_acc": 0.5 + epoch / 10, "val_loss": 0.9, "epoch": epoch}, step)
        writer.save()
        writer.log_metrics({"train_loss_epoch": 1.0 / (epoch + 1), "epoch": epoch}, step)
        writer.save()
    reader = MetricsReader(lightning_spec())
    assert [s for s, _ in reader.feed(writer.content)] == [1]
    header = writer.content.splitlines()[0]
    writer.log_metrics({"test_acc": 0.75, "test_loss": 0.8, "epoch": 2}, step + 1)
    writer.save()
    assert writer.content.splitlines()[0] != header  # rewritten with the wider header
    assert reader.feed(writer.content) == [
        (2, {"val_acc": 0.6, "val_loss": 0.9, "train_loss": 0.5, "test_acc": 0.75})
    ]


def test_rows_before_a_report_and_epochs_without_validation_add_to_the_next_report():
    content = (
        b"epoch,step,train_loss,val_acc\n"
        b"0,5,0.9,\n"  # epoch 0: no validation
        b"1,10,0.8,\n"
        b"1,10,,0.6\n"  # validated every second epoch
        b"2,15,0.7,\n3,20,0.6,\n3,20,,0.7\n"
    )
    reports = MetricsReader(spec(names={"val_acc": "val_acc", "train_loss": "train_loss"})).feed(
        content, final=True
    )
    assert reports == [
        (2, {"train_loss": 0.8, "val_acc": 0.6}),
        (4, {"train_loss": 0.6, "val_acc": 0.7}),
    ]


def test_a_name_no_row_holds_is_a_note_and_does_not_hold_reports_back_past_the_next_row():
    reader = MetricsReader(
        spec(names={**LIGHTNING_NAMES, "train_loss": "train_loss"}, heldout="test_acc")
    )
    grown = fed_line_by_line(reader, LIGHTNING_CSV)
    assert [s for _, reports in grown for s, _ in reports] == [1, 2, 3]
    (note,) = reader.notes()
    assert "'train_loss' to 'train_loss', which no row of" in note and "train_loss_epoch" in note
    assert "'train_loss' was not reported" in note


def test_a_held_out_metric_that_never_came_is_a_note():
    no_test = LIGHTNING_CSV[: LIGHTNING_CSV.rstrip(b"\n").rfind(b"\n") + 1]
    reader = MetricsReader(lightning_spec())
    assert [s for s, _ in reader.feed(no_test, final=True)] == [1, 2, 3]
    assert any("'test_acc' to 'test_acc', which no row" in n for n in reader.notes())


def test_a_test_row_before_any_report_is_a_note_not_a_value():
    reader = MetricsReader(lightning_spec())
    content = b"epoch,step,test_acc,val_acc\n0,1,0.7,\n0,2,,0.5\n"
    assert reader.feed(content, final=True) == [(1, {"val_acc": 0.5})]
    assert any("holds 'test_acc' but no report came before it" in n for n in reader.notes())


def test_a_second_value_of_the_metric_at_the_same_step_is_an_error():
    with pytest.raises(TrialProtocolError, match="line 3: step 1 does not follow step 1 of line 2"):
        MetricsReader(spec()).feed(b"epoch,val_acc\n0,0.5\n0,0.6\n")


HF_STATE = (
    DATA / "hf_trainer_state.json"
).read_bytes()  # examples/hf_trainer after save_state(), 3 epochs
HF_NAMES = {
    "val_acc": "eval_accuracy",
    "val_loss": "eval_loss",
    "train_loss": "loss",
    "grad_norm": "grad_norm",
    "test_acc": "test_accuracy",
}


def hf_spec(**kw) -> MetricsSpec:
    return MetricsSpec(
        **{
            **dict(
                file="hf/**/trainer_state.json",
                format="hf_trainer_state",
                step="epoch",
                names=HF_NAMES,
                require="val_acc",
                heldout="test_acc",
            ),
            **kw,
        }
    )


def test_trainer_state_test_entry_from_evaluate_is_the_held_out_metric():
    history = json.loads(HF_STATE)["log_history"]
    reports = MetricsReader(hf_spec()).feed(HF_STATE, final=True)
    assert [s for s, _ in reports] == [1, 2, 3]
    assert [m["val_acc"] for _, m in reports] == [
        e["eval_accuracy"] for e in history if "eval_accuracy" in e
    ]
    assert [m["train_loss"] for _, m in reports] == [e["loss"] for e in history if "loss" in e]
    assert reports[-1][1]["test_acc"] == next(
        e["test_accuracy"] for e in history if "test_accuracy" in e
    )
    tuning = MetricsReader(hf_spec().without("test_acc")).feed(HF_STATE)
    assert [m for _, m in tuning] == [
        {k: v for k, v in m.items() if k != "test_acc"} for _, m in reports
    ]


def _write(path, data: bytes, mtime: float):
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def _state_upto(epochs: int, test: bool = False) -> bytes:
    state = json.loads(HF_STATE)
    state["log_history"] = [
        e
        for e in state["log_history"]
        if e["epoch"] <= epochs
        and ("train_runtime" not in e or test)
        and ("test_accuracy" not in e or test)
    ]
    return json.dumps(state, indent=2).encode()


def test_the_newest_trainer_state_of_several_is_read(tmp_path):
    tail = MetricsFileTail(tmp_path, hf_spec())
    _write(tmp_path / "hf" / "checkpoint-34" / "trainer_state.json", _state_upto(1), 1000)
    assert [
        s for s, _ in tail.read_new()
    ] == []  # waits: test_acc may still come, and a later row flushes it
    _write(tmp_path / "hf" / "checkpoint-68" / "trainer_state.json", _state_upto(2), 2000)
    assert [s for s, _ in tail.read_new()] == [1]
    _write(
        tmp_path / "hf" / "trainer_state.json", _state_upto(3, test=True), 3000
    )  # save_state() at the end
    final, _ = tail.finish()
    assert tail.path == tmp_path / "hf" / "trainer_state.json"
    assert [s for s, _ in final] == [2, 3] and "test_acc" in final[-1][1]
    assert tail.notes() == []


def test_save_metrics_results_file_is_a_held_out_source(tmp_path):
    results = (DATA / "hf_test_results.json").read_bytes()
    _write(tmp_path / "hf" / "checkpoint-102" / "trainer_state.json", _state_upto(3), 1000)
    _write(tmp_path / "hf" / "test_results.json", results, 2000)
    tail = MetricsFileTail(tmp_path, hf_spec(heldout_file="hf/test_results.json"))
    assert [s for s, _ in tail.read_new()] == [1, 2]
    final, _ = tail.finish()
    assert (
        final == [(3, final[0][1])]
        and final[0][1]["test_acc"] == json.loads(results)["test_accuracy"]
    )
    missing = MetricsFileTail(tmp_path, hf_spec(heldout_file="hf/eval_results.json"))
    assert "test_acc" not in missing.finish()[0][-1][1]
    assert any("'hf/eval_results.json' never appeared" in n for n in missing.notes())
    assert hf_spec(heldout_file="x.json").without("test_acc").heldout_file is None


def test_results_file_must_be_a_json_object():
    with pytest.raises(TrialProtocolError, match="is a JSON list"):
        results_values(b"[1]", where="test_results.json")
    assert results_values(b'{"test_accuracy": 0.9, "epoch": 3.0, "x": null}') == {
        "test_accuracy": 0.9,
        "epoch": 3.0,
    }


def _tensorboard_events(folder, with_test: bool = True) -> None:
    """What Lightning's TensorBoardLogger writes: one add_scalar per logged value, step = global
    step."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    step = 0
    for epoch in range(3):
        step += 5
        writer.add_scalar("train_loss_step", 1.0 / step, step)
        writer.add_scalar("epoch", epoch, step)
        for tag, value in (
            ("val_acc", 0.5 + epoch / 10),
            ("val_loss", 1.0 - epoch / 10),
            ("epoch", epoch),
        ):
            writer.add_scalar(tag, value, step)
        for tag, value in (("train_loss_epoch", 1.0 / (epoch + 1)), ("epoch", epoch)):
            writer.add_scalar(tag, value, step)
    if with_test:
        writer.add_scalar("test_acc", 0.75, step)
        writer.add_scalar("epoch", 3, step)
    writer.close()


def test_tensorboard_events_read_with_the_tensorboard_reader(tmp_path):
    _tensorboard_events(tmp_path / "tb")
    (path,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    table = tensorboard_table(path)
    assert {"step", "epoch", "val_acc", "train_loss_epoch", "test_acc"} <= set(table.columns)
    names = {"val_acc": "val_acc", "train_loss": "train_loss_epoch", "test_acc": "test_acc"}
    reader = MetricsReader(spec(format="tensorboard", names=names, heldout="test_acc"))
    reports = reader.feed_table(table, final=True)
    assert [s for s, _ in reports] == [1, 2, 3]
    assert reports[0][1] == pytest.approx({"val_acc": 0.5, "train_loss": 1.0})
    assert reports[-1][1]["test_acc"] == pytest.approx(0.75)
    tail = MetricsFileTail(
        tmp_path,
        spec(
            file="tb/events.out.tfevents.*",
            format="tensorboard",
            names=names,
            step="step",
            step_base=1,
        ),
    )
    assert [s for s, _ in tail.finish()[0]] == [5, 10, 15]  # by the global step instead


def test_tensorboard_missing_is_a_clear_error(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    with pytest.raises(
        TrialProtocolError, match="needs|tensorboard package, which is not installed"
    ):
        tensorboard_table(tmp_path / "events.out.tfevents.x")


def test_a_file_that_is_not_an_event_file_yields_no_rows_and_the_tail_says_so(tmp_path):
    pytest.importorskip("tensorboard")
    path = tmp_path / "events.out.tfevents.x"
    path.write_bytes(b"epoch,val_acc\n0,0.5\n" * 20)
    assert (
        tensorboard_table(path).rows == []
    )  # the loader stops at a record it cannot frame: never garbage
    tail = MetricsFileTail(tmp_path, spec(file="events.out.tfevents.*", format="tensorboard"))
    assert tail.finish() == ([], None)
    assert (
        "never held 'val_acc'" in tail.nothing_read() and "its columns: step" in tail.nothing_read()
    )


# ------------------------------------------------------------------ a folder of event files, read
# as one log

FIT = [(0, "hp_metric", -1.0)] + [
    row
    for epoch in range(3)
    for row in (
        (5 * epoch + 4, "train_loss_step", 1.0 / (epoch + 1)),
        (5 * epoch + 4, "epoch", epoch),
        (5 * epoch + 5, "val_loss", 1.0 - epoch / 10),
        (5 * epoch + 5, "val_acc", 0.5 + epoch / 10),
        (5 * epoch + 5, "epoch", epoch),
        (5 * epoch + 5, "train_loss_epoch", 0.9 - epoch / 10),
        (5 * epoch + 5, "epoch", epoch),
    )
]
TEST = [(0, "hp_metric", -1.0), (16, "test_loss", 0.4), (16, "test_acc", 0.75), (16, "epoch", 3)]
TB_NAMES = {
    "val_acc": "val_acc",
    "val_loss": "val_loss",
    "train_loss": "train_loss_epoch",
    "test_acc": "test_acc",
}
FIT_FILE, TEST_FILE = (
    "events.out.tfevents.1796188811.vm.7440.0",
    "events.out.tfevents.1796188814.vm.7440.1",
)


def _event_bytes(tmp_path, scalars) -> bytes:
    """An event file as TensorBoardLogger's SummaryWriter writes it: one add_scalar per (step, tag,
    value)."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path / f"writer-{len(list(tmp_path.glob('writer-*')))}"
    writer = SummaryWriter(str(folder))
    for step, tag, value in scalars:
        writer.add_scalar(tag, value, step)
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path.read_bytes()


def _place(path, data: bytes, mtime: int | None = None) -> None:
    """Write `data` at `path` (the writer's name chosen here: the order does not hang on the
    clock)."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def tb_spec(heldout: bool = True, **kw) -> MetricsSpec:
    full = spec(
        **{
            "file": "lightning_logs/version_*/events.out.tfevents.*",
            "format": "tensorboard",
            "names": TB_NAMES,
            "heldout": "test_acc",
            **kw,
        }
    )
    return full if heldout else full.without("test_acc")


def test_fit_then_test_event_files_of_one_folder_are_read_as_one_log(tmp_path):
    """trainer.fit() then trainer.test(): Lightning's logger closes its writer after fit and opens
    a second file."""
    fit, test = _event_bytes(tmp_path, FIT), _event_bytes(tmp_path, TEST)
    folder = tmp_path / "lightning_logs" / "version_0"
    tail = MetricsFileTail(tmp_path, tb_spec())
    during_fit = []
    for n in range(
        1, len(fit) + 1
    ):  # read at every byte: a record half written, a row whose log call goes on
        _place(folder / FIT_FILE, fit[:n])
        during_fit += tail.read_new()
    assert [s for s, _ in during_fit] == [1, 2]  # the last epoch waits: test_acc may still come
    during_test = []
    for n in range(1, len(test) + 1):
        _place(folder / TEST_FILE, test[:n])
        during_test += tail.read_new()
    assert (
        during_test == []
    )  # its hp_metric row (step 0) hands on nothing; its last row may still grow
    final, _ = tail.finish()
    assert final == [
        (3, pytest.approx({"val_acc": 0.7, "val_loss": 0.8, "train_loss": 0.7, "test_acc": 0.75}))
    ]
    assert tail.files == [folder / FIT_FILE, folder / TEST_FILE] and tail.notes() == []
    read_at_the_end = MetricsFileTail(tmp_path, tb_spec()).finish()[0]
    assert read_at_the_end == during_fit + final
    tuning = MetricsFileTail(tmp_path, tb_spec(heldout=False))
    assert [s for s, _ in tuning.read_new()] == [
        1,
        2,
        3,
    ]  # nothing waits for the test row, which is not read


def test_the_event_files_are_read_in_name_order_as_tensorboard_reads_them(tmp_path):
    fit, test = _event_bytes(tmp_path, FIT), _event_bytes(tmp_path, TEST)
    folder = tmp_path / "lightning_logs" / "version_0"
    _place(folder / TEST_FILE, test, mtime=1000)  # the older by its time, the later by its name
    _place(folder / FIT_FILE, fit, mtime=2000)
    _place(
        folder / "hparams.yaml", b"lr: 0.1\n", mtime=3000
    )  # no event file: never read, never the newest
    _place(folder / (FIT_FILE + ".profile-empty"), b"", mtime=3000)
    tail = MetricsFileTail(tmp_path, tb_spec(file="lightning_logs/version_*/*"))
    final, _ = tail.finish()
    assert tail.files == [folder / FIT_FILE, folder / TEST_FILE]
    assert [s for s, _ in final] == [1, 2, 3] and final[-1][1]["test_acc"] == pytest.approx(0.75)


def test_the_newest_folder_is_the_log_and_a_shorter_one_names_the_switch(tmp_path):
    fit, short = _event_bytes(tmp_path, FIT), _event_bytes(tmp_path, FIT[:7])
    _place(tmp_path / "lightning_logs" / "version_0" / FIT_FILE, fit, mtime=1000)
    tail = MetricsFileTail(tmp_path, tb_spec(heldout=False))
    assert [s for s, _ in tail.read_new()] == [1, 2, 3]
    _place(
        tmp_path / "lightning_logs" / "version_1" / FIT_FILE, short, mtime=2000
    )  # a second Trainer's logger
    assert tail.read_new() == []  # mid-run: perhaps the new log is still growing
    with pytest.raises(TrialProtocolError) as error:
        tail.finish()
    message = str(error.value)
    assert "is now " + str(tmp_path / "lightning_logs" / "version_1") in message
    assert "no longer " + str(tmp_path / "lightning_logs" / "version_0") in message
    assert "second log" in message and "rewrote" not in message


def test_a_shorter_newest_csv_names_the_switch_too(tmp_path):
    _place(
        tmp_path / "logs" / "version_0" / "metrics.csv",
        b"epoch,val_acc\n0,0.5\n1,0.6\n",
        mtime=1000,
    )
    tail = MetricsFileTail(tmp_path, spec(file="logs/version_*/metrics.csv"))
    assert [s for s, _ in tail.read_new()] == [1, 2]
    _place(tmp_path / "logs" / "version_1" / "metrics.csv", b"epoch,test_acc\n2,0.7\n", mtime=2000)
    with pytest.raises(
        TrialProtocolError, match=r"is now .*version_1.*no longer .*version_0.*2 rows read so far"
    ):
        tail.finish()
    same = MetricsFileTail(tmp_path, spec(file="logs/version_0/metrics.csv"))
    assert [s for s, _ in same.read_new()] == [1, 2]
    _place(tmp_path / "logs" / "version_0" / "metrics.csv", b"epoch,val_acc\n0,0.5\n")
    with pytest.raises(
        TrialProtocolError,
        match="now holds 1 rows, fewer than the 2 already read: the script rewrote",
    ):
        same.finish()


def test_an_event_file_that_lost_rows_is_refused_by_name(tmp_path):
    fit, test = _event_bytes(tmp_path, FIT), _event_bytes(tmp_path, TEST)
    folder = tmp_path / "lightning_logs" / "version_0"
    _place(folder / FIT_FILE, fit)
    _place(folder / TEST_FILE, test)
    tail = MetricsFileTail(tmp_path, tb_spec())
    assert [s for s, _ in tail.read_new()] == [
        1,
        2,
    ]  # the last waits for the test row, the file's last
    _place(folder / FIT_FILE, fit[: len(fit) // 2])
    with pytest.raises(
        TrialProtocolError,
        match=f"{FIT_FILE} now holds \\d+ rows, fewer than the \\d+ already read from",
    ):
        tail.finish()


def test_rows_written_to_an_earlier_event_file_after_a_later_one_was_read_are_refused(tmp_path):
    fit, test = _event_bytes(tmp_path, FIT), _event_bytes(tmp_path, TEST)
    folder = tmp_path / "lightning_logs" / "version_0"
    _place(folder / FIT_FILE, fit[: len(fit) // 2])
    _place(folder / TEST_FILE, test)  # two writers at once in one folder
    tail = MetricsFileTail(tmp_path, tb_spec())
    tail.read_new()
    _place(folder / FIT_FILE, fit)
    with pytest.raises(
        TrialProtocolError, match=f"{FIT_FILE} gained rows after {TEST_FILE}.*two writers"
    ):
        tail.finish()
    earlier = MetricsFileTail(tmp_path, tb_spec())
    earlier.read_new()
    _place(
        folder / "events.out.tfevents.1796188800.vm.7000.0", test
    )  # a file that sorts before those read
    with pytest.raises(TrialProtocolError, match="1796188800.vm.7000.0 gained rows after"):
        earlier.finish()


def test_a_metric_the_event_files_hold_under_an_evaluation_name_is_named_before_the_budget_is_spent(
    tmp_path,
):
    from planner._trial.reports import ReportTail, WithSplits

    renamed = [
        (step, {"val_acc": "val_acc_epoch"}.get(tag, tag), value) for step, tag, value in FIT
    ]
    _place(tmp_path / "lightning_logs" / "version_0" / FIT_FILE, _event_bytes(tmp_path, renamed))
    (tmp_path / "reports.jsonl").touch()
    source = WithSplits(
        MetricsFileTail(tmp_path, tb_spec()), ReportTail(tmp_path / "reports.jsonl")
    )
    assert source.read_new() == []
    misnamed = source.misnamed()
    source.close()
    assert (
        misnamed is not None
        and misnamed.step == 1
        and misnamed.metrics["val_acc_epoch"] == pytest.approx(0.5)
    )
    assert "the event files in" in misnamed.message and "val_acc_epoch" in misnamed.message


def test_a_spec_with_a_held_out_source_crosses_to_a_worker_and_without_one_reads_as_before():
    full = hf_spec(heldout_file="hf/test_results.json")
    assert MetricsSpec.from_dict(full.to_dict()) == full
    assert "heldout" not in spec().to_dict() and "heldout_file" not in spec().to_dict()
    tuning = full.without("test_acc")
    assert tuning.heldout is None and tuning.heldout_file is None and "test_acc" not in tuning.names


def _misnamed_after_each_epoch(tmp_path, names: dict[str, str], epochs: int, **kw):
    """misnamed() looked at after each epoch a Lightning CSV log grows by: the epoch it first named
    the metric."""
    from planner._trial.reports import ReportTail, WithSplits

    writer, found = LightningCsvWriter(), []
    (tmp_path / "reports.jsonl").touch()
    source = WithSplits(
        MetricsFileTail(tmp_path, spec(names=names, require="val_acc", **kw)),
        ReportTail(tmp_path / "reports.jsonl"),
    )
    for epoch in range(epochs):
        lightning_epochs(writer, range(epoch, epoch + 1))
        _place(tmp_path / "metrics.csv", writer.content)
        assert source.read_new() == []
        misnamed = source.misnamed()
        if misnamed is not None:
            found.append((epoch, misnamed))
    source.close()
    return found


def test_a_misspelt_column_is_named_once_the_log_held_its_near_spelling_at_two_steps(tmp_path):
    """`valacc` for Lightning's `val_acc`: no evaluation affix, a typo. Named at the second
    validated epoch, with that epoch spent, rather than after every epoch of the budget."""
    found = _misnamed_after_each_epoch(tmp_path, {"val_acc": "valacc"}, epochs=6)
    (epoch, misnamed), *_ = found
    assert epoch == 1 and misnamed.step == 2  # epochs 0 and 1 (step_base 0) held val_acc
    assert misnamed.metrics["val_acc"] == pytest.approx(0.6)
    assert (
        "has no column 'valacc'" in misnamed.message
        and "did you mean `val_acc`?" in misnamed.message
    )
    assert "it held `val_acc` at 2 steps" in misnamed.message


@pytest.mark.parametrize("column", ["train_acc", "val_accuracy_top5", "val_f1"])
def test_a_column_only_loosely_like_the_metric_never_ends_the_trial(tmp_path, column):
    """The metric logged late (at the end only, say) beside others of a related name is not
    misspelt."""
    assert _misnamed_after_each_epoch(tmp_path, {"val_acc": column}, epochs=4) == []
