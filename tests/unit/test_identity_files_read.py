"""The files a trial read, as identity (planner._store.identity): code and config by sha256, data by
size and time, outputs left out, a cached module as its source, a change named and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

from planner._store.identity import (
    HASHED_BYTES,
    changed_files,
    describe_fact,
    file_fact,
    files_read,
    records_files_read,
)


def folder(tmp_path: Path) -> Path:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "small.py").write_text("n_embd = 32\n")
    (tmp_path / "data.bin").write_bytes(b"\1" * 100)
    (tmp_path / "big.json").write_bytes(b" " * (HASHED_BYTES + 1))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_bytes(b"x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "model.py").write_text("X = 1\n")
    return tmp_path


def log(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "files_read.tsv"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_code_is_hashed_data_is_sized_and_outputs_are_left_out(tmp_path):
    base = folder(tmp_path)
    pyc = base / "__pycache__" / "model.cpython-311.pyc"
    read = files_read(
        log(
            tmp_path,
            [
                f"r\t{base / 'config' / 'small.py'}",
                f"x\t{base / 'config' / 'small.py'}",
                f"r\t{base / 'data.bin'}",
                f"r\t{base / 'big.json'}",
                f"w\t{base / 'out' / 'ckpt.pt'}",
                f"r\t{base / 'out' / 'ckpt.pt'}",
                f"r\t{pyc}",
                "+\tmore",
            ],
        ),
        base,
    )
    assert sorted(read) == ["big.json", "config/small.py", "data.bin", "model.py"]
    assert set(read["config/small.py"]) == {"sha256"} and set(read["model.py"]) == {"sha256"}
    assert read["data.bin"] == {"size": 100, "mtime_ns": os.stat(base / "data.bin").st_mtime_ns}
    assert set(read["big.json"]) == {"size", "mtime_ns"}  # too large to hash: data


def test_only_what_changed_is_named(tmp_path):
    base = folder(tmp_path)
    logged = {name: file_fact(base / name) for name in ("config/small.py", "data.bin", "model.py")}
    assert changed_files(logged, base) == []
    (base / "config" / "small.py").write_text("n_embd = 64\n")
    os.utime(base / "data.bin", ns=(1, 1))
    (base / "model.py").unlink()
    changed = {
        name: (describe_fact(then), describe_fact(now))
        for name, then, now in changed_files(logged, base)
    }
    assert sorted(changed) == ["config/small.py", "data.bin", "model.py"]
    assert changed["model.py"][1] == "absent"
    assert changed["data.bin"][1] == "100 bytes, modified 1970-01-01T00:00:00Z"
    assert changed["config/small.py"][0].startswith("sha256 ")


def test_the_union_of_the_records_keeps_each_file_once():
    records = [
        {"inputs": {"files": {"a.py": {"sha256": "1"}}}},
        {"inputs": {"files": {"a.py": {"sha256": "1"}, "b.bin": {"size": 1, "mtime_ns": 2}}}},
        {"trial_id": "no inputs"},
    ]
    assert records_files_read(records) == {
        "a.py": {"sha256": "1"},
        "b.bin": {"size": 1, "mtime_ns": 2},
    }
