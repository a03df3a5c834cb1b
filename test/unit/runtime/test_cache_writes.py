"""Large compile-cache entries are written by a thread after the compile returns
(dlc/runtime/cache_writes.py): a lookup waits for the write of its key, the process for
every write at exit, and the trust checks still warn from the compile."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dlc.runtime import cache, cache_writes

KEY = "ab" * 32


def entry(data: bytes) -> cache.Entry:
    return cache.Entry(b"\x7fELF object", cache.UNIT_META, data={"__dlc_const_0": data})


def test_a_lookup_waits_for_the_write_of_its_key(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_writes, "BYTES", 0)  # every entry written later
    release = threading.Event()
    real = cache._write_entry  # noqa: SLF001
    writers: list[str] = []

    def slow(*args: object) -> None:
        writers.append(threading.current_thread().name)
        release.wait()
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "_write_entry", slow)
    cache.store(KEY, entry(b"weights" * 100), memory=False)
    assert not list(cache_dir.glob(f"**/{KEY}.o"))  # not written yet: the store returned
    threading.Timer(0.2, release.set).start()
    found = cache.lookup(KEY, memory=False)
    assert found is not None and bytes(found.data["__dlc_const_0"]) == b"weights" * 100
    assert writers and writers[0].startswith("dlc cache write")
    cache_writes.wait()
    assert not cache_writes._PENDING  # noqa: SLF001


def test_small_entries_are_written_at_once(cache_dir: Path) -> None:
    cache.store(KEY, entry(b"small"), memory=False)
    assert list(cache_dir.glob(f"**/{KEY}.o")) and not cache_writes._PENDING  # noqa: SLF001


def test_the_process_ends_after_its_writes(cache_dir: Path) -> None:
    """A process that stores a large entry and ends at once leaves the whole entry."""
    code = (
        "from dlc.runtime import cache, cache_writes\n"
        "cache_writes.BYTES = 0\n"
        f"cache.store({KEY!r}, cache.Entry(b'obj', cache.UNIT_META,"
        " data={'__dlc_const_0': bytes(32 << 20)}), memory=False)\n"
    )
    root = Path(cache.__file__).resolve().parents[2]
    env = {"DLC_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=root)
    found = cache.lookup(KEY, memory=False)
    assert found is not None and len(found.data["__dlc_const_0"]) == 32 << 20


def test_an_untrusted_directory_warns_from_the_store(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_writes, "BYTES", 0)
    cache_dir.chmod(0o777)
    try:
        with pytest.warns(cache.UntrustedCacheWarning, match="writable by group or others"):
            cache.store("cd" * 32, entry(b"weights"), memory=False)
    finally:
        cache_dir.chmod(0o700)
    assert not cache_writes._PENDING  # noqa: SLF001
