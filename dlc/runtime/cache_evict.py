"""Size limit of the disk compile cache (`cache.py`): after each store, when the
entries of the current format take more than `max_bytes()` (`DLC_CACHE_MAX_BYTES`,
default 1 GiB), the least recently used ones (by the mtime of their `.json`, which
`touch` refreshes on every disk hit) are deleted until they take at most 80% of it.
Only regular files named like entries (`<64 hex>.json`, `<64 hex>.o`, quick records
`<64 hex>.quick`) in the checked
entry directory are ever deleted; directories of other formats are left alone."""

from __future__ import annotations

import contextlib
import os
import re
import stat

DEFAULT_MAX_BYTES = 1 << 30
ENTRY_FILE = re.compile(r"([0-9a-f]{64})\.(json|o|quick)")


def max_bytes() -> int:
    """`DLC_CACHE_MAX_BYTES` (an integer; invalid or missing: the default)."""
    try:
        return max(0, int(os.environ.get("DLC_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES)))
    except ValueError:
        return DEFAULT_MAX_BYTES


def touch(dir_fd: int, key: str, suffix: str = "json") -> None:
    """Mark entry `key` (or its quick record, `suffix` "quick") as just used (best
    effort)."""
    with contextlib.suppress(OSError):
        os.utime(f"{key}.{suffix}", dir_fd=dir_fd, follow_symlinks=False)


def evict(dir_fd: int, limit: int | None = None) -> list[str]:
    """Delete least recently used entries of the directory `dir_fd` while they take
    more than 80% of `limit` (once they take more than `limit`); returns the keys."""
    limit = max_bytes() if limit is None else limit
    sizes: dict[str, int] = {}
    used: dict[str, float] = {}
    with os.scandir(dir_fd) as it:
        for item in it:
            match = ENTRY_FILE.fullmatch(item.name)
            if match is None:
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            key = match.group(1)
            sizes[key] = sizes.get(key, 0) + st.st_size
            if match.group(2) in ("json", "quick"):
                used[key] = st.st_mtime
    total = sum(sizes.values())
    if total <= limit:
        return []
    removed = []
    for key in sorted(sizes, key=lambda k: used.get(k, 0.0)):
        if total <= limit * 0.8:
            break
        for name in (f"{key}.json", f"{key}.o", f"{key}.quick"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
        total -= sizes[key]
        removed.append(key)
    return removed
