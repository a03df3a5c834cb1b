"""`python -m dlc.runtime.jit_worker`: optimize one part of a module and emit its object
code, in a process of its own (`jit_parts.py`: llvmlite serializes every LLVM call
behind one lock, so threads cannot build parts in parallel; processes can).

Input on stdin: one line of JSON (`opt_level`; `target`: the fields of a
`dlc.target.Target`, or null for the host; `sizes`: the byte size of each part's text),
then the parts' LLVM IR texts, one after the other. Output on stdout: their object code
(`jit_parts.pack_objects`: one object as it is). A failure is a message on stderr and exit status 1 (the parent
then builds the part itself). Nothing read is executed but LLVM IR, through LLVM.

The parent's side is here too: a worker is started (`spawn_worker`) before its input
is ready, so that Python and dlc load while the parent prints the parts, given its
parts (`send`) and its objects read back (`worker_objects`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

    from dlc.target import Target


def main() -> int:
    import llvmlite.binding  # noqa: F401 -- loaded while the parent prints the parts

    from dlc.runtime.jit import build_object
    from dlc.runtime.jit_parts import pack_objects
    from dlc.target import Target

    try:
        header = json.loads(sys.stdin.buffer.readline())
        data = sys.stdin.buffer.read()
        sizes = [int(n) for n in header["sizes"]]
        if sum(sizes) != len(data) or min(sizes, default=0) < 0:
            raise ValueError(f"{len(data)} bytes of input for parts of sizes {sizes}")
        fields = header["target"]
        target = Target(**fields) if fields else None
        objects, start = [], 0
        for size in sizes:
            text = data[start : start + size].decode("utf-8")
            objects.append(build_object(text, int(header["opt_level"]), target))
            start += size
        sys.stdout.buffer.write(pack_objects(objects))
    except Exception as error:  # noqa: BLE001 -- reported to the parent, which builds it
        print(f"dlc.runtime.jit_worker: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


def worker_objects(worker: subprocess.Popen | None, count: int) -> list[bytes | None]:
    """The `count` objects `worker` built, or Nones for those this process must build."""
    from dlc.runtime.jit_parts import unpack_objects

    try:
        built = unpack_objects(finish_worker(worker) or b"")
    except ValueError:  # a malformed bundle: build them here
        built = []
    return list(built) if len(built) == count and all(built) else [None] * count


def start_worker(
    texts: list[str], opt_level: int, target: Target | None
) -> subprocess.Popen | None:
    """`python -m dlc.runtime.jit_worker` building `texts` (its output: their objects,
    `pack_objects`), its input written; None when no worker process can be started (the
    caller builds the parts itself)."""
    worker = spawn_worker()
    send(worker, texts, opt_level, target)
    return worker


def spawn_worker() -> subprocess.Popen | None:
    """A `python -m dlc.runtime.jit_worker` process waiting for its input (`send`),
    or None when none can be started."""
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


def send(
    worker: subprocess.Popen | None, texts: list[str], opt_level: int, target: Target | None
) -> None:
    """Give `worker` the parts to build, written by a thread of this process."""
    if worker is None:
        return
    data = [text.encode() for text in texts]
    header = {
        "opt_level": opt_level,
        "target": dataclasses.asdict(target) if target else None,
        "sizes": [len(d) for d in data],
    }
    feed = threading.Thread(
        target=_feed, args=(worker, json.dumps(header).encode() + b"\n" + b"".join(data))
    )
    feed.start()
    worker.feeder = feed  # type: ignore[attr-defined]


def _feed(worker: subprocess.Popen, data: bytes) -> None:
    try:
        assert worker.stdin is not None
        worker.stdin.write(data)
        worker.stdin.close()
    except OSError:  # the worker died: `finish_worker` sees its status
        pass


def stop_worker(worker: subprocess.Popen | None) -> None:
    """End `worker` (started by this process) whatever it is doing, and reap it."""
    if worker is not None:
        worker.kill()
        if not hasattr(worker, "feeder"):
            send(worker, [], 0, None)  # nothing to read: `finish_worker` joins the feeder
        finish_worker(worker)


def finish_worker(worker: subprocess.Popen | None) -> bytes | None:
    """The worker's object code, or None when it failed."""
    if worker is None:
        return None
    assert worker.stdout is not None and worker.stderr is not None
    out = worker.stdout.read()  # stderr carries a short message at most
    worker.stderr.read()
    worker.wait()
    worker.feeder.join()  # type: ignore[attr-defined]
    worker.stdout.close()
    worker.stderr.close()
    return out if worker.returncode == 0 and out else None


if __name__ == "__main__":
    sys.exit(main())
