"""Large compile-cache entries written to disk by a thread, after the compile returns.

A model's entry holds its weights (BERT-base: 414 MB), and writing them took a
quarter of its cold compile, while the compiled module was ready. `later(key, write)`
runs `write` on a thread of its own; the process waits for it at exit (the thread is
not a daemon), and `wait(key)` before the disk entry of `key` is read, so a lookup
never misses an entry only because it is still being written. A write that fails is
ignored, as a synchronous one is (`cache.store`): the cache only costs the next compile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

BYTES = 16 << 20
"""Entries at least this large (object code and data) are written later."""

_PENDING: dict[str, threading.Thread] = {}
_LOCK = threading.Lock()


def later(key: str, write: Callable[[], None]) -> None:
    """Run `write` (the disk entry of `key`) on a thread; a write of `key` in progress
    ends first."""
    wait(key)
    thread = threading.Thread(target=_run, args=(write,), name=f"dlc cache write {key[:12]}")
    with _LOCK:
        _PENDING[key] = thread
    thread.start()


def _run(write: Callable[[], None]) -> None:
    try:
        write()
    except OSError:  # a full or read-only cache: the next compile compiles again
        pass


def wait(key: str | None = None) -> None:
    """Wait until the write of `key` (None: every write in progress) has ended."""
    with _LOCK:
        threads = list(_PENDING.values()) if key is None else [_PENDING.get(key)]
    for thread in threads:
        if thread is not None:
            thread.join()
    with _LOCK:
        for k, t in list(_PENDING.items()):
            if not t.is_alive():
                del _PENDING[k]
