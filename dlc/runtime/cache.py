"""The compile cache: machine code + JSON metadata keyed by a hash of program and target.

`compile_graph_module` (dlc/api.py) asks `lookup(key)` before lowering and calls
`store(key, entry)` after a full compile. An `Entry` is the relocatable object code MCJIT
produced plus the JSON-able metadata needed to rebuild a `CompiledModule` (signatures
come from the graph module, which the caller has anyway). Every hit builds a fresh MCJIT
engine from the object code, so each compiled module has its own globals, variables,
generator state and arenas.

Two levels: an in-memory LRU (also keeps the optimized LLVM IR text) and a directory
(`$DLC_CACHE_DIR`, else `$XDG_CACHE_HOME/dlc`, else `~/.cache/dlc`) holding
`<key>.o` and `<key>.json`. `DLC_CACHE=0` turns both off. Nothing read from disk is
executed as Python: the metadata is JSON checked field by field, the object file is
checked against the size and SHA-256 recorded in the JSON. Files are written to a
temporary name and renamed (the JSON last: it commits the entry); an unreadable,
truncated or malformed entry is ignored and rewritten by the next full compile.

The key covers the printed graph module, the source locations of its ops (they appear in
trap and bounds messages), the compile options, a fingerprint of dlc's own source files
(so an edited compiler never reuses stale code), the xDSL / llvmlite / LLVM versions and
the host triple, CPU name and features.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 3
MEMORY_ENTRIES = 64
MEMORY_BYTES = 64 << 20  # object code + optimized IR text kept in memory, at most
_LOCK = threading.Lock()
_MEMORY: OrderedDict[str, Entry] = OrderedDict()
_FINGERPRINT: list[str] = []


@dataclass
class Entry:
    """Object code of one compile, its metadata and (in memory only) the optimized IR."""

    obj: bytes
    meta: dict[str, Any]
    optimized_ir: str | None = field(default=None, compare=False)

    def size(self) -> int:
        return len(self.obj) + len(self.optimized_ir or "")


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
    """Forget the in-memory entries (the disk entries stay)."""
    with _LOCK:
        _MEMORY.clear()


def _source_fingerprint() -> str:
    """SHA-256 over dlc's own .py / .lark files (path and contents), once per process."""
    if _FINGERPRINT:
        return _FINGERPRINT[0]
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".lark") and p.is_file())
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def _target() -> dict[str, str]:
    import llvmlite
    import llvmlite.binding as llvm_binding
    import xdsl

    return {
        "triple": llvm_binding.get_process_triple(),
        "cpu": llvm_binding.get_host_cpu_name(),
        "features": llvm_binding.get_host_cpu_features().flatten(),
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm_binding.llvm_version_info)),
        "xdsl": str(getattr(xdsl, "__version__", "?")),
    }


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


def lookup(key: str) -> Entry | None:
    """The entry for `key` from memory, else from disk (then also kept in memory)."""
    if not enabled():
        return None
    with _LOCK:
        entry = _MEMORY.get(key)
        if entry is not None:
            _MEMORY.move_to_end(key)
            return entry
    entry = _load(key)
    if entry is not None:
        _remember(key, entry)
    return entry


def store(key: str, entry: Entry) -> None:
    """Keep `entry` in memory and write it to disk (write errors are ignored)."""
    if not enabled():
        return
    _remember(key, entry)
    try:
        _write(key, entry)
    except OSError:
        pass  # a read-only or full cache directory only costs the next compile


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


def _paths(key: str) -> tuple[Path, Path]:
    base = cache_dir() / f"v{FORMAT}"
    return base / f"{key}.json", base / f"{key}.o"


def _atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file next to `path`, then rename it over `path`."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write(key: str, entry: Entry) -> None:
    meta_path, obj_path = _paths(key)
    record = {
        "format": FORMAT,
        "key": key,
        "object_size": len(entry.obj),
        "object_sha256": hashlib.sha256(entry.obj).hexdigest(),
        "meta": entry.meta,
    }
    _atomic_write(obj_path, entry.obj)
    _atomic_write(meta_path, json.dumps(record, sort_keys=True).encode())


def _load(key: str) -> Entry | None:
    """The disk entry for `key`, or None when it is missing or fails any check."""
    meta_path, obj_path = _paths(key)
    try:
        record = json.loads(meta_path.read_bytes())
        obj = obj_path.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != key:
        return None
    if record.get("object_size") != len(obj):
        return None
    if record.get("object_sha256") != hashlib.sha256(obj).hexdigest():
        return None
    meta = record.get("meta")
    if not valid_meta(meta):
        return None
    return Entry(obj, meta)


def _str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _int_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and type(v) is int for k, v in value.items()
    )


def valid_meta(meta: object) -> bool:
    """Whether `meta` has exactly the shape dlc/api.py writes (see `metadata` there)."""
    if not isinstance(meta, dict):
        return False
    lists = ("native", "externs")
    if not all(_str_list(meta.get(name)) for name in lists):
        return False
    messages = meta.get("messages")
    if messages is not None and not _str_list(messages):
        return False
    for name in ("stats", "passes"):
        table = meta.get(name)
        if not isinstance(table, dict) or not all(_int_map(s) for s in table.values()):
            return False
    arena = meta.get("arena_bytes")
    return type(arena) is int and arena >= 0 and _int_map(meta.get("vars"))
