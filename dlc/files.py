"""Output files written atomically, never through an existing path.

dlc writes its outputs (libraries, headers, object files, `dlc-opt -o` text, tool
data) into directories other users may share. Opening an existing name for writing
follows whatever is there: a symlink another user planted in a sticky `/tmp`-like
directory would make dlc write the victim's file. Here the bytes go to a fresh file
in the target's directory (created with `O_CREAT | O_EXCL`, so never an existing path
or symlink) that `os.replace` then renames onto the name: a symlink at the name is
replaced, not followed, and readers never see half a file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class AtomicFile:
    """A fresh temporary file next to `path` (`stream`, binary) that `commit` renames
    onto `path` and `discard` removes. `mode` is masked by the umask, as `open` would."""

    def __init__(self, path: str | os.PathLike[str], mode: int = 0o666) -> None:
        self.target = Path(os.fspath(path))
        self.mode = mode
        fd, self.tmp = tempfile.mkstemp(
            prefix=f".{self.target.name}.", suffix=".tmp", dir=self.target.parent
        )
        self.stream: IO[bytes] = os.fdopen(fd, "wb")

    def commit(self) -> None:
        try:
            self.stream.flush()
            os.fchmod(self.stream.fileno(), self.mode & ~_umask())
            self.stream.close()
            os.replace(self.tmp, self.target)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        self.stream.close()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def is_device(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a character device or a FIFO (`/dev/null`, `/dev/stdout`'s
    target): written in place, as there is no file to replace (never a symlink: lstat)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


@contextmanager
def atomic_output(path: str | os.PathLike[str], mode: int = 0o666) -> Iterator[IO[bytes]]:
    """A binary stream whose bytes become the file `path` when the block ends without
    an exception (else nothing at `path` changes); OSError as `open` would raise it."""
    out = AtomicFile(path, mode)
    try:
        yield out.stream
    except BaseException:
        out.discard()
        raise
    out.commit()


def write_atomically(path: str | os.PathLike[str], data: bytes, mode: int = 0o666) -> None:
    """`path` holds exactly `data` (written with `atomic_output`)."""
    with atomic_output(path, mode) as stream:
        stream.write(data)


def install_file(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """A copy of the file `source` (a scratch file: a linker's output) at `path`, with
    `source`'s permission bits, written with `atomic_output`."""
    mode = os.stat(source).st_mode & 0o777
    with open(source, "rb") as src, atomic_output(path, mode) as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
