"""Bring-your-own-script trainables: real subprocesses, real Hydra, a stand-in Trial."""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import command_trainable
from planner._contract.compose import compose_arms
from planner._contract.model import Contract
from planner._core.errors import (
    CommandConfigMismatchError,
    CommandFailedError,
    CommandMemoryError,
    CommandNoReportError,
    CommandTimeoutError,
    TrialProtocolError,
)
from planner._trial.command import run_command
from planner._trial.command_line import (
    command_argv,
    config_changes_as_overrides,
    format_override_value,
    overrides_for,
)
from planner._trial.reports import parse_report_line
from tests.trial_double import StopTrial, TrialDouble

APP = Path(__file__).resolve().parents[2] / "examples" / "hydra_app"


# ------------------------------------------------------------------ overrides


def _as_received(text: str):
    """What a Hydra app sees for the override `x=<text>`: Hydra's parser, then OmegaConf."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    (override,) = OverridesParser.create().parse_overrides([f"x={text}"])
    return OmegaConf.to_container(OmegaConf.create({"x": override.value()}), resolve=True)["x"]


@pytest.mark.parametrize(
    "value",
    [
        0,
        -3,
        10**12,
        0.1,
        1e-5,
        -2.5e10,
        float("inf"),
        float("-inf"),
        True,
        False,
        None,
        "adam",
        "true",
        "null",
        "1",
        "0.5",
        "nan",
        "",
        "a b",
        "it's",
        "a,b",
        "a=b",
        "[x]",
        "{y}",
        "trailing\\",
        "back\\'quote",
        "${model.width}",
        "\\${x}",
        "path/to/file.txt",
        "-dash",
        "A\n",
        # a final newline: `$` in a pattern matched before it (found by the property test)
        "back\\\n",
        [1, 2.5, "x y"],
        [[64, 64], [128]],
        {"a": 1, "b": "c d"},
    ],
)
def test_values_reach_the_app_unchanged(value):
    assert _as_received(format_override_value(value)) == value


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=20,
    )
)
def test_any_string_reaches_the_app_unchanged(text):
    assert _as_received(format_override_value(text)) == text


def test_nan_is_written_in_hydra_grammar():
    import math

    assert math.isnan(_as_received(format_override_value(float("nan"))))


def test_overrides_for_puts_sampled_values_after_the_arms_overrides():
    assert overrides_for(
        ["model=mlp", "optimizer=adam"], {"optimizer.lr": 0.01, "model.act": "gelu"}
    ) == ["model=mlp", "optimizer=adam", "optimizer.lr=0.01", "model.act=gelu"]


def test_config_changes_become_set_add_and_delete_overrides():
    arm = {"optimizer": {"lr": 0.1, "name": "sgd"}, "gone": 1}
    trial = {"optimizer": {"lr": 0.01, "name": "sgd", "nesterov": True}}
    assert config_changes_as_overrides(arm, trial) == [
        "~gone",
        "optimizer.lr=0.01",
        "+optimizer.nesterov=true",
    ]
    assert config_changes_as_overrides(arm, arm) == []


def test_command_is_split_without_a_shell_and_python_is_this_interpreter():
    assert command_argv("python train.py --name 'a b' ; rm -rf x") == [
        sys.executable,
        "train.py",
        "--name",
        "a b",
        ";",
        "rm",
        "-rf",
        "x",
    ]
    assert command_argv("/opt/py/bin/python3 t.py")[0] == "/opt/py/bin/python3"
    with pytest.raises(CommandFailedError, match="empty"):
        command_argv("  ")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "is not JSON"),
        ('{"step": 1}', "expected"),
        ('{"step": 1.5, "metrics": {"a": 1}}', "step must be an int"),
        ('{"step": 1, "metrics": {}}', "non-empty mapping"),
        ('{"step": 1, "metrics": {"a": "0.9"}}', "metric 'a' must be a number"),
        ('{"step": 1, "metrics": {"a": true}}', "metric 'a' must be a number"),
    ],
)
def test_malformed_report_lines_are_protocol_errors(line, message):
    with pytest.raises(TrialProtocolError, match=message):
        parse_report_line(line)


def test_report_lines_parse_nan_as_a_float():
    step, metrics = parse_report_line('{"step": 2, "metrics": {"loss": NaN, "acc": 1}}')
    assert step == 2 and metrics["acc"] == 1.0 and metrics["loss"] != metrics["loss"]


# ------------------------------------------------- the runner, with small scripts


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "script.py"
    path.write_text("import json, os, sys, time\nimport planner\n" + textwrap.dedent(body))
    return f"python {path.name}"


def _run(tmp_path, body, trial=None, **kwargs):
    trial = trial or TrialDouble(dir=str(tmp_path / "trial"))
    kwargs.setdefault("timeout_s", 30)
    kwargs.setdefault("hydra_run_dir", False)
    return trial, run_command(_script(tmp_path, body), [], trial, cwd=tmp_path, **kwargs)


# A script that is not stopped when it should be writes SURVIVED after waiting out SURVIVAL_S (far
# past the moment it should have been stopped); the test then finds the file. No clock is read.
SURVIVED = "survived"
SURVIVAL_S = 30


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


def test_reports_are_forwarded_while_the_script_runs(tmp_path):
    """The script waits, after its first report, for a file only the trial's first report
    creates."""
    gate = tmp_path / "gate"

    class GatedTrial(TrialDouble):
        def report(self, step, **metrics):
            super().report(step, **metrics)
            gate.touch()

    trial = GatedTrial(dir=str(tmp_path / "trial"), budget=3)
    _, result = _run(
        tmp_path,
        f"""
        planner.report(1, acc=0.5)
        while not os.path.exists({str(gate)!r}):
            time.sleep(0.01)
        planner.report(2, acc=0.75)
        planner.report(3, acc=1)
    """,
        trial=trial,
        timeout_s=20,
    )
    assert trial.reports == [(1, {"acc": 0.5}), (2, {"acc": 0.75}), (3, {"acc": 1.0})]
    assert result.reports == 3 and result.returncode == 0


def test_the_script_receives_the_trial_in_its_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_SEED", "999")  # a stale value from a parent must not leak
    trial = TrialDouble(
        dir=str(tmp_path / "trial"),
        seed=7,
        budget=4,
        arm="adamw",
        phase="confirm",
        id="confirm-adamw-s7",
    )
    _run(
        tmp_path,
        """
        names = ["PLANNER_SEED", "PLANNER_BUDGET", "PLANNER_ARM", "PLANNER_PHASE",
                 "PLANNER_TRIAL_ID", "PLANNER_TRIAL_DIR", "PLANNER_REPORT_FILE"]
        out = os.path.join(os.environ["PLANNER_TRIAL_DIR"], "env.json")
        json.dump({n: os.environ.get(n) for n in names}, open(out, "w"))
        planner.report(1, ok=1)
    """,
        trial=trial,
    )
    seen = json.loads((tmp_path / "trial" / "env.json").read_text())
    assert seen["PLANNER_SEED"] == "7" and seen["PLANNER_BUDGET"] == "4"
    assert (seen["PLANNER_ARM"], seen["PLANNER_PHASE"], seen["PLANNER_TRIAL_ID"]) == (
        "adamw",
        "confirm",
        "confirm-adamw-s7",
    )
    assert seen["PLANNER_TRIAL_DIR"] == str((tmp_path / "trial").resolve())
    assert seen["PLANNER_REPORT_FILE"] == str(
        (tmp_path / "trial" / "attempt-1" / "reports.jsonl").resolve()
    )


def test_each_run_gets_a_fresh_attempt_folder(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"))
    body = "planner.report(1, acc=0.5)\nprint('hello from', os.environ['PLANNER_REPORT_FILE'])\n"
    _run(tmp_path, body, trial=trial)
    retry = TrialDouble(dir=str(tmp_path / "trial"))
    _, result = _run(tmp_path, body, trial=retry)
    assert result.attempt_dir.endswith("attempt-2") and retry.reports == [(1, {"acc": 0.5})]
    assert "attempt-1" in (tmp_path / "trial" / "attempt-1" / "stdout.log").read_text()


def test_a_failing_script_raises_with_the_end_of_its_stderr(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"))
    with pytest.raises(CommandFailedError) as caught:
        _run(
            tmp_path,
            """
            planner.report(1, acc=0.5)
            for i in range(200):
                print(f"noise line {i}", file=sys.stderr)
            raise RuntimeError("the data loader broke")
        """,
            trial=trial,
        )
    error = caught.value
    assert error.returncode == 1
    assert "RuntimeError: the data loader broke" in error.stderr_tail
    assert "noise line 199" in error.stderr_tail and "noise line 100" not in error.stderr_tail
    assert len(error.stderr_tail.splitlines()) == 50
    assert "the data loader broke" in str(error)
    assert trial.reports == [(1, {"acc": 0.5})]  # what finished before the crash is kept
    assert "the data loader broke" in (tmp_path / "trial" / "attempt-1" / "stderr.log").read_text()


def test_a_script_killed_by_a_signal_says_which(tmp_path):
    with pytest.raises(CommandFailedError, match="SIGKILL"):
        _run(tmp_path, "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n")


def test_a_hanging_script_times_out_and_its_process_group_is_stopped(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"))
    with pytest.raises(CommandTimeoutError, match="time limit of 1 s") as caught:
        _run(
            tmp_path,
            f"""
            import subprocess
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            open("child.pid", "w").write(str(child.pid))
            planner.report(1, acc=0.5)
            time.sleep({SURVIVAL_S})
            open({SURVIVED!r}, "w").close()
            time.sleep(600)
        """,
            trial=trial,
            timeout_s=1,
        )
    assert isinstance(caught.value, TimeoutError)
    assert trial.reports == [(1, {"acc": 0.5})]
    assert not (tmp_path / SURVIVED).exists()  # stopped at its time limit, not long after
    assert not _alive(int((tmp_path / "child.pid").read_text()))


def test_when_trial_report_raises_the_script_is_stopped_and_the_error_re_raised(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=100, stop_after=2)
    with pytest.raises(StopTrial):
        _run(
            tmp_path,
            f"""
            open("script.pid", "w").write(str(os.getpid()))
            for step in range(1, 101):
                planner.report(step, acc=step / 100)
                time.sleep({SURVIVAL_S / 100})
            open({SURVIVED!r}, "w").close()
            time.sleep(600)
        """,
            trial=trial,
            timeout_s=2 * SURVIVAL_S,
        )
    assert trial.steps == [1, 2] and not (tmp_path / SURVIVED).exists()
    assert not _alive(int((tmp_path / "script.pid").read_text()))


def test_a_report_out_of_order_is_a_protocol_error(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"))
    with pytest.raises(TrialProtocolError, match="strictly increase"):
        _run(
            tmp_path,
            "planner.report(2, acc=0.5)\nplanner.report(1, acc=0.6)\ntime.sleep(600)\n",
            trial=trial,
        )


def test_a_malformed_report_line_names_the_file_and_line(tmp_path):
    with pytest.raises(
        TrialProtocolError, match=r"reports\.jsonl line 2: metric 'acc' must be a number"
    ):
        _run(
            tmp_path,
            """
            planner.report(1, acc=0.5)
            with open(os.environ["PLANNER_REPORT_FILE"], "a") as f:
                f.write('{"step": 2, "metrics": {"acc": "high"}}\\n')
        """,
        )


def test_a_torn_last_line_is_skipped_and_whole_lines_are_kept(tmp_path):
    trial, result = _run(
        tmp_path,
        """
        planner.report(1, acc=0.5)
        with open(os.environ["PLANNER_REPORT_FILE"], "a") as f:
            f.write('{"step": 2, "metr')
    """,
    )
    assert trial.reports == [(1, {"acc": 0.5})]
    assert result.torn_line == '{"step": 2, "metr'


def test_an_unterminated_but_whole_last_line_is_read(tmp_path):
    trial, result = _run(
        tmp_path,
        """
        with open(os.environ["PLANNER_REPORT_FILE"], "a") as f:
            f.write('{"step": 1, "metrics": {"acc": 0.5}}')
    """,
    )
    assert trial.reports == [(1, {"acc": 0.5})] and result.torn_line is None


def test_exiting_without_a_report_is_a_protocol_error(tmp_path):
    with pytest.raises(CommandNoReportError, match="without reporting anything") as caught:
        _run(tmp_path, "print('trained, but forgot to report')\n")
    assert isinstance(caught.value, TrialProtocolError)


def test_a_missing_program_is_a_clear_error(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"))
    with pytest.raises(CommandFailedError, match="cannot start no-such-program"):
        run_command("no-such-program --flag", [], trial, cwd=tmp_path)
    with pytest.raises(CommandFailedError, match="does not exist"):
        run_command("python x.py", [], trial, cwd=tmp_path / "nowhere")


def test_a_script_printing_50_mb_keeps_memory_and_the_log_bounded(tmp_path):
    cap = 1024 * 1024
    tracemalloc.start()
    try:
        _, result = _run(
            tmp_path,
            """
            line = "x" * 1023 + "\\n"
            block = line * 1024
            for _ in range(50):
                sys.stdout.write(block)
            print("THE LAST LINE")
            planner.report(1, acc=0.5)
        """,
            max_log_bytes=cap,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    log = Path(result.attempt_dir) / "stdout.log"
    assert log.stat().st_size < cap + 128 * 1024
    text = log.read_text()
    assert "bytes of output omitted here" in text and text.rstrip().endswith("THE LAST LINE")


def test_a_script_over_its_memory_limit_is_stopped(tmp_path):
    with pytest.raises(CommandMemoryError, match="over its limit of 64 MiB"):
        _run(
            tmp_path,
            """
            hog = b"x" * (256 * 1024 * 1024)
            time.sleep(600)
        """,
            max_memory_bytes=64 * 1024 * 1024,
        )


# ------------------------------------------------------ the example Hydra app


@pytest.fixture(scope="module")
def app_trainable():
    contract = Contract.model_validate(yaml.safe_load((APP / "contract.yaml").read_text()))
    composed = compose_arms(contract, APP)
    assert composed.problems == []
    return command_trainable(contract, APP, composed.configs), composed.configs


def _run_app(app_trainable, tmp_path, name, *, arm="sgd", seed=0, budget=3, changes=None):
    train, configs = app_trainable
    config = json.loads(json.dumps(configs[arm]))
    for path, value in (changes or {}).items():
        node = config
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    trial = TrialDouble(dir=str(tmp_path / name), seed=seed, budget=budget, arm=arm, id=name)
    train(config, trial)
    composed = yaml.safe_load(
        (tmp_path / name / "attempt-1" / "hydra" / ".hydra" / "config.yaml").read_text()
    )
    return trial, composed


def test_the_example_app_runs_with_seed_budget_and_arm_overrides(app_trainable, tmp_path):
    base, base_cfg = _run_app(app_trainable, tmp_path, "sgd-s0")
    again, _ = _run_app(app_trainable, tmp_path, "sgd-s0-again")
    other_seed, _ = _run_app(app_trainable, tmp_path, "sgd-s1", seed=1)
    momentum, momentum_cfg = _run_app(app_trainable, tmp_path, "momentum-s0", arm="momentum")

    assert base.steps == [1, 2, 3]  # the budget, not the config's 10 epochs
    assert set(base.reports[0][1]) == {"val_acc", "val_loss"}
    assert again.reports == base.reports  # a seed is a seed
    assert other_seed.reports != base.reports
    assert (base_cfg["optimizer"]["name"], momentum_cfg["optimizer"]["name"]) == ("sgd", "momentum")
    assert momentum.reports != base.reports  # the arm's override took effect
    assert (tmp_path / "sgd-s0" / "attempt-1" / "hydra" / "train.log").exists()


def test_sampled_values_reach_the_app(app_trainable, tmp_path):
    trial, composed = _run_app(
        app_trainable, tmp_path, "lr", budget=1, changes={"optimizer.lr": 0.3125}
    )
    assert composed["optimizer"]["lr"] == 0.3125
    assert trial.steps == [1]


def test_a_script_that_composes_another_config_is_stopped_before_reporting(tmp_path):
    trial = TrialDouble(dir=str(tmp_path / "trial"), budget=2)
    with pytest.raises(CommandConfigMismatchError, match=r"l2: contract 0.5, script 0.001"):
        run_command(
            "python train.py",
            ["optimizer=sgd"],
            trial,
            cwd=APP,
            timeout_s=60,
            expected_config={**_app_config(), "l2": 0.5},
        )
    assert trial.reports == []


def _app_config():
    contract = Contract.model_validate(yaml.safe_load((APP / "contract.yaml").read_text()))
    return compose_arms(contract, APP).configs["sgd"]


def test_the_trainable_pickles_for_ray_and_knows_its_limits(app_trainable):
    import pickle

    train, _ = app_trainable
    clone = pickle.loads(pickle.dumps(train))
    assert clone == train
    assert train.timeout_s == 120.0 and train.cwd == str(APP)
    assert train.arm_overrides == {"sgd": ("optimizer=sgd",), "momentum": ("optimizer=momentum",)}


def test_interpolated_keys_are_not_a_mismatch_and_a_relative_trial_dir_works(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text("lr: 0.1\npeak_lr: ${lr}\n")
    (tmp_path / "app.py").write_text(
        textwrap.dedent("""
        import hydra, planner

        @hydra.main(config_path="conf", config_name="config", version_base=None)
        def main(cfg):
            planner.report(1, peak_lr=cfg.peak_lr)

        main()
    """)
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the planner's folder is not the app's
    trial = TrialDouble(dir="trial", budget=1)
    # the planner's trial config holds peak_lr resolved before tuning changed lr
    run_command(
        "python app.py",
        ["lr=0.5"],
        trial,
        cwd=tmp_path,
        timeout_s=60,
        expected_config={"lr": 0.5, "peak_lr": 0.1},
    )
    assert trial.reports == [(1, {"peak_lr": 0.5})]
    assert (
        tmp_path / "elsewhere" / "trial" / "attempt-1" / "hydra" / ".hydra" / "config.yaml"
    ).exists()


def test_the_trainable_travels_as_plain_data_and_can_take_params_from_the_trial(
    app_trainable, tmp_path
):
    from planner import CommandTrainable

    train, configs = app_trainable
    plain = json.loads(json.dumps(train.to_dict()))
    assert CommandTrainable.from_dict(plain) == train

    without_configs = CommandTrainable.from_dict({**plain, "arm_configs": {}})
    trial = TrialDouble(dir=str(tmp_path / "t"), arm="momentum", seed=3)
    trial.params = {"optimizer.lr": 0.25}
    assert without_configs.trial_overrides(configs["momentum"], trial) == [
        "optimizer=momentum",
        "optimizer.lr=0.25",
    ]
    with_seed = CommandTrainable.from_dict({**plain, "seed_key": "seed", "budget_key": "epochs"})
    assert with_seed.trial_overrides(
        configs["sgd"], TrialDouble(dir="t", seed=3, budget=4, arm="sgd")
    ) == ["optimizer=sgd", "seed=3", "epochs=4"]


def test_a_sampled_value_that_did_not_reach_the_app_fails_the_trial(app_trainable, tmp_path):
    from planner import CommandTrainable

    train, configs = app_trainable
    blind = CommandTrainable.from_dict(
        {**train.to_dict(), "arm_configs": {}}
    )  # and the trial has no params
    config = json.loads(json.dumps(configs["sgd"]))
    config["optimizer"]["lr"] = 0.25
    trial = TrialDouble(dir=str(tmp_path / "t"), arm="sgd", budget=2)
    with pytest.raises(
        CommandConfigMismatchError, match=r"optimizer.lr: contract 0.25, script 0.05"
    ):
        blind(config, trial)
    assert trial.reports == []


# ------------------------------------------ the script ends on its own, a misnamed metric


def _command_spec(
    tmp_path,
    body,
    *,
    phase="confirm",
    metric="val_acc",
    heldout="test_acc",
    budget=3,
    retries=0,
    metrics=None,
    tid="trial",
):
    from planner import CommandTrainable
    from planner._trial.spec import TrialSpec

    command = CommandTrainable(
        command=_script(tmp_path, body),
        cwd=str(tmp_path),
        arm_overrides={"a": ()},
        check_config=False,
        metrics=metrics,
        heldout=heldout,
        timeout_s=60,
    )
    return TrialSpec(
        trial_id=tid,
        phase=phase,
        arm="a",
        seed=1,
        index=0,
        params={},
        config={},
        budget=budget,
        dir=str(tmp_path / tid),
        trainable="",
        metric=metric,
        heldout=heldout,
        retries=retries,
        extra={"command": command.to_dict()},
    )


@pytest.mark.parametrize(("code", "reruns"), [(28, True), (13, False)])
def test_a_script_that_died_of_an_oserror_records_its_errno(tmp_path, code, reruns):
    """A full disk (errno 28) in the script is the machine's, so the trial runs again on resume; a
    permission refused (errno 13) is the script's own failure, recorded."""
    from planner._store.resume import failed_for_the_disk
    from planner._trial.protocol import run_trial

    record = run_trial(
        _command_spec(
            tmp_path,
            f"""
        planner.report(1, val_acc=0.5)
        raise OSError({code}, os.strerror({code}), "checkpoint.bin")
    """,
        )
    )
    assert record["status"] == "failed" and record["errors"][-1]["errno"] == code
    assert (failed_for_the_disk(record) is not None) is reruns


def test_the_script_is_not_stopped_at_its_last_budget_step(tmp_path):
    """After its last report the script evaluates and saves; it is awaited, not stopped."""
    from planner._trial.protocol import run_trial

    record = run_trial(
        _command_spec(
            tmp_path,
            """
        for step in (1, 2, 3):
            planner.report(step, val_acc=0.5 + step / 10)
        time.sleep(1.0)  # the final evaluation on the test split, the saving
        open(os.path.join(os.environ["PLANNER_TRIAL_DIR"], "finished"), "w").write("saved")
    """,
        )
    )
    assert (tmp_path / "trial" / "finished").read_text() == "saved"
    assert record["exposure"] == 3 and record["status"] == "protocol_error"
    assert record["errors"][-1]["message"].startswith("metric test_acc never reported; got val_acc")


def test_a_metric_missing_from_the_first_report_ends_the_trial_at_once_with_the_near_name(tmp_path):
    from planner._trial.protocol import run_trial

    record = run_trial(
        _command_spec(
            tmp_path,
            f"""
        planner.report(1, eval_accuracy=0.5, eval_loss=0.9)
        time.sleep({SURVIVAL_S})
        open({SURVIVED!r}, "w").close()
        time.sleep(600)
    """,
            phase="tune",
            metric="accuracy",
            budget=5,
        )
    )
    assert not (tmp_path / SURVIVED).exists()  # ended at its first report
    assert record["status"] == "protocol_error" and record["attempts"] == 1
    assert "did you mean `eval_accuracy`?" in record["errors"][-1]["message"]
    assert record["exposure"] == 1 and [r["step"] for r in record["reports"]] == [
        1
    ]  # the compute spent counts


def test_a_log_holding_the_metric_under_an_evaluation_prefix_ends_the_trial_at_its_first_evaluation(
    tmp_path,
):
    """The Trainer logs `eval_accuracy`; the contract says `accuracy`: stopped at epoch 1 of 20,
    not after 20."""
    from planner._trial.metrics_files import MetricsSpec
    from planner._trial.protocol import run_trial

    metrics = MetricsSpec(
        file="trainer_state.json",
        format="hf_trainer_state",
        step="epoch",
        names={"accuracy": "accuracy"},
        require="accuracy",
    ).to_dict()
    record = run_trial(
        _command_spec(
            tmp_path,
            """
        out = os.path.join(os.path.dirname(os.environ["PLANNER_REPORT_FILE"]), "hydra")
        os.makedirs(out, exist_ok=True)
        history = []
        for epoch in range(1, 21):
            history.append({"epoch": epoch - 0.5, "step": 10 * epoch - 5, "loss": 1.0 / epoch, "grad_norm": 1.0})
            history.append({"epoch": float(epoch), "step": 10 * epoch, "eval_loss": 1.0 / epoch,
                            "eval_accuracy": 0.5 + epoch / 100, "eval_runtime": 0.1})
            json.dump({"log_history": history, "global_step": 10 * epoch}, open(os.path.join(out, "trainer_state.json"), "w"))
            time.sleep(2)
        open("survived", "w").close()
    """,
            phase="tune",
            metric="accuracy",
            heldout=None,
            budget=20,
            metrics=metrics,
        )
    )
    assert not (tmp_path / SURVIVED).exists()  # stopped at epoch 1, not left to run its 20
    message = record["errors"][-1]["message"]
    assert record["status"] == "protocol_error" and "did you mean `eval_accuracy`?" in message, (
        message
    )
    # the fix is the column's name in metrics.names (metric.name: eval_accuracy would be a P525):
    # the first report's own check, which names metric.name, spoke first
    assert "Fix `metrics.names`" in message and "metric.name must be" not in message, message
    assert record["exposure"] == 1  # its first evaluation was spent, and counted


def test_a_misspelt_column_ends_the_trial_at_its_second_evaluation(tmp_path):
    """`valacc` in the contract, `val_acc` in the CSV: no evaluation affix, a typo. Stopped at
    epoch 2 of 20."""
    from planner._trial.metrics_files import MetricsSpec
    from planner._trial.protocol import run_trial

    metrics = MetricsSpec(
        file="metrics.csv",
        format="csv",
        step="epoch",
        step_base=0,
        names={"val_acc": "valacc"},
        require="val_acc",
    ).to_dict()
    record = run_trial(
        _command_spec(
            tmp_path,
            """
        out = os.path.join(os.path.dirname(os.environ["PLANNER_REPORT_FILE"]), "hydra")
        os.makedirs(out, exist_ok=True)
        rows = ["epoch,step,train_loss,val_acc"]
        for epoch in range(20):
            rows += [f"{epoch},{10 * epoch + 5},{1 / (epoch + 1)},", f"{epoch},{10 * epoch + 9},,{0.5 + epoch / 100}"]
            open(os.path.join(out, "metrics.csv"), "w").write("\\n".join(rows) + "\\n")
            time.sleep(1.5)
        open("survived", "w").close()
    """,
            phase="tune",
            metric="val_acc",
            heldout=None,
            budget=20,
            metrics=metrics,
        )
    )
    assert not (tmp_path / SURVIVED).exists()  # stopped at epoch 2, not left to run its 20
    message = record["errors"][-1]["message"]
    assert record["status"] == "protocol_error" and "did you mean `val_acc`?" in message, message
    assert "held `val_acc` at 2 steps" in message and record["exposure"] == 2


@pytest.mark.parametrize(
    ("epochs", "every", "said"), [(5, 2, "did train"), (3, 1, "EarlyStopping")]
)
def test_a_last_step_trained_but_never_evaluated_is_named_as_such_not_as_early_stopping(
    tmp_path, epochs, every, said
):
    """Lightning's check_val_every_n_epoch=2 with 5 epochs: epoch 4 (step 5) is trained, not
    validated. The error said the script stopped early by itself; its log shows it trained to the
    end, and the error says so. A script that did stop early (3 epochs of 5, each validated) still
    hears of EarlyStopping: the test row after fit, which carries the epoch after the last one
    trained, counts for nothing."""
    from planner._trial.metrics_files import MetricsSpec
    from planner._trial.protocol import run_trial

    metrics = MetricsSpec(
        file="metrics.csv",
        format="csv",
        step="epoch",
        step_base=0,
        names={"val_acc": "val_acc", "train_loss": "train_loss"},
        require="val_acc",
    ).to_dict()
    record = run_trial(
        _command_spec(
            tmp_path,
            f"""
        out = os.path.join(os.path.dirname(os.environ["PLANNER_REPORT_FILE"]), "hydra")
        os.makedirs(out, exist_ok=True)
        rows = ["epoch,step,train_loss,val_acc,test_acc"]
        for epoch in range({epochs}):
            rows.append(f"{{epoch}},{{10 * epoch + 9}},{{1 / (epoch + 1)}},,")
            if epoch % {every} == {every} - 1:
                rows.append(f"{{epoch}},{{10 * epoch + 9}},,{{0.5 + epoch / 100}},")
        rows.append(f"{epochs},{10 * epochs},,,0.5")  # trainer.test() after fit: current_epoch, one past the last
        open(os.path.join(out, "metrics.csv"), "w").write("\\n".join(rows) + "\\n")
    """,
            phase="tune",
            metric="val_acc",
            heldout=None,
            budget=5,
            metrics=metrics,
        )
    )
    message = record["errors"][-1]["message"]
    # the exposure is what it trained (its log's rows reach step 5), not the last step it reported
    assert record["status"] == "protocol_error" and record["exposure"] == (
        5 if every == 2 else 3
    ), message
    assert said in message, message
    if every == 2:
        assert "did train to step 5" in message and "'val_acc' last at step 4" in message, message
        assert "check_val_every_n_epoch" in message and "EarlyStopping" not in message, message
    else:
        assert "did train" not in message, message


def test_a_failing_scripts_own_last_word_is_in_the_first_line_of_its_error(tmp_path):
    """A new user's typo (cfg.model.hiden) showed only "command exited with status 1" on the
    terminal; the cause was in stderr.log. The first line, which the progress and the run summary
    show, names it now."""
    from planner._core.records import first_line

    trial = TrialDouble(dir=str(tmp_path / "trial"))
    with pytest.raises(CommandFailedError) as caught:
        _run(
            tmp_path,
            """
            raise KeyError("Key 'hiden' is not in struct")
        """,
            trial=trial,
        )
    head = first_line(str(caught.value))
    assert head.startswith("command exited with status 1: KeyError:") and "hiden" in head, head


def test_a_failed_script_is_located_in_the_script_not_in_planner(tmp_path):
    """A script that called sys.exit(3) was reported 'where: File .../planner/_trial/command.py, in
    verdict': the record's traceback of a command's failure is the script's stderr, and the
    report's `where` reads it."""
    from planner._store.facts import failures
    from planner._trial.protocol import run_trial

    quiet = run_trial(
        _command_spec(tmp_path, "planner.report(1, val_acc=0.5)\nsys.exit(3)\n", tid="quiet")
    )
    raised = run_trial(
        _command_spec(
            tmp_path,
            "planner.report(1, val_acc=0.5)\nraise ValueError('bad batch')\n",
            tid="raised",
        )
    )
    assert quiet["status"] == raised["status"] == "failed"
    assert "planner" not in quiet["errors"][-1]["traceback"]
    where = {f["trial_id"]: f["where"] for f in failures([quiet, raised])}
    assert "planner/_trial" not in where["quiet"] and "planner/_trial" not in where["raised"], where
    assert where["raised"].startswith('File "') and "script.py" in where["raised"], where


def test_a_script_that_reported_its_whole_budget_and_did_not_exit_keeps_its_reports(tmp_path):
    """A leftover non-daemon thread kept a finished script alive past max_trial_time: the trial was
    a timeout with its three reports, and the arm incomplete. Its training and evaluation are all
    on the record."""
    from planner._trial.protocol import run_trial

    spec = _command_spec(
        tmp_path,
        """
        import threading
        for step in (1, 2, 3):
            planner.report(step, val_acc=0.5 + step / 10, test_acc=0.4)
        threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon: the process cannot exit
    """,
    )
    command = {**spec.extra["command"], "timeout_s": 3}
    record = run_trial(dataclasses.replace(spec, extra={**spec.extra, "command": command}))
    assert record["status"] == "completed" and record["exposure"] == 3, record["errors"]
    assert any(
        "reported every step of its budget (3), then did not exit" in n for n in record["notes"]
    )
    short = run_trial(
        dataclasses.replace(
            _command_spec(
                tmp_path,
                """
        planner.report(1, val_acc=0.5)
        time.sleep(600)
    """,
                tid="short",
            ),
            extra={**spec.extra, "command": {**command}},
        )
    )
    assert (
        short["status"] == "timeout"
        and "its last report was step 1 of 3" in short["errors"][-1]["message"]
    )
    # every step reported, but not the held-out metric its test evaluation would add: that is what
    # ran too long
    untested = run_trial(
        dataclasses.replace(
            _command_spec(
                tmp_path,
                """
        for step in (1, 2, 3):
            planner.report(step, val_acc=0.5)
        time.sleep(600)  # the test evaluation, too slow
    """,
                tid="untested",
            ),
            extra={**spec.extra, "command": {**command}},
        )
    )
    assert untested["status"] == "timeout", untested["errors"]
