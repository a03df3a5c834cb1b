"""The size limit of the disk compile cache (dlc/runtime/cache_evict.py): least
recently used entries go first, a disk hit counts as a use, nothing but entry files is
ever deleted, and stores keep the directory under DLC_CACHE_MAX_BYTES."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import dlc
from dlc.runtime import cache, cache_evict

pytestmark = pytest.mark.filterwarnings("error::dlc.runtime.cache.UntrustedCacheWarning")


def _entry(directory: Path, index: int, size: int, used: float) -> str:
    key = f"{index:064x}"
    (directory / f"{key}.o").write_bytes(b"\0" * size)
    (directory / f"{key}.json").write_bytes(b"{}")
    os.utime(directory / f"{key}.json", (used, used))
    return key


def _evict(directory: Path, limit: int) -> list[str]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return cache_evict.evict(fd, limit)
    finally:
        os.close(fd)


def test_least_recently_used_entries_go_first(tmp_path: Path) -> None:
    keys = [_entry(tmp_path, i, 1000, used=1_000_000 + i) for i in range(10)]  # 10,020 bytes
    assert _evict(tmp_path, 20_000) == []  # under the limit: nothing
    removed = _evict(tmp_path, 6_000)  # down to 80% of it: 4 entries of 1,002 bytes stay
    assert removed == keys[:6]
    assert sorted(p.name[:64] for p in tmp_path.glob("*.o")) == keys[6:]


def test_only_entry_files_are_deleted(tmp_path: Path) -> None:
    key = _entry(tmp_path, 1, 5000, used=1.0)
    (tmp_path / "key").write_bytes(b"k" * 5000)
    (tmp_path / "notes.o").write_bytes(b"x" * 5000)
    (tmp_path / f"{'f' * 64}.o").symlink_to(tmp_path / "key")
    assert _evict(tmp_path, 100) == [key]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f" * 64 + ".o", "key", "notes.o"]


def test_a_disk_hit_counts_as_a_use(tmp_path: Path) -> None:
    old = _entry(tmp_path, 1, 100, used=1.0)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        cache_evict.touch(fd, old)
    finally:
        os.close(fd)
    assert (tmp_path / f"{old}.json").stat().st_mtime > 1_000_000


@pytest.mark.parametrize(("value", "limit"), [("123", 123), ("junk", 1 << 30), (None, 1 << 30)])
def test_limit_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, limit: int
) -> None:
    if value is None:
        monkeypatch.delenv("DLC_CACHE_MAX_BYTES", raising=False)
    else:
        monkeypatch.setenv("DLC_CACHE_MAX_BYTES", value)
    assert cache_evict.max_bytes() == limit


def test_stores_keep_the_cache_under_its_limit(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DLC_CACHE_MAX_BYTES", "1")  # every store evicts all but nothing new
    for n in range(3):
        dlc.compile(
            f'module "m{n}"\nstage raw\nfunc @f: (f32) -> f32 {{\n'
            f"'entry(%x: f32):\n    return %x: f32\n}}\n"
        )
    entries = list((cache_dir / f"v{cache.FORMAT}").glob("*.o"))
    assert entries == []  # each store went over the 1-byte limit and was evicted
    assert (cache_dir / "key").exists()  # the key is never touched
