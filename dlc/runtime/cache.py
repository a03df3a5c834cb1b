"""The compile cache: machine code + JSON metadata keyed by a hash of program and target.

`lookup(key)` / `store(key, entry)` over an in-memory LRU and an owner-only directory of
HMAC-authenticated entries (never Python: JSON checked field by field); the key covers
the printed program, the options, dlc's sources, the library versions and the host.
Layout, trust checks and eviction: docs/design/caching.md and docs/design/security.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib.util
import json
import os
import secrets
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlc.runtime import cache_evict, cache_writes
from dlc.runtime.cache_files import (  # noqa: F401 -- read_owned, write_owned, tree_fingerprint re-exported
    Chunks,
    Untrusted,
    atomic_write,
    make_dirs,
    open_checked,
    read_checked,
    read_owned,
    tree_fingerprint,
    write_new,
    write_owned,
)
from dlc.runtime.cache_records import UNIT_META, Metadata, UnitMetadata, data_layout, valid_meta

FORMAT = 8  # 8: constant data after the object code; 7: typed stacks, the dlc.fn. symbol namespace; 6: location-free messages; 5: unbounded functions; 4: a call context per call; 3: records carry an HMAC (2: a plain SHA-256)
HANDLER_SEGMENT = "dlc.interrupt.handler"  # the signal handler's code in an entry's file
KEY_FILE = "key"
KEY_BYTES = 32
MEMORY_ENTRIES = 64
MEMORY_BYTES = 64 << 20  # object code + optimized IR text kept in memory, at most
_LOCK = threading.Lock()
_MEMORY: OrderedDict[str, Entry] = OrderedDict()
_QUICK: OrderedDict[str, dict[str, Any]] = OrderedDict()  # quick records (`quick.py`)
_FINGERPRINT: list[str] = []
_TARGET: list[dict[str, str]] = []  # `_target()` of this process
_WARNED: set[str] = set()  # directories already warned about in this process


class UntrustedCacheWarning(UserWarning):
    """A directory, key or entry of the disk cache failed an owner or mode check."""


@dataclass
class Entry:
    """Object code of one compile, its metadata, (in memory only) the optimized IR, the
    constant data the code reads by symbol (`JITModule.data`: the weights) and the
    object code of dlc's signal handler (`interrupts.handler_object`: a new process
    loads it from here instead of compiling it)."""

    obj: bytes
    meta: Metadata | UnitMetadata
    optimized_ir: str | None = field(default=None, compare=False)
    data: Mapping[str, bytes | memoryview] = field(default_factory=dict, compare=False)
    handler: bytes | memoryview | None = field(default=None, compare=False)

    def size(self) -> int:
        data = sum(len(d) for d in self.data.values()) + len(self.handler or b"")
        return len(self.obj) + len(self.optimized_ir or "") + data


def enabled() -> bool:
    """False when the environment variable DLC_CACHE is 0 (no memory or disk cache)."""
    return os.environ.get("DLC_CACHE", "1").strip() not in ("0", "off", "false", "no")


def cache_dir() -> Path:
    """`$DLC_CACHE_DIR`, else `$XDG_CACHE_HOME/dlc`, else `~/.cache/dlc`."""
    explicit = os.environ.get("DLC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "dlc"


def clear_memory() -> None:
    """Forget the in-memory entries and quick records (the disk entries stay)."""
    with _LOCK:
        _MEMORY.clear()
        _QUICK.clear()


def _source_fingerprint() -> str:
    """SHA-256 over the name, size and modification time of each of dlc's own .py /
    .lark files, once per process. The rule Python's own bytecode cache trusts: an edit,
    a checkout or a reinstall changes a size or a time; reading and hashing every file
    instead cost 10-20 ms of each warm start."""
    if not _FINGERPRINT:
        _FINGERPRINT.append(tree_fingerprint(os.path.dirname(os.path.dirname(__file__))))
    return _FINGERPRINT[0]


def _xdsl_version() -> str:
    """xDSL's version from its dist-info directory's name, found without importing xDSL
    (the warm path never loads it; `xdsl.__version__` would also ask importlib.metadata:
    tens of milliseconds), else from xdsl itself."""
    spec = importlib.util.find_spec("xdsl")
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
        with contextlib.suppress(OSError):
            for name in os.listdir(site):
                if name.startswith("xdsl-") and name.endswith(".dist-info"):
                    return name[len("xdsl-") : -len(".dist-info")]
    import xdsl

    return str(getattr(xdsl, "__version__", "?"))


def _target() -> dict[str, str]:
    """The host and the versions of what made the code, once per process (every key
    needs them: a compile computes its entry key and its quick record's key)."""
    if _TARGET:
        return _TARGET[0]
    import llvmlite  # the package alone: its version (`llvm_c` needs no binding)

    from dlc import llvm_c

    _TARGET.append(
        {
            "triple": llvm_c.process_triple(),
            "cpu": llvm_c.host_cpu_name(),
            "features": llvm_c.flatten(llvm_c.host_cpu_features()),
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm_c.llvm_version())),
            "xdsl": _xdsl_version(),
        }
    )
    return _TARGET[0]


def key(options: dict[str, Any], program: str) -> str:
    """SHA-256 hex key of a program (`program`: a digest of its text and source
    locations, see `dlc.api.cache_key`) compiled with `options` on this host."""
    header = {
        "format": FORMAT,
        "source": _source_fingerprint(),
        "target": _target(),
        "options": options,
    }
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    digest.update(b"\0" + program.encode())
    return digest.hexdigest()


def lookup(key: str, *, memory: bool = True) -> Entry | None:
    """The entry for `key` from memory, else from disk (then kept there: both `memory`)."""
    if not enabled():
        return None
    with _LOCK:
        entry = _MEMORY.get(key) if memory else None
        if entry is not None:
            _MEMORY.move_to_end(key)
            return entry
    cache_writes.wait(key)  # a write of it in progress
    try:
        entry = _load(key)
    except (OSError, ValueError) as error:  # missing, unreadable, malformed, untrusted
        _warn_once(error)
        return None
    if entry is not None and memory:
        _remember(key, entry)
    return entry


def store(key: str, entry: Entry, *, memory: bool = True) -> None:
    """Keep `entry` in memory (if `memory`), write it to disk (errors are ignored)."""
    if not enabled():
        return
    if memory:
        _remember(key, entry)
    try:
        _write(key, entry)
    except OSError as error:  # a read-only or full cache only costs the next compile
        _warn_once(error)


def forget(key: str) -> None:
    """Drop `key` from memory (an entry that failed to load into the JIT)."""
    with _LOCK:
        _MEMORY.pop(key, None)


def _remember(key: str, entry: Entry) -> None:
    with _LOCK:
        _MEMORY[key] = entry
        _MEMORY.move_to_end(key)
        total = sum(e.size() for e in _MEMORY.values())
        while len(_MEMORY) > 1 and (len(_MEMORY) > MEMORY_ENTRIES or total > MEMORY_BYTES):
            total -= _MEMORY.popitem(last=False)[1].size()


def _warn_once(error: Exception) -> None:
    """Warn about an untrusted cache path, once per process and directory: a refused
    cache stays refused on every compile, and repeated warnings would bury the output."""
    if not isinstance(error, Untrusted):
        return
    where = str(error.where)
    with _LOCK:
        if where in _WARNED:
            return
        _WARNED.add(where)
    # stacklevel 3: the line of dlc/api.py that called `lookup` or `store`
    warnings.warn(str(error), UntrustedCacheWarning, stacklevel=3)


def _create_secret(base_fd: int) -> None:
    """A fresh random key in `key`, written to a private temporary file and hard-linked
    into place: the link fails when another process made a key first (that one is
    kept), and no reader ever sees a half-written key."""
    tmp = f"{KEY_FILE}.{secrets.token_hex(8)}.tmp"
    try:
        write_new(base_fd, tmp, secrets.token_bytes(KEY_BYTES))
        os.link(tmp, KEY_FILE, src_dir_fd=base_fd, dst_dir_fd=base_fd, follow_symlinks=False)
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=base_fd)


def _secret(base: Path, base_fd: int, create: bool) -> bytes:
    """The per-user HMAC key kept in the base directory (made first with `create`)."""
    path = base / KEY_FILE
    try:
        secret = read_checked(path, "key", base_fd)
    except FileNotFoundError:
        if not create:
            raise
        _create_secret(base_fd)
        secret = read_checked(path, "key", base_fd)
    if len(secret) != KEY_BYTES:
        raise Untrusted(path, "key", f"does not hold a {KEY_BYTES}-byte key")
    return secret


def _open_disk(create: bool) -> tuple[Path, int, bytes]:
    """The entry directory `v<FORMAT>`, a descriptor of it (the caller closes it) and
    the key, after every check; with `create`, missing directories and key are made
    first. Raises Untrusted, OSError."""
    base = cache_dir()
    if create:
        make_dirs(base)
    base_fd = open_checked(base, "directory")
    try:
        secret = _secret(base, base_fd, create)
        entries = base / f"v{FORMAT}"
        if create:
            with contextlib.suppress(FileExistsError):  # checked when opened
                os.mkdir(entries.name, 0o700, dir_fd=base_fd)
        return entries, open_checked(entries, "directory", base_fd), secret
    finally:
        os.close(base_fd)


def _mac(secret: bytes, record: dict[str, Any], chunks: Chunks) -> str:
    """HMAC-SHA256 of a record (format, key, metadata, the data's layout; canonical
    JSON) and the `.o` file's bytes (`chunks`: the object code, then each data segment,
    never concatenated: the data is the weights, 100 MB and more). JSON text holds no
    NUL byte, so the separator makes the message unambiguous."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    mac = hmac.new(secret, text + b"\0", hashlib.sha256)
    for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
        mac.update(chunk)
    return mac.hexdigest()


def _write(key: str, entry: Entry) -> None:
    _, fd, secret = _open_disk(create=True)  # checked here: a warning names the compile
    if entry.size() < cache_writes.BYTES:
        _write_entry(fd, secret, key, entry)
    else:  # the weights: written after the compile returns
        cache_writes.later(key, lambda: _write_entry(fd, secret, key, entry))


def _write_entry(fd: int, secret: bytes, key: str, entry: Entry) -> None:
    try:
        record: dict[str, Any] = {"format": FORMAT, "key": key, "meta": entry.meta}
        segments = dict(entry.data)
        if entry.handler:  # a data segment of a name no symbol of dlc's code has
            segments[HANDLER_SEGMENT] = entry.handler
        record["data"] = [[name, len(d)] for name, d in segments.items()]
        chunks = [entry.obj, *segments.values()]
        record["mac"] = _mac(secret, record, chunks)
        atomic_write(fd, f"{key}.o", chunks)
        # In compile order (the MAC is over the canonical, sorted form): `stats` reads
        # back in the order a fresh compile reports it.
        atomic_write(fd, f"{key}.json", json.dumps(record).encode())
        cache_evict.evict(fd)  # the least recently used entries beyond the size limit
    finally:
        os.close(fd)


def _load(key: str) -> Entry | None:
    """The disk entry for `key`, or None when it fails a check (OSError when missing)."""
    entries, fd, secret = _open_disk(create=False)
    try:
        record = json.loads(read_checked(entries / f"{key}.json", "entry", fd))
        obj = read_checked(entries / f"{key}.o", "entry", fd)
        cache_evict.touch(fd, key)
    finally:
        os.close(fd)
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != key:
        return None
    mac = record.pop("mac", None)
    expected = _mac(secret, record, obj).encode()
    if not isinstance(mac, str) or not hmac.compare_digest(mac.encode(), expected):
        return None  # not written with this user's key: planted, copied or damaged
    meta = record.get("meta")
    layout = data_layout(record.get("data"), len(obj))
    if not (valid_meta(meta) or meta == UNIT_META) or layout is None:
        return None
    whole = memoryview(obj)  # the data stays in the file's bytes: slices, no copies
    start = len(obj) - sum(size for _, size in layout)
    data: dict[str, bytes | memoryview] = {}
    for name, size in layout:
        data[name] = whole[start : start + size]
        start += size
    handler = data.pop(HANDLER_SEGMENT, None)
    code = obj[: len(obj) - sum(size for _, size in layout)]
    return Entry(code, meta, data=data, handler=handler)


def lookup_quick(key: str) -> dict[str, Any] | None:
    """The quick record `key` (`dlc.runtime.quick`: a dict, checked there) from memory,
    else from disk; None when missing, malformed or untrusted."""
    if not enabled():
        return None
    with _LOCK:
        record = _QUICK.get(key)
    if record is not None:
        return record
    try:
        entries, fd, secret = _open_disk(create=False)
        try:
            data = json.loads(read_checked(entries / f"{key}.quick", "entry", fd))
            cache_evict.touch(fd, key, "quick")
        finally:
            os.close(fd)
    except (OSError, ValueError) as error:
        _warn_once(error)
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    mac = data.pop("mac", None)
    expected = _mac(secret, data, b"").encode()
    if not isinstance(mac, str) or not hmac.compare_digest(mac.encode(), expected):
        return None
    record = data.get("record")
    if not isinstance(record, dict):
        return None
    with _LOCK:
        _QUICK[key] = record
    return record


def store_quick(key: str, record: dict[str, Any]) -> None:
    """Keep quick record `record` (JSON-able) under `key` in memory and on disk."""
    if not enabled():
        return
    with _LOCK:
        _QUICK[key] = record
        while len(_QUICK) > MEMORY_ENTRIES:
            _QUICK.popitem(last=False)
    try:
        _, fd, secret = _open_disk(create=True)
        try:
            data: dict[str, Any] = {"format": FORMAT, "key": key, "record": record}
            data["mac"] = _mac(secret, data, b"")
            atomic_write(fd, f"{key}.quick", json.dumps(data, sort_keys=True).encode())
        finally:
            os.close(fd)
    except OSError as error:
        _warn_once(error)
