"""The runtime side of the superoptimizer's measured costs (`superoptimize{costs=...}`).

`install()` gives `dlc.passes.graph.superopt.measure` what a pass may not do itself
(the passes sit below the runtime): compile and time one op with dlc's own kernels
(opt_level 2, one thread, the median of a few calls after a warm-up) and read and write
the cost table only where no one else can write: the table and its directory must be
owned by the current user, not writable by group or others and not symbolic links (the
compile cache's rule); directories it creates are 0700, the table is replaced
atomically by a 0600 file. dlc-opt installs it; Python callers of the pass call it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import statistics
import time
from pathlib import Path

from dlc.passes.graph.superopt import measure

SAMPLE_SECONDS = 0.2  # timing budget per measured op, after one warm-up call
MAX_SAMPLES = 9


def untrusted(st: os.stat_result, directory: bool) -> str | None:
    """Why a file or directory with status `st` could hold someone else's data."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if directory != stat.S_ISDIR(st.st_mode) or not (directory or stat.S_ISREG(st.st_mode)):
        return "is not a directory" if directory else "is not a regular file"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by the current user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check(path: Path, st: os.stat_result, directory: bool) -> None:
    why = untrusted(st, directory)
    if why:
        raise PermissionError(f"{path} {why}")


def read(path: Path) -> bytes | None:
    """The table's bytes, None when missing (measure.Backend.read)."""
    if os.path.lexists(path.parent):
        check(path.parent, os.stat(path.parent, follow_symlinks=False), True)
    if not os.path.lexists(path):
        return None
    check(path, os.stat(path, follow_symlinks=False), False)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        check(path, os.fstat(f.fileno()), False)  # the file opened is the one checked
        return f.read()


def write(path: Path, data: bytes) -> None:
    """Replace the table atomically by a new 0600 file (measure.Backend.write)."""
    missing = [p for p in (path.parent, *path.parent.parents) if not os.path.lexists(p)]
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(level, 0o700)
    check(path.parent, os.stat(path.parent, follow_symlinks=False), True)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        with os.fdopen(os.open(tmp, flags, 0o600), "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def measure_ns(text: str) -> float:
    """Median nanoseconds of one call of @op in `text`, compiled by dlc on one thread."""
    from dlc.api import compile_graph_module
    from dlc.parser import parse_module
    from dlc.program_levels import defined_functions
    from dlc.tuner.measure import random_inputs

    module = parse_module(text, "<superopt cost>")
    fn = compile_graph_module(module, opt_level=2, num_threads=1)["op"]
    args = random_inputs(defined_functions(module)["op"], seed=0)
    fn(*args)  # warm-up
    samples: list[float] = []
    stop = time.perf_counter() + SAMPLE_SECONDS
    while len(samples) < 3 or (len(samples) < MAX_SAMPLES and time.perf_counter() < stop):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e9


def default_path() -> Path:
    """`<compile cache dir>/superopt-costs-<host cpu>.json`: costs belong to one CPU."""
    import llvmlite.binding as llvm

    from dlc.runtime.cache import cache_dir

    return cache_dir() / f"superopt-costs-{llvm.get_host_cpu_name()}.json"


class Runtime:
    """measure.Backend over this module's functions."""

    default_path = staticmethod(default_path)
    read = staticmethod(read)
    write = staticmethod(write)
    measure = staticmethod(measure_ns)


def install() -> None:
    """Let `superoptimize{costs=measured|table}` measure and use its cost table."""
    measure.provide(Runtime())
