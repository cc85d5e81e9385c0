"""Environment errors through the real `plan` process: a runs folder on a full disk and on a
read-only mount (real tmpfs mounts, as root), an ASCII locale. Each is one sentence with an exit
code from the table, never exit 70."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.synthetic_run import make_run
from tests._contract_helpers import FIXTURES, write_contract

REPO = Path(__file__).resolve().parents[2]


def plan(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small tmpfs mounted at `where` (root only), unmounted afterwards whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_runs_folder_on_a_full_disk_is_a_sentence(tmp_path):
    contract = write_contract(tmp_path, (FIXTURES / "inline.yaml").read_text())
    with tmpfs(tmp_path / "disk", "64k") as disk:
        filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(filler, b"\0" * 4096)
        os.close(filler)
        out = plan("run", str(contract), "--runs-dir", str(disk / "runs"), cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "internal error" not in out.stderr and "No space left on device" in out.stderr
    assert "free space on that disk" in out.stderr and len(out.stderr.splitlines()) == 1


def test_a_runs_folder_on_a_read_only_mount_is_a_sentence(tmp_path):
    contract = write_contract(tmp_path, (FIXTURES / "inline.yaml").read_text())
    with tmpfs(tmp_path / "disk", "1m") as disk:
        (disk / "runs").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        out = plan("run", str(contract), "--runs-dir", str(disk / "runs"), cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "internal error" not in out.stderr and "Read-only file system" in out.stderr
    assert "a disk that can be written" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "env",
    [{"LC_ALL": "C", "PYTHONUTF8": "0"}, {"PYTHONIOENCODING": "ascii"}],
    ids=["LC_ALL=C", "PYTHONIOENCODING=ascii"],
)
def test_a_report_prints_under_an_ascii_locale(tmp_path, env):
    run = make_run(tmp_path / "runs" / "demo" / "20261130-120000-abcd", tune_trials=2)
    contract = run / "contract.yaml"
    contract.write_text(contract.read_text().replace("hypothesis: ", "hypothesis: Adam é ", 1))
    for command in (["report", str(run)], ["status", str(run)]):
        out = plan(*command, cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        assert "internal error" not in out.stderr
    assert "Adam \\xe9" in plan("report", str(run), cwd=tmp_path, env=env).stdout


def _completing_contract(tmp_path: Path) -> Path:
    text = (
        (FIXTURES / "inline.yaml")
        .read_text()
        .replace("metric: {name: loss, mode: min}", "metric: {name: val_acc, mode: max}")
    )
    return write_contract(tmp_path, text)


@pytest.mark.parametrize("home", ["read-only", "missing"])
def test_a_run_starts_its_ray_without_a_home_it_can_write(tmp_path, home):
    """Ray keeps its token in ~/.ray: a read-only HOME failed every start, three times over."""
    contract = _completing_contract(tmp_path)
    with tmpfs(tmp_path / "disk", "1m") as disk:
        (disk / "home").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        where = disk / "home" if home == "read-only" else tmp_path / "no-such-home"
        out = plan(
            "run",
            str(contract),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--quiet",
            cwd=tmp_path,
            env={"HOME": str(where)},
        )
    assert "could not start a local Ray" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (tmp_path / "no-such-home").exists()


def test_a_ray_that_cannot_write_its_session_is_said_once(tmp_path):
    contract = _completing_contract(tmp_path)
    with tmpfs(tmp_path / "disk", "1m") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        out = plan(
            "run",
            str(contract),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--quiet",
            cwd=tmp_path,
            env={"RAY_TMPDIR": str(disk / "ray")},
        )
    assert out.returncode == 3, out.stdout + out.stderr
    assert "could not start a local Ray: [Errno 30] Read-only file system" in out.stderr
    assert "after 3 attempts" not in out.stderr and "internal error" not in out.stderr


FILLS_THE_DISK = """
import os

def train(config, trial):
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=0.5 + config["model"]["width"] / 12800 + trial.seed / 1000)
        if trial.seed == 2 and os.path.exists(os.path.join(os.path.dirname(__file__), "fill")):
            with open(os.path.join(trial.dir, "checkpoint.bin"), "wb") as f:
                f.write(bytes(8 << 20))  # more than the run's disk holds
"""


def test_a_trial_failed_by_a_full_disk_runs_again_on_resume(tmp_path):
    """Its checkpoint hit the run's full disk: recorded `failed` before, and kept by the resume the
    message asked for, so the comparison could never finish (exit 4, incomplete)."""
    (tmp_path / "fills.py").write_text(FILLS_THE_DISK)
    (tmp_path / "fill").write_text("")
    text = (FIXTURES / "inline.yaml").read_text()
    text = text.replace("fixture_trainable:train", "fills:train").replace(
        "metric: {name: loss, mode: min}", "metric: {name: val_acc, mode: max}"
    )
    contract = write_contract(tmp_path, text)
    with tmpfs(tmp_path / "disk", "4m") as disk:
        first = plan(
            "run", str(contract), "--runs-dir", str(disk / "runs"), "--quiet", cwd=tmp_path
        )
        assert first.returncode == 3, first.stdout + first.stderr
        assert "failed on a full or failing disk" in first.stderr
        assert "internal error" not in first.stderr
        (run,) = [p for p in (disk / "runs" / "inline").iterdir() if p.is_dir()]
        assert "confirm-narrow-s2" not in (run / "trials.jsonl").read_text()
        (run / "trials" / "confirm-narrow-s2" / "checkpoint.bin").unlink()  # space freed
        (tmp_path / "fill").unlink()
        second = plan("run", str(contract), "--resume", str(run), "--quiet", cwd=tmp_path)
        records = (run / "trials.jsonl").read_text()
    assert second.returncode == 0, second.stdout + second.stderr
    assert '"trial_id": "confirm-narrow-s2"' in records and "Errno 28" not in records
