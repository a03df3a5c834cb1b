"""The warm start: a compiled module from the compile cache without parsing its program.

A quick record, keyed on the exact text and options, holds the full cache key, the
signatures and the located ops, so `load` builds a `CompiledModule` without importing
xDSL; any doubt returns None and the caller takes the full path (`remember` writes the
record again). Details: docs/design/caching.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from dlc.runtime import cache
from dlc.runtime.cache_records import valid_meta
from dlc.runtime.fastcall import ARRAY_LAYOUT, FAST_CALLS
from dlc.runtime.jit import JITModule
from dlc.runtime.module import CompiledModule, Levels
from dlc.runtime.native import install, rendered_messages, resolve_symbols
from dlc.runtime.signature import FuncSig, from_json, to_json
from dlc.target import Target


def quick_key(text: str | bytes, facts: dict[str, Any]) -> str:
    """The key of the quick record of program `text` compiled under `facts` (the
    options, the allowed externs, dlc's version: `dlc.options.quick_facts`)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    facts = {**facts, "array_layout": ARRAY_LAYOUT, "fast_calls": FAST_CALLS}
    return cache.key(facts, "quick\0" + hashlib.sha256(data).hexdigest())


def remember(
    qkey: str,
    entry_key: str,
    sigs: list[FuncSig | None],
    positions: list[tuple[str, int, int]],
) -> None:
    """Write the quick record of a compile whose cache entry is `entry_key`, whose
    (differentiated) functions have the signatures `sigs` (`func_signature`) and whose
    located ops are at `positions` (file, line, column) in walk order — if every
    function has a plain signature and every position is in one file."""
    plain = [s for s in sigs if s is not None]
    if len(plain) != len(sigs) or len({p[0] for p in positions}) > 1:
        return
    record = {
        "key": entry_key,
        "functions": [to_json(s) for s in plain],
        "positions": [[line, column] for _, line, column in positions],
    }
    cache.store_quick(qkey, record)


def _read(record: dict[str, Any]) -> tuple[str, list[FuncSig], list[tuple[int, int]]] | None:
    key, functions, positions = record.get("key"), record.get("functions"), record.get("positions")
    if not isinstance(key, str) or not isinstance(functions, list):
        return None
    if not isinstance(positions, list):
        return None
    loaded = [from_json(f) for f in functions]
    sigs = [s for s in loaded if s is not None]
    if len(sigs) != len(loaded) or len({s.name for s in sigs}) != len(sigs):
        return None
    where: list[tuple[int, int]] = []
    for p in positions:
        if not (isinstance(p, list) and len(p) == 2 and all(type(v) is int for v in p)):
            return None
        where.append((p[0], p[1]))
    return key, sigs, where


def load(
    qkey: str,
    filename: str,
    opt_level: int,
    target: Target,
    threads: int,
    levels: Callable[[JITModule], Levels],
) -> CompiledModule | None:
    """The compiled module of the quick record `qkey` and its cache entry, its messages
    naming `filename`, its program at each level from `levels(jit)` (parsed on first
    use); None when there is no usable record (then compile the full way)."""
    record = cache.lookup_quick(qkey)
    read = _read(record) if record is not None else None
    if read is None:
        return None
    key, sigs, positions = read
    entry = cache.lookup(key)
    if entry is None:
        return None
    meta = entry.meta
    if not valid_meta(meta):  # a unit's entry (`unit_cache`): never under a module's key
        return None
    funcs = {s.name: s for s in sigs}
    native = set(meta["native"])
    prefixes = [f"{filename}:{line}:{column}: " for line, column in positions]
    messages = rendered_messages(meta["messages"], prefixes)
    if not native <= set(funcs) or (messages is None) != (meta["messages"] is None):
        return None
    if resolve_symbols(meta["externs"]):
        return None  # an extern symbol is missing: the full path says where
    try:
        jit = JITModule.from_object(entry.obj, opt_level, target, entry.data)
    except (RuntimeError, ValueError):
        return None
    jit.optimized_ir = entry.optimized_ir
    install(jit, meta, entry.handler)
    report = (meta["stats"], meta["passes"], meta["arena_bytes"], meta["unbounded"])
    return CompiledModule(jit, funcs, native, report, messages, levels(jit), threads)
