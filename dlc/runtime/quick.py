"""The warm start: a compiled module from the compile cache without parsing its program.

A compile (`dlc.api.compile_graph_module`) keys the compile cache on the *printed*
graph module, so a lookup first parses and verifies the program: with the imports of
xDSL and the IR classes that is most of a new process's start-up. For the common case
— the same program text compiled again with the same options — a *quick record* skips
all of it: keyed on the exact bytes of the text (plus the options, the allowed externs,
dlc's source fingerprint and the host, as every cache key), it holds the full cache key,
the functions' signatures (`signature.FuncSig`: tensors only; programs with other
parameter types get no record) and the line and column of every located op, in the
order the location-free trap and bounds messages number them (`native.portable_messages`).
`load` turns a record into a `CompiledModule` with no xDSL import: object code from the
cache, messages rendered with this file's name, the program parsed only when `ir`,
`ir_module` or `export` asks for it. Any doubt — no record, a malformed one, an entry
evicted since, an extern symbol that does not resolve — returns None and the caller
takes the full path, which writes the record again (`remember`).

Records are small JSON files beside the entries (`cache.lookup_quick`), written and
checked like them (per-user HMAC, 0600, evicted with them).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from dlc.options import Options, check_fma, check_tuning_db
from dlc.runtime import cache
from dlc.runtime.fastcall import ARRAY_LAYOUT, FAST_CALLS
from dlc.runtime.native import (
    default_threads,
    install,
    openmp_available,
    rendered_messages,
    resolve_symbols,
)
from dlc.runtime.signature import FuncSig, from_json, func_signature, to_json


def check_threads(num_threads: object) -> int:
    """The `num_threads` option of `dlc.compile`, checked (None: `default_threads`)."""
    if num_threads is None:
        return default_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"num_threads must be None or an int, got {type(num_threads).__name__}")
    if num_threads < 1:
        raise ValueError(f"num_threads must be at least 1, got {num_threads}")
    return num_threads


def compile_options(
    *,
    opt_level: int,
    fuse: bool,
    plan_memory: bool,
    fast_math_functions: bool,
    bounds_check: bool | None,
    fma: bool | None,
    target_cpu: str,
    tuning_db: object,
) -> Options:
    """The pipeline options of a `dlc.compile` call, checked (`bounds_check` None: the
    environment variable DLC_BOUNDS_CHECK=1; the CPU model must run here)."""
    from dlc.target import check_runnable

    if bounds_check is None:  # DLC_BOUNDS_CHECK=1 runs a whole test suite checked
        bounds_check = os.environ.get("DLC_BOUNDS_CHECK", "") == "1"
    return Options(
        opt_level=opt_level,
        fuse=fuse,
        plan_memory=plan_memory,
        fast_math_functions=fast_math_functions,
        bounds_check=bounds_check,
        fma=check_fma(fma),
        target_cpu=check_runnable(target_cpu),
        openmp=openmp_available(),
        tuning_db=check_tuning_db(tuning_db),
    )


def quick_key(text: str | bytes, options: Options, allowed: frozenset[str]) -> str | None:
    """The key of the quick record of program `text` compiled with `options`, allowing
    the externs `allowed`; None when such compiles are not cached (no cache, a tuning
    database: its warnings must show every time)."""
    if not cache.enabled() or options.tuning_db is not None:
        return None
    from dlc.version import __version__

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    facts = {
        **options.key(),
        "allowed_externs": sorted(allowed),
        "array_layout": ARRAY_LAYOUT,
        "fast_calls": FAST_CALLS,
        "dlc": __version__,
    }
    return cache.key(facts, "quick\0" + hashlib.sha256(data).hexdigest())


def remember(
    qkey: str, entry_key: str, functions: dict[str, Any], positions: list[tuple[str, int, int]]
) -> None:
    """Write the quick record of a compile whose cache entry is `entry_key`, whose
    (differentiated) graph functions are `functions` and whose located ops are at
    `positions` (file, line, column) in walk order — if every function has a plain
    signature and every position is in one file."""
    sigs = [func_signature(f) for f in functions.values()]
    if any(s is None for s in sigs) or len({p[0] for p in positions}) > 1:
        return
    record = {
        "key": entry_key,
        "functions": [to_json(s) for s in sigs],  # type: ignore[arg-type]
        "positions": [[line, column] for _, line, column in positions],
    }
    cache.store_quick(qkey, record)


def _read(record: dict[str, Any]) -> tuple[str, list[FuncSig], list[tuple[int, int]]] | None:
    key, functions, positions = record.get("key"), record.get("functions"), record.get("positions")
    if not isinstance(key, str) or not isinstance(functions, list):
        return None
    if not isinstance(positions, list):
        return None
    sigs = [from_json(f) for f in functions]
    if any(s is None for s in sigs) or len({s.name for s in sigs}) != len(sigs):  # type: ignore[union-attr]
        return None
    where: list[tuple[int, int]] = []
    for p in positions:
        if not (isinstance(p, list) and len(p) == 2 and all(type(v) is int for v in p)):
            return None
        where.append((p[0], p[1]))
    return key, sigs, where  # type: ignore[return-value]


class _Deferred:
    """`CompiledModule`'s levels for a module loaded by `load`: the program is parsed,
    differentiated and checked on first use, then handled as after a full compile."""

    def __init__(
        self, text: str | bytes, filename: str, options: Options, jit: Any, allowed: frozenset[str]
    ) -> None:
        self._args = (text, filename, options, jit, allowed)
        self._levels: Any = None

    def _get(self) -> Any:
        if self._levels is None:
            import dlc
            from dlc.api import _Levels
            from dlc.externs import check_externs
            from dlc.passes.graph.differentiate import differentiated

            text, filename, options, jit, allowed = self._args
            module = dlc.parse(text, filename)
            called = check_externs(module, allowed)
            self._levels = _Levels(differentiated(module), options, jit, called)
        return self._levels

    def text(self, level: str) -> str:
        jit = self._args[3]
        if level == "llvm" and jit.optimized_ir is not None:  # a memory hit keeps it
            return jit.optimized_ir
        return self._get().text(level)

    def module(self, level: str) -> Any:
        return self._get().module(level)

    def export(self, path: str | os.PathLike[str], **settings: Any) -> Any:
        return self._get().export(path, **settings)


def load(
    text: str | bytes,
    filename: str,
    options: Options,
    allowed: frozenset[str],
    threads: int,
) -> Any:
    """The compiled module of program `text` (from file `filename`) from its quick
    record and cache entry, or None (then compile it the full way)."""
    from dlc.runtime.jit import JITModule
    from dlc.runtime.module import CompiledModule

    qkey = quick_key(text, options, allowed)
    record = cache.lookup_quick(qkey) if qkey is not None else None
    read = _read(record) if record is not None else None
    if read is None:
        return None
    key, sigs, positions = read
    entry = cache.lookup(key)
    if entry is None:
        return None
    meta = entry.meta
    funcs = {s.name: s for s in sigs}
    native = set(meta["native"])
    prefixes = [f"{filename}:{line}:{column}: " for line, column in positions]
    messages = rendered_messages(meta["messages"], prefixes)
    if not native <= set(funcs) or (messages is None) != (meta["messages"] is None):
        return None
    if resolve_symbols(meta["externs"]):
        return None  # an extern symbol is missing: the full path says where
    try:
        jit = JITModule.from_object(entry.obj, options.opt_level, options.target)
    except (RuntimeError, ValueError):
        return None
    jit.optimized_ir = entry.optimized_ir
    install(jit, meta)
    report = (meta["stats"], meta["passes"], meta["arena_bytes"], meta["unbounded"])
    levels = _Deferred(text, filename, options, jit, allowed)
    return CompiledModule(jit, funcs, native, report, messages, levels, threads)


def compile_cached(
    text: str | bytes,
    filename: str,
    allowed: frozenset[str],
    *,
    seed: int,
    num_threads: object,
    **options: Any,
) -> Any:
    """`dlc.compile` of `text` from its quick record (`load`), seeded, or None: no
    record, or options the full path must check and report (it raises for them in
    its own order: syntax errors first)."""
    try:
        checked = compile_options(**options)
        threads = check_threads(num_threads)
    except (TypeError, ValueError):
        return None
    compiled = load(text, filename, checked, allowed, threads)
    if compiled is not None:
        compiled.seed(seed)
    return compiled
