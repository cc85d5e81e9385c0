"""Metrics read from the lines a script prints (`metrics: {format: stdout, pattern}`): the
patterns the docs show, on the lines real scripts print, as the trial reads them
(PrintedMetricsTail,
fed bytes as a pipe hands them over)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import TrialProtocolError
from planner._trial.metrics_files import MetricsSpec
from planner._trial.metrics_lines import PrintedMetricsTail, line_row, printed_reports

DOCS = Path(__file__).resolve().parents[2] / "docs" / "command-trainables.md"

# nanoGPT's train.py at each evaluation:
#   print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
# and between:
#   print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")
NANOGPT = r"^step (?P<step>\d+): train loss (?P<train_loss>[\d.]+), val loss (?P<val_loss>[\d.]+)"
NANOGPT_LINES = b"""tokens per iteration will be: 16,384
found vocab_size = 65 (inside data/shakespeare_char/meta.pkl)
Initializing a new model from scratch
number of parameters: 10.65M
step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2654, time 29150.33ms, mfu -100.00%
iter 10: loss 3.2498, time 101.94ms, mfu 3.66%
step 250: train loss 1.9712, val loss 2.0734
saving checkpoint to out-shakespeare-char
iter 250: loss 2.0270, time 5431.90ms, mfu 3.34%
step 500: train loss 1.5353, val loss 1.7290
"""

# Keras: `Epoch 3/10` above each epoch's line; Keras 3 writes its metrics sorted, Keras 2 in
# compile order, and a terminal's progress bar rewrites the line with \r
KERAS = (
    r"^Epoch (?P<step>\d+)/\d+$"
    r"|(?=.*val_loss: (?P<val_loss>[\d.]+))(?=.*val_accuracy: (?P<val_acc>[\d.]+))"
)
KERAS_LINES = (
    "Epoch 1/3\n"
    "\r 100/1875 ━━━━━━━━━━━━━━━━━━━━ 2s 1ms/step - accuracy: 0.6011 - loss: 1.2001"
    "\r1875/1875 ━━━━━━━━━━━━━━━━━━━━ 3s 1ms/step - accuracy: 0.8775 - loss: 0.4335 "
    "- val_accuracy: 0.9588 - val_loss: 0.1381\n"
    "Epoch 2/3\n"
    "1875/1875 [==============================] - 5s 2ms/step - loss: 0.1450 - accuracy: 0.9570 "
    "- val_loss: 0.1047 - val_accuracy: 0.9681\n"
    "Epoch 3/3\n"
    "1875/1875 ━━━━━━━━━━━━━━━━━━━━ 3s 1ms/step - accuracy: 0.9706 - loss: 0.0988 "
    "- val_accuracy: 0.9717 - val_loss: 0.0931\n"
).encode()

# a plain loop: `for e in range(epochs): ... print(f"epoch {e} val_acc {a}")`, counted from 0
PLAIN = r"^epoch (?P<step>\d+) val_acc (?P<val_acc>\S+)$"
PLAIN_LINES = b"epoch 0 val_acc 0.61\nepoch 1 val_acc 0.7\nepoch 2 val_acc nan\n"

# karpathy/makemore's makemore.py, as it prints (its loss line every 10 steps shares the prefix)
MAKEMORE = (
    r"^step (?P<step>\d+) train loss: (?P<train_loss>[\d.]+) test loss: (?P<test_loss>[\d.]+)"
)
MAKEMORE_LINES = b"""step 490 | loss 2.4119 | step time 3.48ms
step 500 | loss 2.2403 | step time 3.42ms
step 500 train loss: 2.2813141345977783 test loss: 2.2922134399414062
test loss 2.2922134399414062 is the best so far, saving model to out/model.pt
step 1000 | loss 2.1975 | step time 3.98ms
step 1000 train loss: 2.2666871547698975 test loss: 2.259737491607666
"""


def spec(pattern: str, names: dict[str, str], require: str, step_base: int = 1) -> MetricsSpec:
    return MetricsSpec(
        file=None,
        format="stdout",
        step="step",
        names=names,
        require=require,
        step_base=step_base,
        pattern=pattern,
    )


def read_in_pieces(tail: PrintedMetricsTail, data: bytes, size: int) -> list:
    """What a trial forwards when the pipe hands the output over `size` bytes at a time."""
    out = []
    for at in range(0, len(data), size):
        tail.write(data[at : at + size])
        out += tail.read_new()
    return out + tail.finish()[0]


@pytest.mark.parametrize("pattern", [NANOGPT, KERAS, PLAIN, MAKEMORE])
def test_the_docs_show_each_tested_pattern(pattern):
    assert pattern in DOCS.read_text().replace("\\|", "|")  # a table cell escapes its |


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_nanogpt_evaluation_lines_are_reports(size):
    tail = PrintedMetricsTail(
        spec(NANOGPT, {"val_loss": "val_loss", "train_loss": "train_loss"}, "val_loss")
    )
    assert read_in_pieces(tail, NANOGPT_LINES, size) == [
        (0, {"val_loss": 4.2823, "train_loss": 4.2874}),
        (250, {"val_loss": 2.0734, "train_loss": 1.9712}),
        (500, {"val_loss": 1.729, "train_loss": 1.5353}),
    ]


@pytest.mark.parametrize("size", [3, 4096])
def test_a_keras_epoch_line_takes_the_step_of_the_epoch_line_above_it(size):
    tail = PrintedMetricsTail(
        spec(KERAS, {"val_acc": "val_acc", "val_loss": "val_loss"}, "val_acc")
    )
    assert read_in_pieces(tail, KERAS_LINES, size) == [
        (1, {"val_acc": 0.9588, "val_loss": 0.1381}),
        (2, {"val_acc": 0.9681, "val_loss": 0.1047}),
        (3, {"val_acc": 0.9717, "val_loss": 0.0931}),
    ]


@pytest.mark.parametrize("size", [5, 4096])
def test_makemore_evaluation_lines_are_reports_and_its_loss_lines_are_not(size):
    tail = PrintedMetricsTail(
        spec(MAKEMORE, {"test_loss": "test_loss", "train_loss": "train_loss"}, "test_loss")
    )
    assert read_in_pieces(tail, MAKEMORE_LINES, size) == [
        (500, {"test_loss": 2.2922134399414062, "train_loss": 2.2813141345977783}),
        (1000, {"test_loss": 2.259737491607666, "train_loss": 2.2666871547698975}),
    ]


def test_a_plain_print_counted_from_zero():
    tail = PrintedMetricsTail(spec(PLAIN, {"val_acc": "val_acc"}, "val_acc", step_base=0))
    reports = read_in_pieces(tail, PLAIN_LINES, 5)
    assert [(step, m["val_acc"]) for step, m in reports[:2]] == [(1, 0.61), (2, 0.7)]
    assert reports[2][0] == 3 and reports[2][1]["val_acc"] != reports[2][1]["val_acc"]  # nan


def test_a_report_is_handed_on_as_soon_as_its_line_is_whole():
    tail = PrintedMetricsTail(spec(PLAIN, {"val_acc": "val_acc"}, "val_acc", step_base=0))
    tail.write(b"epoch 0 val_acc 0.5\nepoch 1 val_")
    assert tail.read_new() == [(1, {"val_acc": 0.5})]
    tail.write(b"acc 0.6\n")
    assert tail.read_new() == [(2, {"val_acc": 0.6})]


def test_the_last_unterminated_line_is_read_at_the_end():
    tail = PrintedMetricsTail(spec(PLAIN, {"val_acc": "val_acc"}, "val_acc", step_base=0))
    tail.write(b"epoch 0 val_acc 0.5")
    assert tail.read_new() == []
    assert tail.finish()[0] == [(1, {"val_acc": 0.5})]


def test_steps_that_go_back_fail_naming_the_line():
    tail = PrintedMetricsTail(spec(PLAIN, {"val_acc": "val_acc"}, "val_acc"))
    tail.write(b"epoch 3 val_acc 0.5\nepoch 2 val_acc 0.6\n")
    with pytest.raises(TrialProtocolError, match="line 2: step 2 does not follow step 3"):
        tail.read_new()


def test_a_pattern_that_never_matched_names_the_last_lines_printed():
    tail = PrintedMetricsTail(spec(PLAIN, {"val_acc": "val_acc"}, "val_acc"))
    tail.write(b"Epoch 1: acc=0.5\nEpoch 2: acc=0.6\n")
    tail.finish()
    message = tail.nothing_read()
    assert "no line of the 2 it printed to stdout matched metrics.pattern" in message
    assert "Epoch 1: acc=0.5 | Epoch 2: acc=0.6" in message


def test_a_line_is_a_row_of_its_matched_named_groups():
    import re

    regex = re.compile(r"step (?P<step>\d+)(?:, loss (?P<loss>\S+))?")
    assert line_row(regex, "step 3") == {"step": "3"}
    assert line_row(regex, "at step 3, loss 0.1") == {"step": "3", "loss": "0.1"}
    assert line_row(regex, "nothing") is None


def test_an_ended_attempt_is_read_from_its_log(tmp_path):
    log = tmp_path / "stdout.log"
    log.write_bytes(NANOGPT_LINES)
    tail = printed_reports(log, spec(NANOGPT, {"val_loss": "val_loss"}, "val_loss"))
    assert [step for step, _ in tail.read_new() + tail.finish()[0]] == [0, 250, 500]


# karpathy/minGPT's projects/adder: a step line every 10 iterations, both scores every 500 (from
# iteration 0), and a loop that ends at max_iters - 1: with max_iters 500 the only scores are at 0
MINGPT_ADDER = (
    r"^iter_dt [\d.]+ms; iter (?P<step>\d+): train loss [\d.]+$"
    r"|^test final score: \d+/\d+ = (?P<test_acc>[\d.]+)% correct"
)
MINGPT_ADDER_LINES = b"iter_dt 0.00ms; iter 0: train loss 2.30047\n" + (
    b"train final score: 3/4000 = 0.07% correct\ntest final score: 1/1000 = 0.10% correct\n"
    + b"".join(
        b"iter_dt 31.20ms; iter %d: train loss 1.%05d\n" % (i, 99999 - i)
        for i in range(10, 500, 10)
    )
)


def test_a_line_of_the_step_alone_says_how_far_the_script_trained():
    """The furthest step printed, evaluated there or not: a trial whose scores stopped at step 0
    is told the script trained on to 490 and its evaluations did not follow."""
    tail = PrintedMetricsTail(spec(MINGPT_ADDER, {"test_acc": "test_acc"}, "test_acc"))
    assert read_in_pieces(tail, MINGPT_ADDER_LINES, 7) == [(0, {"test_acc": 0.1})]
    assert tail.reached == 490
    evaluated_only = PrintedMetricsTail(spec(NANOGPT, {"val_loss": "val_loss"}, "val_loss"))
    read_in_pieces(evaluated_only, NANOGPT_LINES, 4096)
    assert evaluated_only.reached == 500  # nanoGPT's `iter N:` lines match nothing here
