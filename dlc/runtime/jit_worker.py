"""`python -m dlc.runtime.jit_worker`: optimize parts of a module and emit their object
code, in a process of its own (`jit_parts.py`: llvmlite serializes every LLVM call
behind one lock, so threads cannot build parts in parallel; processes can).

Input on stdin: one line of JSON (`opt_level`; `target`: the fields of a
`dlc.target.Target`, or null for the host), then parts, each its LLVM IR text's byte
size (8 bytes, little-endian) and the text; the input ends after a whole part. Output on
stdout: each part's object code as it is built, its size (8 bytes) then its bytes, so
the parent hands out the next part when one is done. A failure is a message on stderr
and exit status 1 (the parent then builds the part itself). Nothing read is executed
but LLVM IR, through LLVM.

The parent's side is here too: a worker is started (`start_worker`) before its input
is ready, so that Python, dlc and LLVM load (the worker builds a tiny module first)
while the parent prints the parts; each part is built with `build` (one thread of the
parent per worker) and the worker ends with `finish_worker`. A compile that will likely
be split starts its workers earlier still, as its loop level is lowered (`start_ahead`:
`start_worker` hands those out first; `stop_ahead` ends those no compile took).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import struct
import sys
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator

    from dlc.target import Target

SIZE = struct.Struct("<Q")
WARM_UP = "define void @dlc.warm_up() {\n  ret void\n}\n"
_AHEAD: list[tuple[int, Target | None, subprocess.Popen]] = []  # `start_ahead`'s workers
_AHEAD_LOCK = threading.Lock()


def main() -> int:
    import llvmlite.binding  # noqa: F401 -- loaded while the parent prints the parts

    from dlc.runtime.jit import build_object
    from dlc.target import Target

    try:
        header = json.loads(sys.stdin.buffer.readline())
        fields = header["target"]
        target = Target(**fields) if fields else None
        opt_level = int(header["opt_level"])
        build_object(WARM_UP, opt_level, target)  # LLVM's first build sets it up
        while (text := read_frame(sys.stdin.buffer)) is not None:
            obj = build_object(text.decode("utf-8"), opt_level, target)
            sys.stdout.buffer.write(SIZE.pack(len(obj)) + obj)
            sys.stdout.buffer.flush()
    except Exception as error:  # noqa: BLE001 -- reported to the parent, which builds it
        print(f"dlc.runtime.jit_worker: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next part (its size, then its bytes) from `stream`; None at its end
    (ValueError when it ends inside a part)."""
    head = stream.read(SIZE.size)
    if not head:
        return None
    if len(head) < SIZE.size:
        raise ValueError(f"input ends inside a part's size ({len(head)} bytes)")
    (size,) = SIZE.unpack(head)
    data = stream.read(size)
    if len(data) != size:
        raise ValueError(f"{len(data)} bytes of input for a part of {size}")
    return data


def start_ahead(opt_level: int, target: Target | None, count: int) -> None:
    """Start `count` workers for `opt_level` and `target` now, for the parts of a
    compile still being lowered: `start_worker` hands them out first."""
    started = [(opt_level, target, w) for w in (_started(opt_level, target) for _ in range(count))]
    with _AHEAD_LOCK:
        _AHEAD.extend((level, t, w) for level, t, w in started if w is not None)


def stop_ahead() -> None:
    """End the workers `start_ahead` started that no compile took."""
    with _AHEAD_LOCK:
        left = [w for _, _, w in _AHEAD]
        _AHEAD.clear()
    for worker in left:
        stop_worker(worker)


@contextlib.contextmanager
def stopping_ahead() -> Iterator[None]:
    """A compile that may start workers ahead (`start_ahead`): those it did not take
    are stopped as it ends, whether it succeeded or not."""
    try:
        yield
    finally:
        stop_ahead()


def start_worker(opt_level: int, target: Target | None) -> subprocess.Popen | None:
    """`python -m dlc.runtime.jit_worker` told `opt_level` and `target`, waiting for
    parts (`build`): one `start_ahead` started if there is one, else a new one; None
    when none can be started (the caller builds the parts itself)."""
    with _AHEAD_LOCK:
        for i, (level, t, worker) in enumerate(_AHEAD):
            if level == opt_level and t == target and worker.poll() is None:
                del _AHEAD[i]
                return worker
    return _started(opt_level, target)


def _started(opt_level: int, target: Target | None) -> subprocess.Popen | None:
    worker = spawn_worker()
    if worker is None:
        return None
    header = {"opt_level": opt_level, "target": dataclasses.asdict(target) if target else None}
    if _written(worker, json.dumps(header).encode() + b"\n"):
        return worker
    stop_worker(worker)
    return None


def build(worker: subprocess.Popen, text: str) -> bytes | None:
    """The object code `worker` builds of LLVM IR `text`, or None when it failed (the
    worker is then finished: no more parts to it)."""
    data = text.encode()
    if not _written(worker, SIZE.pack(len(data)) + data):
        return None
    try:
        assert worker.stdout is not None
        return read_frame(worker.stdout) or None
    except (OSError, ValueError):  # it died, or wrote half an object
        return None


def _written(worker: subprocess.Popen, data: bytes) -> bool:
    try:
        assert worker.stdin is not None
        worker.stdin.write(data)
        worker.stdin.flush()
    except OSError:  # the worker died: `finish_worker` sees its status
        return False
    return True


def spawn_worker() -> subprocess.Popen | None:
    """A `python -m dlc.runtime.jit_worker` process waiting for its input
    (`start_worker`), or None when none can be started."""
    import subprocess

    if not sys.executable:
        return None
    root = str(Path(__file__).resolve().parents[2])  # the dlc this process runs
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    try:
        return subprocess.Popen(
            # -P: the working directory is not on the worker's path (nothing found
            # there is imported); PYTHONPATH leads with this process's dlc
            [sys.executable, "-P", "-m", "dlc.runtime.jit_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError:
        return None


def stop_worker(worker: subprocess.Popen | None) -> None:
    """End `worker` (started by this process) whatever it is doing, and reap it."""
    if worker is not None:
        worker.kill()
        finish_worker(worker)


def finish_worker(worker: subprocess.Popen | None) -> bool:
    """Close `worker`'s input, let it end and reap it: whether it ended well."""
    if worker is None:
        return False
    assert worker.stdin is not None and worker.stdout is not None and worker.stderr is not None
    try:
        worker.stdin.close()
    except OSError:  # it died with input unread
        pass
    worker.stdout.read()
    worker.stderr.read()  # a short message at most
    worker.wait()
    worker.stdout.close()
    worker.stderr.close()
    return worker.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
