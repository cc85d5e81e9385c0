"""The run folder's boundary: every file planner opens in it, and the one atomic writer.

A run folder is copied, shared, downloaded and resumed; it may hold links and
special files planted by anyone. So every file planner reads or writes below
a run folder is opened here, component by component from the folder down,
each with `O_NOFOLLOW` (directories also with `O_DIRECTORY`), through
directory file descriptors (`dir_fd=`, the openat family): a link anywhere
below the run folder is never followed, and there is no window between a
check and the open. What is opened must be a regular file (a FIFO, a device
like /dev/zero, a socket or a folder is refused), and readers cap its size.
A file opened for writing must also have one name only (`st_nlink == 1`): a hard
link to a file outside (what `cp -al` or `rsync --link-dest` snapshots of runs/
make) would carry every append, truncation or rewrite there. Anything else is a
`RunError` (`LinkedFileError` for a file to be written; exit 3) with one sentence
naming the file. `rewrite_tree` is the one walk that rewrites files under a folder
of a run (the scrub of a trial's Hydra outputs): it follows no link, hard or symbolic.

`write_atomic` is the one atomic writer of the package (run folder files,
reports, exports, the attempts ledger): a temporary file in the same folder,
written, fsync'd, renamed over the target, the folder fsync'd; on any failure
the temporary file is removed, so nothing is left behind.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path

from planner._core.errors import LinkedFileError, RunError
from planner._core.text import file_kind

JSON_CAP = 64 << 20  # a JSON or YAML file of a run folder: 64 MiB is far past any real one
JSONL_CAP = 16 << 30  # trials.jsonl is streamed; a line is capped apart (LINE_CAP)
LINE_CAP = 256 << 20  # one JSON line (one trial record with its reports)
TREE_DEPTH = 64  # rewrite_tree walks folders at most this deep below the one it is given

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC


def _refuse(path: Path, what: str, writing: bool = False) -> RunError:
    if writing:
        return LinkedFileError(
            f"{path} is {what}: planner writes only plain files with one name inside a run folder, "
            "so that nothing outside it changes; replace it with a copy of its own (cp --remove-"
            "destination, or remove it) and run again"
        )
    return RunError(
        f"{path} is {what}, not a regular file inside the run folder: planner reads and writes "
        f"only "
        "plain files there and follows no link; replace it with the file the run wrote, or remove "
        "it"
    )


def _parts(root: Path, path: Path) -> tuple[Path, list[str]]:
    """The folder to start from (the run folder: the user named it) and the components below it."""
    root = Path(root)
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        root, rel = Path(path).parent, Path(Path(path).name)
    parts = [p for p in rel.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise RunError(f"{path} is not a file inside the run folder {root}")
    return root, parts


@contextmanager
def _dir_fd(root: Path, parts: list[str], path: Path, create: bool = False):
    """A descriptor of the folder holding `parts[-1]`, each folder below `root` opened without
    following a link."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    sub = root.joinpath(*parts[: parts.index(name) + 1])
                    raise _refuse(sub, "a link or not a folder") from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def open_inside(
    root: str | os.PathLike, path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o644
) -> int:
    """A descriptor of the regular file `path` below the run folder `root`; no link followed,
    nothing special opened.

    Raises FileNotFoundError when it is missing (and `flags` has no O_CREAT), RunError naming the
    file when it is a link, a FIFO, a device, a folder or anything but a plain file.
    """
    root, parts = _parts(Path(root), Path(path))
    full = root.joinpath(*parts)
    with _dir_fd(root, parts, full, create=bool(flags & os.O_CREAT)) as dfd:
        try:
            # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; cleared below for
            # a regular file
            fd = os.open(parts[-1], flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=dfd)
        except OSError as error:
            writing = bool(flags & _WRITING)
            if error.errno == errno.ELOOP:
                raise _refuse(full, "a symbolic link", writing) from None
            if error.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
                raise _refuse(full, "a FIFO (named pipe)", writing) from None
            if error.errno == errno.EISDIR:
                raise _refuse(full, "a folder", writing) from None
            raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(full, file_kind(st.st_mode), writing=bool(flags & _WRITING))
        if flags & _WRITING and st.st_nlink > 1:
            raise _refuse(
                full,
                f"a file with {st.st_nlink} hard links (one of them may be outside the run folder)",
                writing=True,
            )
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _reader(root: str | os.PathLike, path: str | os.PathLike) -> int | None:
    """open_inside for reading: None when the file is missing, RunError (naming it) when it cannot
    be read."""
    try:
        return open_inside(root, path)
    except FileNotFoundError:
        return None
    except RunError:
        raise
    except OSError as error:
        raise RunError(f"cannot read {path}: {error.strerror or error}") from None


def read_inside(
    root: str | os.PathLike, path: str | os.PathLike, cap: int = JSON_CAP
) -> bytes | None:
    """The bytes of the regular file `path` below `root` (None when missing), refused past `cap`
    bytes."""
    fd = _reader(root, path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise RunError(
                f"{path} is {size} bytes, past the {cap >> 20} MiB a run's file may hold: it is "
                f"not "
                "a file a run wrote"
            )
        data = handle.read(cap + 1)
        if len(data) > cap:
            raise RunError(
                f"{path} grew past {cap >> 20} MiB while it was read: it is not a file a run wrote"
            )
        return data


def open_stream(root: str | os.PathLike, path: str | os.PathLike, cap: int = JSONL_CAP):
    """A binary reader of the regular file `path` below `root` (None when missing), refused past
    `cap`."""
    fd = _reader(root, path)
    if fd is None:
        return None
    size = os.fstat(fd).st_size
    if size > cap:
        os.close(fd)
        raise RunError(
            f"{path} is {size} bytes, past the {cap >> 30} GiB a run's file may hold: it is not a "
            "file a run wrote"
        )
    return os.fdopen(fd, "rb")


def write_atomic(
    path: str | os.PathLike,
    data: str | bytes,
    *,
    root: str | os.PathLike | None = None,
    mode: int = 0o644,
    durable: bool = True,
) -> None:
    """Replace `path` with `data` atomically: nothing half-written is ever seen, nothing is left
    behind on failure.

    A temporary file in the target's folder (created exclusively, no link followed) is written and
    fsync'd, renamed over the target (a link at the target is replaced, never followed), and the
    folder is fsync'd. With `root` (a run folder), every folder between `root` and `path` is opened
    without following a link. `durable=False` leaves out the two fsyncs: still atomic, and it
    outlives the process that wrote it, but not a crash of the machine (for a file rewritten at
    every trial's start and end, whose loss costs little).
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if root is None:
        base, parts = path.parent, [path.name]
    else:
        base, parts = _parts(Path(root), path)
    with _dir_fd(base, parts, path) as dfd:
        _replace_at(dfd, parts[-1], payload, mode, path, durable)


def _replace_at(
    dfd: int, name: str, payload: bytes, mode: int, path: Path, durable: bool = True
) -> None:
    """Replace the entry `name` of the folder `dfd` with `payload`: temporary file, fsync, rename,
    fsync."""
    tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if stat.S_ISDIR(_lstat_mode(name, dfd)):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    if not durable:
        return
    try:
        os.fsync(dfd)
    except OSError:  # some file systems cannot fsync a folder; the rename is done
        pass


def rewrite_tree(
    root: str | os.PathLike, folder: str | os.PathLike, rewrite, cap: int = JSON_CAP
) -> int:
    """Replace every UTF-8 text file under `folder` (below `root`, a run or trial folder) by
    `rewrite(text)` when that differs; return how many were replaced.

    No link is followed, hard or symbolic: `folder` and every folder between `root` and it are
    opened with O_NOFOLLOW (a link there is a `RunError`), the walk (os.fwalk, by descriptors)
    never enters a linked folder, a symbolic link, FIFO or device below is skipped, and a file is
    replaced by rename (a hard link's other name, maybe outside, keeps its bytes). Files past `cap`
    bytes or not UTF-8 are left as they are, and so are folders more than `TREE_DEPTH` levels below
    `folder` (no tool writes its outputs that deep; a tree planted deeper must not end the run in a
    RecursionError or use up the process's file descriptors).
    """
    root, parts = _parts(Path(root), Path(folder) / "_")
    try:
        with _dir_fd(root, parts, Path(folder)) as top:
            return _rewrite_below(top, Path(folder), rewrite, cap)
    except FileNotFoundError:
        return 0


def _rewrite_below(top: int, folder: Path, rewrite, cap: int) -> int:
    replaced = 0
    for dirpath, dirnames, filenames, dfd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
        dirnames.sort()
        if (
            len(Path(dirpath).parts) >= TREE_DEPTH
        ):  # os.fwalk recurses (a frame and a descriptor a level)
            dirnames.clear()
        for name in sorted(filenames):
            if name.startswith(".") and name.endswith(".tmp"):
                continue
            try:
                fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=dfd)
            except OSError:  # a symbolic link (ELOOP), gone, unreadable: not ours to rewrite
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
                    continue
                with os.fdopen(os.dup(fd), "rb") as handle:
                    data = handle.read(cap + 1)
            finally:
                os.close(fd)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            clean = rewrite(text)
            if clean != text:
                _replace_at(
                    dfd,
                    name,
                    clean.encode("utf-8"),
                    stat.S_IMODE(st.st_mode),
                    folder / dirpath / name,
                )
                replaced += 1
    return replaced


def refuse_in_place(root: str | os.PathLike, names) -> None:
    """A RunError naming the first of the files `names` (below the run folder `root`) that
    `write_atomic` could not replace: a folder there (a link, a FIFO or a file with other names is
    replaced by rename, never written through). Called before a run goes on, so a planted folder is
    refused before anything runs, not lost later."""
    root = Path(root)
    for name in names:
        root_, parts = _parts(root, root / name)
        try:
            with _dir_fd(root_, parts, root / name) as dfd:
                mode = _lstat_mode(parts[-1], dfd)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(mode):
            raise _refuse(root / name, "a folder")


def _lstat_mode(name: str, dfd: int) -> int:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return 0


def unlink_inside(
    root: str | os.PathLike, path: str | os.PathLike, inode: int | None = None
) -> None:
    """Remove the entry `path` below `root` (never what a link points to); with `inode`, only if it
    is that file."""
    root, parts = _parts(Path(root), Path(path))
    with _dir_fd(root, parts, Path(path)) as dfd:
        try:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if inode is not None and st.st_ino != inode:
            return
        os.unlink(parts[-1], dir_fd=dfd)
