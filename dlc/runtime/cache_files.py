"""The files of the disk cache, opened only after trust checks: a directory, key or
entry file must be its owner's alone (`trust_problem`), is opened without following symlinks
and checked again on the open descriptor (`open_checked`), and is written as a new
private file renamed into place (`atomic_write`). A failed check is `Untrusted`.
Why: docs/design/security.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Literal

Kind = Literal["directory", "entry", "key"]  # what a checked path must be


class Untrusted(OSError):
    """`path`, a `kind` of cache file, failed a trust check for `reason`. An OSError, so
    it costs what an unreadable cache costs; `lookup` and `store` also warn about it
    (once per `where`). A bad directory or key turns the disk cache off; a bad entry
    file only its entry (the next store replaces it)."""

    def __init__(self, path: Path, kind: Kind, reason: str) -> None:
        off = "compiling without the disk cache"
        if kind == "entry":
            off = "the entry is ignored and rewritten"
        super().__init__(f"dlc: compile cache: {path} {reason}; {off}")
        self.where = path if kind == "directory" else path.parent
        self.problem = f"{path} {reason}"


def trust_problem(st: os.stat_result, kind: Kind) -> str | None:
    """Why a `kind` of file with status `st` may hold someone else's code, or None.
    Only its owner (the current effective user) may be able to write it; the key must
    not be readable by anyone else either (whoever reads it can forge entries)."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if kind == "directory" and not stat.S_ISDIR(mode):
        return "is not a directory"
    if kind != "directory" and not stat.S_ISREG(mode):
        return "is not a regular file"
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by the current user (uid {uid})"
    if mode & (0o066 if kind == "key" else 0o022):
        access = "readable or writable" if kind == "key" else "writable"
        return f"is {access} by group or others (mode {stat.S_IMODE(mode):04o})"
    return None


def open_checked(path: Path, kind: Kind, dir_fd: int | None = None) -> int:
    """A read descriptor of `path` (by name relative to `dir_fd` when given) that passed
    `trust_problem`. The lstat names the reason for a symlink; O_NOFOLLOW and the fstat of
    the open descriptor make a swap between check and use harmless.
    Raises Untrusted, OSError (FileNotFoundError when `path` is missing)."""
    target = path.name if dir_fd is not None else path
    problem = trust_problem(os.stat(target, dir_fd=dir_fd, follow_symlinks=False), kind)
    if problem:
        raise Untrusted(path, kind, problem)
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if kind == "directory" else 0)
    fd = os.open(target, flags, dir_fd=dir_fd)
    problem = trust_problem(os.fstat(fd), kind)
    if problem:
        os.close(fd)
        raise Untrusted(path, kind, problem)
    return fd


def read_checked(path: Path, kind: Kind, dir_fd: int) -> bytes:
    """The contents of the file `path` in the directory open as `dir_fd`, if trusted."""
    with os.fdopen(open_checked(path, kind, dir_fd), "rb") as f:
        return f.read()


def make_dirs(path: Path) -> None:
    """Create the missing levels of `path` one by one with mode 0700: `mkdir(parents=True)`
    would give the intermediate ones the umask's default (0777 under umask 0)."""
    missing: list[Path] = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile; the base is checked
            os.mkdir(level, 0o700)


Chunks = bytes | list[bytes | memoryview]  # a file's contents, or its pieces in order


def write_new(dir_fd: int, name: str, data: Chunks) -> None:
    """Write `data` to a new 0600 file `name` in `dir_fd`. O_EXCL and O_NOFOLLOW: never
    through a file or symlink that was there already."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(name, flags, 0o600, dir_fd=dir_fd), "wb") as f:
        for chunk in [data] if isinstance(data, bytes) else data:
            f.write(chunk)


def atomic_write(dir_fd: int, name: str, data: Chunks) -> None:
    """Write `data` to a temporary file in `dir_fd`, then rename it over `name`."""
    tmp = f"{name}.{secrets.token_hex(8)}.tmp"
    try:
        write_new(dir_fd, tmp, data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def read_owned(path: Path) -> bytes | None:
    """The bytes of a file of dlc's own beside the cache (the superoptimizer's cost
    table) if it and its directory pass the cache's trust checks (`trust_problem`: owned
    by the current user, not writable by others, no symbolic link); None when missing.
    Raises PermissionError naming the problem, OSError when unreadable."""
    try:
        fd = open_checked(path.parent, "directory")
    except FileNotFoundError:
        return None
    except Untrusted as e:
        raise PermissionError(e.problem) from None
    try:
        return read_checked(path, "entry", fd)
    except FileNotFoundError:
        return None
    except Untrusted as e:
        raise PermissionError(e.problem) from None
    finally:
        os.close(fd)


def write_owned(path: Path, data: bytes) -> None:
    """Replace `path` atomically by a new 0600 file holding `data`, in a checked
    directory (missing levels are made 0700). Raises PermissionError, OSError."""
    make_dirs(path.parent)
    try:
        fd = open_checked(path.parent, "directory")
    except Untrusted as e:
        raise PermissionError(e.problem) from None
    try:
        atomic_write(fd, path.name, data)
    finally:
        os.close(fd)


def tree_fingerprint(root: str) -> str:
    """SHA-256 over the name, size and modification time of each .py / .lark file of the
    directory tree `root` (its __pycache__ left out): `cache._source_fingerprint`."""
    root = os.path.abspath(root)
    files: list[tuple[list[str], str, int, int]] = []
    pending = [root]
    while pending:  # os.scandir, not pathlib: this runs in every process's start-up
        with os.scandir(pending.pop()) as it:
            for item in it:
                if item.name.endswith((".py", ".lark")) and item.is_file():
                    st = item.stat()
                    name = item.path[len(root) + 1 :].replace(os.sep, "/")
                    files.append((name.split("/"), name, st.st_size, st.st_mtime_ns))
                elif item.name != "__pycache__" and item.is_dir(follow_symlinks=False):
                    pending.append(item.path)
    digest = hashlib.sha256()
    for _, name, size, mtime in sorted(files):
        digest.update(f"{name}\0{size}\0{mtime}\0".encode())
    return digest.hexdigest()
