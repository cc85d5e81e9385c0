"""The worker's side of a trial's end: the modules a function trainable
loaded, the attempt ledger closed when Tune stops a trial, the exposure a failed trial spent."""

import json
import sys
import uuid
from pathlib import Path

import pytest

from planner._store import facts
from planner._store.identity import add_used_packages, packages, record_modules
from planner._trial.attempts import LEDGER, Ledger
from planner._trial.protocol import run_trial
from planner._trial.spec import TrialSpec

REPO = str(Path(__file__).resolve().parents[2])


def spec(tmp_path, trainable, *, retries=0, budget=3, path=(REPO,), session="s1", tid="t"):
    return TrialSpec(
        trial_id=tid,
        phase="tune",
        arm="a",
        seed=3,
        index=0,
        params={},
        config={"lr": 0.1},
        budget=budget,
        dir=str(tmp_path / tid),
        trainable=trainable,
        metric="acc",
        retries=retries,
        path=tuple(path),
        extra={"session": session},
    )


def ledger(tmp_path, tid="t"):
    return json.loads((tmp_path / tid / LEDGER).read_text())["attempts"]


def test_a_function_trainables_record_names_the_modules_its_body_loaded_not_rays_nor_the_stdlib(
    tmp_path,
):
    body, tune_side = f"body_pkg_{uuid.uuid4().hex[:8]}", f"tune_side_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{body}.py").write_text("VALUE = 1\n")
    (tmp_path / f"{tune_side}.py").write_text("VALUE = 2\n")
    module = f"trainable_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "import importlib\n\ndef train(config, trial):\n"
        f"    importlib.import_module({body!r})\n    importlib.import_module('json')\n"
        "    for step in (1, 2, 3):\n        trial.report(step, acc=0.1 * step)\n"
    )

    def forward(
        step, metrics, elapsed, violations, **extra
    ):  # as Ray Tune's first report imports ray.tune
        __import__(tune_side)

    record = run_trial(spec(tmp_path, f"{module}:train", path=(str(tmp_path),)), forward)
    assert record["status"] == "completed"
    assert body in record["modules"] and module in record["modules"]
    assert tune_side not in record["modules"]  # loaded by the forward: the worker's machinery
    assert not {"json", "importlib", "planner", "ray"} & set(record["modules"])
    again = run_trial(spec(tmp_path, f"{module}:train", path=(str(tmp_path),), tid="t2"), forward)
    assert (
        body not in again["modules"]
    )  # once per worker process: the first trial that loaded it names it
    for name in (body, tune_side, module):
        sys.modules.pop(name, None)


def test_a_trial_tune_stops_at_a_report_closes_its_attempt_as_early_stopped(tmp_path):
    def forward(step, metrics, elapsed, violations, **extra):
        if step == 2:
            sys.exit(
                0
            )  # what Ray Tune's session does in tune.report when the scheduler stopped the trial

    with pytest.raises(SystemExit):
        run_trial(spec(tmp_path, "tests.trainables.worker_ends:three_steps"), forward)
    (attempt,) = ledger(tmp_path)
    assert attempt["ended"] == "early_stopped" and attempt["step"] == 2 and attempt["ended_at"]
    # such a trial runs again only when it was left without a record (the phase's time budget): it
    # continues
    rerun = Ledger.load(tmp_path / "t", "s2")
    rerun.start(1)
    assert rerun.cut_short_before()


def test_a_failed_trial_keeps_the_exposure_an_earlier_attempt_spent(tmp_path):
    record = run_trial(
        spec(
            tmp_path,
            "tests.trainables.worker_ends:reports_then_raises_then_raises_at_once",
            retries=1,
        )
    )
    assert record["status"] == "failed" and record["attempts"] == 2 and record["reports"] == []
    assert record["exposure"] == 2
    assert [(a["ended"], a["step"]) for a in ledger(tmp_path)] == [("raised", 2), ("raised", None)]
    used = facts.budget_used([record], {"budget": {"exposure": 3, "unit": "epoch"}}, None, None)
    assert used["steps"] == 2


def test_a_trial_a_watchdog_killed_records_the_steps_it_reported_before_the_kill(tmp_path):
    book = Ledger.load(tmp_path / "t", "s1")
    book.start(1)
    book.end(
        1, "oom", {"attempt": 1, "type": "OutOfMemory", "message": "over 1 MiB", "traceback": ""}, 2
    )
    record = run_trial(spec(tmp_path, "tests.trainables.worker_ends:three_steps"))
    assert record["status"] == "oom" and record["exposure"] == 2


def _run_folder(tmp_path, identity):
    root = tmp_path / "run"
    root.mkdir()
    (root / "identity.json").write_text(json.dumps(identity))
    return root


def test_the_packages_behind_the_workers_modules_are_added_to_identity_json(tmp_path):
    root = _run_folder(tmp_path, {"python": "3", "packages": {"planner": "0.1", "numpy": "9.9"}})
    records = [
        {"modules": ["mpmath", "../evil", 3]},
        {"modules": ["numpy"]},
        {"status": "completed"},
    ]
    assert record_modules(records) == {"mpmath", "numpy"}
    assert add_used_packages(root, records) == ["mpmath"]
    written = json.loads((root / "identity.json").read_text())
    assert written["packages"] == {
        "planner": "0.1",
        "numpy": "9.9",
        "mpmath": packages(["mpmath"])["mpmath"],
    }
    assert written["python"] == "3"  # the rest as it was; a logged version is never replaced
    assert add_used_packages(root, records) == []


def test_identity_json_is_never_written_through_a_link(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"packages": {}}))
    root = tmp_path / "run"
    root.mkdir()
    (root / "identity.json").symlink_to(target)
    assert add_used_packages(root, [{"modules": ["mpmath"]}]) == []
    assert json.loads(target.read_text()) == {"packages": {}}


def test_the_map_of_installed_distributions_is_read_again_when_one_is_installed_not_when_a_run_writes(  # noqa: E501
    tmp_path, monkeypatch
):
    """Issue 23: `used_packages` reads every distribution's file list (about 0.2 s) at a run's
    start and end; the second read is skipped unless a distribution appeared or went on sys.path. A
    run writing into a folder on sys.path (a `__pycache__`, the runs folder) is no such change; a
    new `*.dist-info` is."""
    from planner._store import identity

    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.setattr("sys.path", [str(folder), *sys.path])
    identity._providers_while.cache_clear()
    first = identity._providers()
    (folder / "__pycache__").mkdir()
    (folder / "runs").mkdir()
    assert identity._providers() is first  # the cached map: nothing was installed
    contract_folder = tmp_path / "contract"
    contract_folder.mkdir()
    (contract_folder / "train.py").write_text("")
    sys.path.insert(0, str(contract_folder))  # what plan run does between the two reads
    assert identity._providers() is first, (
        "a folder with no distribution in it changes nothing of the map"
    )
    archive = (
        tmp_path / "vendored.zip"
    )  # a zip on sys.path may hold distributions: importlib reads it
    archive.write_bytes(b"")
    sys.path.insert(0, str(archive))
    zipped = identity._providers()
    assert zipped is not first, (
        "a file on sys.path (a zip, an egg) may hold distributions: read again"
    )
    first = zipped
    dist = folder / "tinydist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinydist\nVersion: 1.0\n")
    (dist / "RECORD").write_text("tinydist_mod.py,,\n")
    (folder / "tinydist_mod.py").write_text("")
    again = identity._providers()
    assert again is not first and again["tinydist_mod"] == ["tinydist"]


def test_a_base_exception_the_trainable_raises_is_its_error_retried_then_failed_and_redacted(
    tmp_path, monkeypatch
):
    """F7: a BaseException subclass (not an Exception) from user code is recorded as the trial's
    error, like any exception, its message scrubbed; it no longer escapes to Ray (which killed a
    tuning run with it)."""
    secret = "hunter2-LEAKMARK-9f3"
    monkeypatch.setenv("DB_PASSWORD", secret)
    record = run_trial(
        spec(tmp_path, "tests.trainables.worker_ends:raises_a_base_exception", retries=1)
    )
    assert record["status"] == "failed" and record["attempts"] == 2
    assert [e["type"] for e in record["errors"]] == ["Unreachable", "Unreachable"]
    assert record["errors"][-1]["message"].startswith("cannot reach the store with ")
    assert secret not in json.dumps(record)
    assert [a["ended"] for a in ledger(tmp_path)] == ["raised", "raised"]


def test_a_keyboard_interrupt_in_a_trial_still_ends_the_worker_s_task(tmp_path):
    """Ray cancels a task (and a worker's SIGINT lands) as a KeyboardInterrupt: it is not the
    trainable's error."""
    with pytest.raises(KeyboardInterrupt):
        run_trial(spec(tmp_path, "tests.trainables.worker_ends:raises_keyboard_interrupt"))


def test_a_folder_added_to_sys_path_is_read_alone_and_the_map_is_what_importlib_gives(
    tmp_path, monkeypatch
):
    """Issue 23: importing Ray adds a folder with two distributions to sys.path between a run's two
    reads of the map; only that folder's distributions are read then, and the map equals
    packages_distributions()."""
    import importlib.metadata

    from planner._store import identity

    identity._providers_while.cache_clear()
    first = identity._providers()
    assert first == importlib.metadata.packages_distributions()
    read = []
    real = importlib.metadata.distributions
    monkeypatch.setattr(
        importlib.metadata, "distributions", lambda **kw: read.append(kw) or real(**kw)
    )
    folder = tmp_path / "thirdparty_files"
    dist = folder / "tinydist-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinydist\nVersion: 1.0\n")
    (dist / "RECORD").write_text("tinydist_mod.py,,\n")
    (folder / "tinydist_mod.py").write_text("")
    monkeypatch.setattr("sys.path", [*sys.path, str(folder)])
    again = identity._providers()
    assert read == [{"path": [str(folder)]}], read  # the new folder alone
    assert again["tinydist_mod"] == ["tinydist"]
    monkeypatch.setattr(importlib.metadata, "distributions", real)
    assert again == importlib.metadata.packages_distributions()


def test_an_attempt_cut_short_is_continued_only_by_one_running_the_same_tuned_values(tmp_path):
    """A trial's next attempt continues from the checkpoint of one cut short only when it runs the
    tuned values that attempt ran: a checkpoint trained with other values would make one result of
    two configs. A ledger entry that names no values (written before attempts named theirs) is
    continued only with none."""
    before = Ledger.load(tmp_path / "t", "s1")
    before.start(1, {"optim.lr": 0.0269})  # its driver was killed: no end
    same = Ledger.load(tmp_path / "t", "s2")
    same.start(1, {"optim.lr": 0.0269})
    assert same.cut_short_before()
    other = Ledger.load(tmp_path / "u", "s1")
    other.start(1, {"optim.lr": 0.0269})
    drawn = Ledger.load(tmp_path / "u", "s2")
    drawn.start(1, {"optim.lr": 0.0765})
    assert not drawn.cut_short_before()
    old = Ledger.load(tmp_path / "v", "s1")
    old.attempts.append(
        {"session": "s1", "attempt": 1, "ended": None}
    )  # no params: an older ledger
    old._save()
    tuned, plain = Ledger.load(tmp_path / "v", "s2"), Ledger.load(tmp_path / "v", "s3")
    tuned.start(1, {"optim.lr": 0.0269})
    assert not tuned.cut_short_before()
    plain.attempts = plain.attempts[:1]
    plain.start(1, {})
    assert plain.cut_short_before()


def test_the_record_an_earlier_drivers_attempt_kept_as_it_ended_the_trial_is_found_and_nothing_else(
    tmp_path,
):
    """`plan run --resume` records a trial that had ended as its driver stopped from the record its
    worker kept (Ledger.kept_before): only when that attempt is the trial's last, ended it, and
    kept that very record."""
    record = {"trial_id": "t", "status": "completed", "params": {"optim.lr": 0.0269}}
    earlier = Ledger.load(tmp_path / "t", "s1")
    earlier.start(1, record["params"])
    earlier.end(1, "completed", None, 4)
    assert earlier.keep(1, record)
    assert Ledger.load(tmp_path / "t", "s2").kept_before() == record
    assert (
        Ledger.load(tmp_path / "t", "s1").kept_before() is None
    )  # this session's own: not an earlier one
    again = Ledger.load(tmp_path / "t", "s2")
    again.start(
        1, record["params"]
    )  # it ran again after all: its kept record is no longer the trial's last
    assert Ledger.load(tmp_path / "t", "s3").kept_before() is None
    cut = Ledger.load(tmp_path / "u", "s1")
    cut.start(1, {})
    assert cut.keep(1, {**record, "trial_id": "u"})
    assert Ledger.load(tmp_path / "u", "s2").kept_before() is None  # the attempt never ended
    other = Ledger.load(tmp_path / "w", "s1")
    other.start(1, {})
    other.end(1, "failed", {"type": "E", "message": "m"}, None)
    assert other.keep(1, record)
    assert (
        Ledger.load(tmp_path / "w", "s2").kept_before() is None
    )  # kept as completed, ended as failed


def test_a_requirement_whose_marker_excludes_this_platform_is_not_a_used_package():
    """tqdm requires `colorama; platform_system == "Windows"`. Not installed here, but importable
    once Ray is (its thirdparty_files folder on sys.path): a run that had imported Ray recorded
    colorama 0.4.6, and plan reeval, before Ray, said `packages.colorama: 0.4.6 (logged) ->
    <absent> (today)` for every run."""
    import platform

    from planner._store.identity import _required_name, used_packages

    if platform.system() == "Windows":
        pytest.skip("the marker holds on Windows")
    assert _required_name('colorama; platform_system == "Windows"') is None
    assert _required_name('numpy>=1.20; python_version >= "3.8"') == "numpy"
    assert _required_name('requests; extra == "discord"') is None
    assert _required_name("torch>=2.1") == "torch"
    pytest.importorskip("tqdm")
    assert "colorama" not in used_packages(["tqdm"]) and "tqdm" in used_packages(["tqdm"])
