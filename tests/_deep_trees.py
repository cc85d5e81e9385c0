"""Folder chains deeper than Python's recursion limit, made and removed without recursion
(os.makedirs, os.walk and shutil.rmtree, and so pytest's tmp_path clean-up, recurse a level a
frame)."""

from __future__ import annotations

import os
from pathlib import Path


def deep_tree(folder: Path, depth: int, leaf: str = "") -> Path:
    """`depth` nested folders `d` below `folder` (made by descriptors), a leaf file `leaf.txt`
    holding `leaf` if it is given; the deepest folder."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    if leaf:
        out = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, leaf.encode())
        os.close(out)
    os.close(fd)
    return folder.joinpath(*["d"] * depth)


def remove_deep(folder: Path) -> None:
    """Remove the chain `folder/d/d/...`: each step lifts the next level up to `folder` and removes
    the one above it."""
    here, lifted = folder / "d", folder / "d.next"
    while here.exists():
        for entry in os.scandir(here):
            if entry.name != "d":
                os.unlink(entry.path)
        if (here / "d").exists():
            os.rename(here / "d", lifted)
            os.rmdir(here)
            os.rename(lifted, here)
        else:
            os.rmdir(here)


def read_deep(path: Path) -> str:
    """The text of a file too deep for its path to be opened in one call."""
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        with open(os.open(path.name, os.O_RDONLY, dir_fd=fd)) as handle:
            return handle.read()
    finally:
        os.close(fd)
