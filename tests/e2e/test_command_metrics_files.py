"""A script's own metrics log, tailed by run_command: real subprocesses, a stand-in Trial.

The errors a user meets: the file never appears (the message lists what the
Hydra folder did hold), it never holds the metric (the message lists its
columns), steps that go back, and a script that also calls planner.report.
Early stopping stops the script while it still runs.
"""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from planner import TrialProtocolError
from planner._core.errors import CommandMetricsError
from planner._trial.command import run_command
from planner._trial.metrics_files import MetricsSpec
from tests.trial_double import StopTrial, TrialDouble

CSV = MetricsSpec(
    file="logs/*.csv",
    format="csv",
    step="epoch",
    names={"val_acc": "val_acc"},
    require="val_acc",
    step_base=0,
)


def _run(tmp_path: Path, body: str, spec: MetricsSpec = CSV, trial: TrialDouble | None = None):
    """Run `body` as a script whose argv ends with hydra.run.dir=<attempt>/hydra (no Hydra
    needed)."""
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys, time\nout = sys.argv[-1].split('=', 1)[1].strip(\"'\")\n"
        "os.makedirs(out, exist_ok=True)\n" + textwrap.dedent(body)
    )
    trial = trial or TrialDouble(dir=str(tmp_path / "trial"), budget=3)
    return trial, run_command(
        [sys.executable, str(script)], [], trial, cwd=tmp_path, metrics=spec, kill_grace_s=1.0
    )


def test_rows_become_reports_as_the_script_writes_them(tmp_path):
    trial, result = _run(
        tmp_path,
        """
        os.makedirs(out + '/logs')
        with open(out + '/logs/m.csv', 'w') as f:
            f.write('epoch,train_loss,val_acc\\n')
            for epoch in range(3):
                f.write(f'{epoch},0.5,\\n{epoch},,{0.5 + epoch / 10}\\n')
                f.flush()
    """,
    )
    assert trial.reports == [(1, {"val_acc": 0.5}), (2, {"val_acc": 0.6}), (3, {"val_acc": 0.7})]
    assert result.reports == 3


def test_a_file_that_never_appears_names_what_the_folder_held(tmp_path):
    with pytest.raises(CommandMetricsError) as error:
        _run(tmp_path, "open(out + '/metrics.csv', 'w').write('epoch,val_acc\\n0,0.5\\n')\n")
    message = str(error.value)
    assert "'logs/*.csv' never appeared" in message and "metrics.csv" in message


def test_a_file_that_never_holds_the_metric_names_its_columns(tmp_path):
    with pytest.raises(CommandMetricsError) as error:
        _run(
            tmp_path,
            "os.makedirs(out + '/logs')\n"
            "open(out + '/logs/m.csv', 'w').write('epoch,step,valid_acc\\n0,1,0.5\\n')\n",
        )
    message = str(error.value)
    assert (
        "never held 'val_acc'" in message
        and "epoch, step, valid_acc" in message
        and "m.csv" in message
    )


def test_steps_that_go_back_stop_the_script(tmp_path):
    with pytest.raises(TrialProtocolError, match="step 1 does not follow step 2"):
        _run(
            tmp_path,
            """
            os.makedirs(out + '/logs')
            with open(out + '/logs/m.csv', 'w') as f:
                f.write('epoch,val_acc\\n1,0.5\\n0,0.6\\n')
            time.sleep(30)
            open('survived', 'w').close()
        """,
        )
    assert not (tmp_path / "survived").exists()  # stopped, not waited for


def test_metrics_file_and_planner_report_together_are_refused(tmp_path):
    with pytest.raises(CommandMetricsError, match="use one or the other"):
        _run(
            tmp_path,
            """
            import planner
            os.makedirs(out + '/logs')
            open(out + '/logs/m.csv', 'w').write('epoch,val_acc\\n0,0.5\\n')
            planner.report(1, val_acc=0.5)
        """,
        )


def test_early_stopping_stops_the_script_mid_run(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=50, stop_after=2)
    with pytest.raises(StopTrial):
        _run(
            tmp_path,
            """
            os.makedirs(out + '/logs')
            with open(out + '/logs/m.csv', 'w') as f:
                f.write('epoch,val_acc\\n')
                for epoch in range(50):
                    f.write(f'{epoch},0.5\\n')
                    f.flush()
                    print('epoch', epoch, flush=True)
                    time.sleep(0.6)
            print('finished', flush=True)
        """,
            trial=trial,
        )
    assert trial.steps == [1, 2]
    (stdout,) = (tmp_path / "trial").glob("attempt-*/stdout.log")
    printed = stdout.read_text()
    # stopped mid-run: its 50 epochs would take 30 s
    assert "finished" not in printed and printed.count("epoch") < 50, printed


def test_jsonl_and_trainer_state_through_the_runner(tmp_path):
    jsonl = MetricsSpec(
        file="log.jsonl", format="jsonl", step="it", names={"val_acc": "acc"}, require="val_acc"
    )
    (tmp_path / "a").mkdir()
    trial, _ = _run(
        tmp_path / "a",
        """
        with open(out + '/log.jsonl', 'w') as f:
            for it in (1, 2, 3):
                f.write('{"it": %d, "loss": 1}\\n{"it": %d, "acc": 0.%d}\\n' % (it, it, it))
    """,
        jsonl,
    )
    assert trial.reports == [(1, {"val_acc": 0.1}), (2, {"val_acc": 0.2}), (3, {"val_acc": 0.3})]
    state = MetricsSpec(
        file="**/trainer_state.json",
        format="hf_trainer_state",
        step="step",
        names={"val_acc": "eval_accuracy"},
        require="val_acc",
    )
    (tmp_path / "b").mkdir()
    trial, _ = _run(
        tmp_path / "b",
        """
        import json
        history = []
        for step in (1, 2, 3):
            history.append({"step": step, "eval_accuracy": step / 10, "epoch": float(step)})
            os.makedirs(f'{out}/checkpoint-{step}')
            json.dump({"log_history": history}, open(f'{out}/checkpoint-{step}/trainer_state.json', 'w'))
    """,
        state,
    )
    assert trial.steps == [1, 2, 3] and trial.last("val_acc") == 0.3


PRINTED = MetricsSpec(
    file=None,
    format="stdout",
    step="step",
    names={"val_acc": "val_acc", "loss": "loss"},
    require="val_acc",
    pattern=r"^(?:epoch (?P<step>\d+) val_acc (?P<val_acc>\S+)|loss (?P<loss>\S+))$",
)


def test_printed_lines_become_reports_and_a_train_line_joins_the_next_evaluation(tmp_path):
    trial, result = _run(
        tmp_path,
        """
        for epoch in range(1, 4):
            print(f'loss {1 / epoch}')
            print(f'epoch {epoch} val_acc {0.5 + epoch / 10}')
        print('done', file=sys.stderr)
        """,
        spec=PRINTED,
    )
    assert trial.reports == [
        (1, {"val_acc": 0.6, "loss": 1.0}),
        (2, {"val_acc": 0.7, "loss": 0.5}),
        (3, {"val_acc": 0.8, "loss": 1 / 3}),
    ]
    assert "epoch 3 val_acc 0.8" in (Path(result.attempt_dir) / "stdout.log").read_text()


def test_printed_lines_on_stderr_are_read_when_the_contract_says_so(tmp_path):
    from dataclasses import replace

    trial, _ = _run(
        tmp_path,
        "for e in (1, 2, 3): print(f'epoch {e} val_acc 0.5', file=sys.stderr)\n",
        spec=replace(PRINTED, stream="stderr"),
    )
    assert [step for step, _ in trial.reports] == [1, 2, 3]


def test_a_pattern_that_never_matched_fails_with_the_last_lines_printed(tmp_path):
    with pytest.raises(CommandMetricsError) as error:
        _run(tmp_path, "print('Epoch 1 accuracy=0.5')\nprint('Epoch 2 accuracy=0.6')\n", PRINTED)
    message = str(error.value)
    assert "matched metrics.pattern" in message
    assert "Epoch 1 accuracy=0.5 | Epoch 2 accuracy=0.6" in message


def test_early_stopping_stops_a_printing_script_mid_run(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=50, stop_after=2)
    with pytest.raises(StopTrial):
        _run(
            tmp_path,
            """
            for epoch in range(1, 51):
                print(f'epoch {epoch} val_acc 0.5')
                time.sleep(0.2)
            print('ran to its end')
            """,
            spec=PRINTED,
            trial=trial,
        )
    (attempt,) = (tmp_path / "trial").glob("attempt-*")
    assert "ran to its end" not in (attempt / "stdout.log").read_text()
    assert len(trial.reports) == 2


def test_a_log_written_in_the_working_folder_names_it_and_the_contract_line_that_fixes_it(tmp_path):
    with pytest.raises(CommandMetricsError) as error:
        _run(
            tmp_path,
            "os.makedirs('logs', exist_ok=True)\n"
            "open('logs/m.csv', 'w').write('epoch,val_acc\\n0,0.5\\n')\n",
        )
    message = str(error.value)
    assert f"{tmp_path / 'logs' / 'm.csv'} appeared in the folder the script runs in" in message
    assert "`output_dir: ${hydra:runtime.output_dir}`" in message
