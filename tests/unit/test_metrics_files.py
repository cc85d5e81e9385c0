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

from planner._core.errors import TrialProtocolError
from planner._trial.metrics_files import (
    MetricsFileTail,
    MetricsReader,
    MetricsSpec,
    csv_table,
    jsonl_table,
    trainer_state_table,
)


class LightningCsvWriter:
    """Lightning's _ExperimentWriter.log_metrics/save, on bytes in memory (same algorithm, no fsspec)."""

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
    base = dict(file="metrics.csv", format="csv", step="epoch", names={"val_acc": "val_acc"}, require="val_acc",
                step_base=0)
    return MetricsSpec(**{**base, **kw})


def lightning_epochs(writer: LightningCsvWriter, epochs: range, batches: int = 2) -> None:
    step = 0
    for epoch in epochs:
        for _ in range(batches):
            step += 1
            writer.log_metrics({"train_loss": 1.0 / step, "epoch": epoch}, step)
        writer.log_metrics({"val_acc": 0.5 + epoch / 10, "val_loss": 1.0 - epoch / 10, "epoch": epoch}, step)
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
        {"epoch": "0", "val_acc": "0.5"}, {"epoch": "1", "val_acc": "0.6"}]
    assert len(csv_table(b"epoch,val_acc,x\n0,0.5,1\n1,0.6", final=True).rows) == 1
    assert csv_table(b"epoch,val_acc", final=True).columns == ["epoch", "val_acc"]


def test_csv_row_with_more_cells_than_the_header_is_a_protocol_error():
    with pytest.raises(TrialProtocolError, match="line 2 has 3 cells, the header has 2"):
        csv_table(b"epoch,val_acc\n0,0.5,9\n", where="m.csv")


def test_steps_must_increase_and_name_the_rows():
    reader = MetricsReader(spec(step_base=1))
    with pytest.raises(TrialProtocolError, match=r"line 3: step 1 does not follow step 2 of line 2"):
        reader.feed(b"epoch,val_acc\n2,0.5\n1,0.6\n")


def test_a_row_with_the_metric_but_no_step_or_a_fractional_step_is_an_error():
    with pytest.raises(TrialProtocolError, match="no step 'epoch'"):
        MetricsReader(spec()).feed(b"epoch,val_acc\n,0.5\n")
    with pytest.raises(TrialProtocolError, match="whole number"):
        MetricsReader(spec()).feed(b"epoch,val_acc\n0.5,0.5\n")
    assert MetricsReader(spec()).feed(b"epoch,val_acc\n2.0,0.5\n") == [(3, {"val_acc": 0.5})]


def test_non_numbers_are_errors_and_nan_is_a_number():
    with pytest.raises(TrialProtocolError, match="'val_acc' is 'high', not a number"):
        MetricsReader(spec()).feed(b"epoch,val_acc\n0,high\n")
    (step, metrics), = MetricsReader(spec()).feed(b"epoch,val_acc\n0,nan\n")
    assert step == 1 and math.isnan(metrics["val_acc"])


def test_names_map_planner_metrics_to_columns_and_only_those_are_read():
    reader = MetricsReader(spec(names={"val_acc": "valid/acc", "loss": "valid/loss"}))
    content = b"epoch,valid/acc,valid/loss,lr\n0,0.5,0.7,0.1\n1,0.6,,0.1\n"
    assert reader.feed(content) == [(1, {"val_acc": 0.5, "loss": 0.7}), (2, {"val_acc": 0.6})]


def test_jsonl_rows_skip_rows_without_the_metric_and_torn_lines():
    lines = [{"step": 1, "loss": 0.9}, {"step": 1, "val_acc": 0.5}, {"step": 2, "val_acc": 0.6, "note": None}]
    content = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    reader = MetricsReader(spec(format="jsonl", step="step", step_base=1))
    assert reader.feed(content + b'{"step": 3, "val') == [(1, {"val_acc": 0.5}), (2, {"val_acc": 0.6})]
    assert reader.feed(content + b'{"step": 3, "val', final=True) == []  # torn at the end: skipped
    assert jsonl_table(content).columns == ["step", "loss", "val_acc"]


def test_jsonl_line_that_is_not_an_object_is_an_error():
    with pytest.raises(TrialProtocolError, match="line 2 is a JSON list"):
        jsonl_table(b'{"step": 1}\n[1, 2]\n', where="log.jsonl")
    with pytest.raises(TrialProtocolError, match="line 1 is not JSON"):
        jsonl_table(b"step=1\n", where="log.jsonl")


def trainer_state(history: list[dict]) -> bytes:
    """What transformers' TrainerState.save_to_json writes: the dataclass as JSON, indent 2, sorted keys."""
    state = {"best_metric": None, "epoch": history[-1]["epoch"] if history else 0, "global_step": 0,
             "is_hyper_param_search": False, "log_history": history, "max_steps": 30, "num_train_epochs": 3,
             "total_flos": 0, "train_batch_size": 8, "trial_name": None, "trial_params": None}
    return (json.dumps(state, indent=2, sort_keys=True) + "\n").encode()


def test_trainer_state_log_history_rewritten_whole_at_each_save():
    history = [{"epoch": 0.5, "learning_rate": 1e-3, "loss": 0.8, "step": 5},
               {"epoch": 1.0, "eval_accuracy": 0.7, "eval_loss": 0.6, "step": 10}]
    reader = MetricsReader(spec(format="hf_trainer_state", step="step", step_base=1,
                                names={"val_acc": "eval_accuracy"}))
    assert reader.feed(trainer_state(history)) == [(10, {"val_acc": 0.7})]
    history += [{"epoch": 1.5, "loss": 0.5, "step": 15}, {"epoch": 2.0, "eval_accuracy": 0.8, "step": 20}]
    whole = trainer_state(history)
    assert reader.feed(whole[: len(whole) // 2]) == []  # caught mid-write: not whole JSON yet
    assert reader.feed(whole) == [(20, {"val_acc": 0.8})]
    assert "eval_accuracy" in trainer_state_table(whole).columns


def test_trainer_state_by_epoch_counts_the_float_epochs():
    history = [{"epoch": 1.0, "eval_accuracy": 0.7, "step": 10}, {"epoch": 2.0, "eval_accuracy": 0.8, "step": 20}]
    reader = MetricsReader(spec(format="hf_trainer_state", step="epoch", step_base=1,
                                names={"val_acc": "eval_accuracy"}))
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
    assert "never appeared" in tail.nothing_read() and "nothing else was written" in tail.nothing_read()
    folder = tmp_path / "logs" / "version_0"
    folder.mkdir(parents=True)
    path = folder / "metrics.csv"
    path.write_bytes(b"epoch,step,train_loss\n0,1,0.9\n")
    assert tail.read_new() == []
    assert "never held 'val_acc'" in tail.nothing_read() and "epoch, step, train_loss" in tail.nothing_read()
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
