"""Compile a verified graph module to a `CompiledModule`: the pipeline, the cache, the JIT.

`compile_graph_module(module, ...)` is what `dlc.compile`, `dlc.compile_file` and
`dlc-run` call. It first checks that every `[extern]` function the program calls is
allowed (`dlc.externs`: none unless the caller names them), so nothing of a disallowed
program is cached, lowered or looked up. Then it asks the compile cache
(`dlc.runtime.cache`) for the machine code of the same program, options and host; on a
miss it runs the pipeline of `dlc.pipeline.steps` on a clone of the module, adds the
Python entry wrappers, JIT-compiles the result and stores the object code. A hit loads
that object code into a fresh engine (so every compiled module has its own globals,
variables, generator state and arenas) without lowering. Neither keeps the
intermediate levels: `mod.ir(level)` lowers the module again on first use.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr

from dlc import pipeline, progress
from dlc.budget import ModuleBudget, check_budget
from dlc.diagnostics import error_at, own_location
from dlc.dialects import abi
from dlc.dialects.graph import FuncOp as GraphFuncOp
from dlc.dialects.graph_symbolic import is_symbolic
from dlc.externs import ExternsOption, allowed_externs, check_externs
from dlc.options import check_threads, compile_options, planted_fault, quick_facts
from dlc.plugins import check_extra_passes
from dlc.program_levels import ProgramLevels, Report, defined_functions, lower
from dlc.runtime import cache, interrupts, jit_worker
from dlc.runtime.cache_records import Metadata, valid_meta
from dlc.runtime.fastcall import ARRAY_LAYOUT, FAST_CALLS
from dlc.runtime.jit import JITModule
from dlc.runtime.module import CompiledModule
from dlc.runtime.native import (
    install,
    portable_messages,
    rendered_messages,
    resolve_symbols,
)
from dlc.runtime.quick import quick_key, remember
from dlc.runtime.signature import func_signature


def compile_kernel(text: str) -> Any:
    """The function @op of DLVM `text` compiled at opt_level 2 on one thread: the
    kernels the superoptimizer's measured costs time (`dlc.superopt_costs`)."""
    from dlc.parser import parse_module

    return compile_graph_module(parse_module(text, "<superopt cost>"), opt_level=2, num_threads=1)[
        "op"
    ]


def compile_timed(module: ModuleOp, name: str, threads: int) -> Any:
    """Function `name` of graph `module` compiled at opt_level 2 for this host, without
    the compile cache, run on `threads` threads: what the superoptimizer's timed guard
    times (`dlc.superopt_costs.time_functions`)."""
    options = pipeline.Options(opt_level=2)
    compiled, _ = _compile(module, options, None, frozenset(), threads, [])
    return compiled[name]


def external_names(llvm_level: ModuleOp) -> list[str]:
    """The functions an llvm-level module declares without defining them."""
    from xdsl.dialects import llvm

    return [
        f.sym_name.data
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and not f.body.blocks
    ]


def check_symbols(names: list[str], graph: ModuleOp) -> None:
    """Every external function the code calls must exist in this process: a located
    error at the `[extern]` declaration otherwise."""
    decls = {f.sym_name.data: f for f in graph.body.block.ops if isinstance(f, GraphFuncOp)}
    for name in resolve_symbols(names):
        raise error_at(
            decls.get(name),
            f"extern function @{name}: no symbol {name!r} in this process "
            "(load its library first, e.g. llvmlite.binding.load_library_permanently)",
        )


def metadata(llvm_level: ModuleOp, report: Report, native: set[str]) -> Metadata:
    """What a compiled module needs besides the graph module and the machine code, as
    JSON-able data (the compile cache stores it; `cache.valid_meta` checks its shape)."""
    messages = llvm_level.attributes.get(abi.MESSAGES)
    assert messages is None or isinstance(messages, ArrayAttr)
    return {
        "native": sorted(native),
        "externs": external_names(llvm_level),
        "messages": None if messages is None else [m.data for m in messages.data],
        "arena_bytes": report.arena_bytes,
        "unbounded": report.unbounded,
        "vars": abi.variable_sizes(llvm_level),
        "stats": report.functions,
        "passes": report.passes,
    }


def profiled_kernels(llvm_level: ModuleOp) -> list[dict[str, Any]]:
    """The kernel facts a profiling compile recorded (`abi.PROFILE`)."""
    kernels = llvm_level.attributes.get(abi.PROFILE)
    assert kernels is None or isinstance(kernels, StringAttr), kernels
    return json.loads(kernels.data) if kernels is not None else []


def cache_key(
    module: ModuleOp, options: pipeline.Options, externs: frozenset[str] = frozenset()
) -> str:
    """SHA-256 hex key of a graph module compiled with `options` on this host: its
    printed text and which of its ops have a source location, with the options, the
    extern symbols it is allowed to call and the host (`cache.environment`). Not the
    locations themselves: the machine code does not depend on them, and the trap and
    bounds messages that name them are stored location-free (`portable_messages`), so
    one program read through any spelling of its path, or reformatted, is one entry.
    Dense literals (weights) enter as the SHA-256 of their bytes, not as text."""
    from dlc.parser import print_module

    # surrogatepass: a file name from os.fsdecode, or a module built in Python, may hold
    # lone surrogates, which plain UTF-8 refuses to encode.
    text = print_module(module, dense=lambda data: "sha256:" + hashlib.sha256(data).hexdigest())
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    digest.update(bytes(own_location(op) is not None for op in module.walk()))
    from dlc.version import __version__

    facts = {
        **options.key(),
        "externs": sorted(externs),
        "array_layout": ARRAY_LAYOUT,
        "fast_calls": FAST_CALLS,
        "dlc": __version__,
    }
    return cache.key(facts, digest.hexdigest())


def _locations(module: ModuleOp) -> list[tuple[str, int, int]]:
    """(file, line, column) of every located op of `module`, in walk order (the order
    the cache key fixes)."""
    located = (own_location(op) for op in module.walk())
    return [(loc.filename, loc.line, loc.column) for loc in located if loc is not None]


def _from_cache(
    entry: cache.Entry,
    module: ModuleOp,
    options: pipeline.Options,
    threads: int,
    prefixes: list[str],
    externs: frozenset[str],
) -> CompiledModule | None:
    """A fresh compiled module from a cache entry's object code and metadata, its
    messages naming this program's locations (`prefixes`)."""
    parts = _cached_parts(entry, module, options, prefixes)
    if parts is None:
        return None
    jit, report, messages = parts
    levels = ProgramLevels(module, options, jit, externs)
    native = set(entry.meta["native"]) if valid_meta(entry.meta) else set()  # valid: parts
    return CompiledModule(jit, defined_functions(module), native, report, messages, levels, threads)


def _cached_parts(
    entry: cache.Entry, module: ModuleOp, options: pipeline.Options, prefixes: list[str]
) -> tuple[JITModule, Report, list[str] | None] | None:
    """The loaded object code, report and messages of a cache entry; None when it is
    not this program's after all, or LLVM rejects it (then it is compiled)."""
    meta = entry.meta
    if not valid_meta(meta):  # a unit's entry (`unit_cache`): never under a module's key
        return None
    messages = rendered_messages(meta["messages"], prefixes)
    if not set(meta["native"]) <= set(defined_functions(module)):
        return None
    if (messages is None) != (meta["messages"] is None):
        return None
    check_symbols(meta["externs"], module)
    try:
        jit = JITModule.from_object(entry.obj, options.opt_level, options.target, entry.data)
    except (RuntimeError, ValueError):  # LLVM rejected the object code: compile again
        return None
    jit.optimized_ir = entry.optimized_ir
    install(jit, meta, entry.handler)
    report = Report(meta["stats"], meta["passes"], meta["arena_bytes"], meta["unbounded"])
    return jit, report, messages


def _compile(
    module: ModuleOp,
    options: pipeline.Options,
    key: str | None,
    externs: frozenset[str],
    threads: int,
    prefixes: list[str],
) -> tuple[CompiledModule, bool]:
    """A full compile, and whether its object code went into the compile cache; its
    progress is shown on a terminal (`dlc.progress`)."""
    from xdsl.dialects import llvm

    if pipeline.superopt_costs(options) == "measured":
        from dlc.superopt_costs import install as install_costs

        install_costs(compile_kernel, lambda m, name: compile_timed(m, name, threads), threads)
    with progress.tracking() as tracked, jit_worker.stopping_ahead():
        llvm_level, report = lower(module, options, externs=externs, workers_ahead=True)
        check_symbols(external_names(llvm_level), module)
        tracked.enter("llvm")
        with pipeline.gc_paused():  # the conversion to LLVM IR allocates as much again
            jit = JITModule(llvm_level, options.opt_level, target=options.target)
    funcs = defined_functions(module)
    native = {f.sym_name.data for f in llvm_level.body.block.ops if isinstance(f, llvm.FuncOp)}
    native = {name for name in funcs if abi.function_symbol(name) in native}
    meta = metadata(llvm_level, report, native)
    install(jit, meta)
    portable = portable_messages(meta["messages"], prefixes)
    stored = key is not None and jit.cacheable()
    stored = stored and (portable is None) == (meta["messages"] is None)
    if stored and key is not None and jit.object_code is not None:  # cacheable: object code
        kept: Metadata = {**meta, "messages": portable}
        handler = interrupts.handler_object()  # a warm start loads it instead of compiling it
        entry = cache.Entry(jit.object_code, kept, jit.optimized_ir, jit.data, handler)
        cache.store(key, entry)
    levels = ProgramLevels(module, options, jit, externs)
    compiled = CompiledModule(jit, funcs, native, report, meta["messages"], levels, threads)
    if options.profile:
        compiled.attach_profile(profiled_kernels(llvm_level))
    return compiled, stored


def compile_symbolic(
    module: ModuleOp,
    options: pipeline.Options,
    externs: frozenset[str],
    threads: int,
    cached: tuple[str | None, list[str]] = (None, []),
) -> CompiledModule:
    """A module with symbolic dimensions (`lower-graph-to-loop`): compiled once for
    every size; `cached`: its compile-cache key (None: not cached) and its locations'
    prefixes (`_from_cache`). Quick records (`dlc.warm`) are for static modules yet."""
    from dlc.lowering.graph_to_loop.function import function_symbols
    from dlc.runtime.jit import NATIVE_COMPILES
    from dlc.runtime.symbolic import SymbolicModule, signatures

    key, prefixes = cached
    funcs, before = defined_functions(module), NATIVE_COMPILES[0]
    entry = cache.lookup(key) if key is not None else None
    found = _cached_parts(entry, module, options, prefixes) if entry is not None else None
    if found is not None:  # its object code and metadata, no compile
        jit, report, messages = found
    else:
        llvm_level, report = lower(module, options, externs=externs)
        check_symbols(external_names(llvm_level), module)
        with pipeline.gc_paused():
            jit = JITModule(llvm_level, options.opt_level, target=options.target)
        meta = metadata(llvm_level, report, set(funcs))
        install(jit, meta)
        messages, portable = meta["messages"], portable_messages(meta["messages"], prefixes)
        if key is not None and jit.cacheable() and jit.object_code is not None:
            kept: Metadata = {**meta, "messages": portable}
            handler = interrupts.handler_object()
            entry = cache.Entry(jit.object_code, kept, jit.optimized_ir, jit.data, handler)
            if (portable is None) == (messages is None):
                cache.store(key, entry)
    levels, sigs = ProgramLevels(module, options, jit, externs), signatures(funcs, function_symbols)
    compiles = NATIVE_COMPILES[0] - before
    compiled = SymbolicModule(jit, sigs, report, messages, levels, threads, compiles)
    if options.profile and found is None:
        compiled.attach_profile(profiled_kernels(llvm_level))
    return compiled


def compile_graph_module(
    module: ModuleOp,
    *,
    opt_level: int = 2,
    fuse: bool = True,
    plan_memory: bool = True,
    fast_math_functions: bool = True,
    bounds_check: bool | None = None,
    seed: int = 0,
    externs: ExternsOption = None,
    fma: bool | None = None,
    target_cpu: str = "host",
    num_threads: int | None = None,
    tuning_db: str | os.PathLike[str] | None = None,
    rules: str | os.PathLike[str] | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
    source: str | bytes | None = None,
    constants: Mapping[str, Mapping[str, Any]] | None = None,
    budget: ModuleBudget | None = None,
    profile: bool = False,
) -> CompiledModule:
    """Compile every defined function of a verified graph module to native code.

    `externs` allows `[extern]` C functions (see `dlc.externs.allowed_externs`): None
    allows none, else a preset name (`"libm"`) or an iterable of C symbol names and
    presets. A referenced extern it does not allow is a `DiagnosticError` at its
    declaration, raised before the cache, the pipeline or the symbol lookup see it.

    `fuse` (tensor-level fusion, at opt_level >= 1), `plan_memory` (one static arena per
    function) and `fast_math_functions` (f32 exp/log/tanh/erf as polynomials instead of libm
    calls) can be turned off. `bounds_check` guards every load and store (IndexError
    naming the op's location on a violation); None means the environment variable
    DLC_BOUNDS_CHECK=1. `seed` seeds the `random` generator (`CompiledModule.seed`).
    `fma` (None: opt_level >= 2) lets float sums fuse multiply-adds; `target_cpu` is
    the CPU model to compile for, one this machine can run (`check_runnable`).
    `num_threads` caps the threads parallel loops use (None: `DLC_NUM_THREADS`, else
    the cores this process may run on); results do not depend on it. `tuning_db`
    names a tuning database (`dlc-tune`'s JSON lines): nests with a record for this
    target use its schedule; each contraction without one is a `TuningWarning` saying
    why. Such compiles bypass the compile cache, so the report shows every time.
    `rules` names a DLVM rule file whose proven rules the superoptimizer (opt_level 3)
    applies besides its own (`dlc-prove`). `extra_passes` ({"graph": ["my-pass"], ...})
    runs passes of loaded plugins (`dlc.load_plugin`) after each level's own; such
    compiles bypass the compile cache (a plugin's code is not part of its key).

    `source` is the program text `module` was parsed from, when there is one: the
    compile then leaves a quick record (`dlc.runtime.quick`) with which the next
    compile of the same text and options skips parsing altogether. `constants` binds
    parameters to arrays (`dlc.bind.bind_constants`); the cache then keys on the
    arrays' bytes, and no quick record is left (the text alone is not the program).
    `budget` (`dlc.budget.ModuleBudget`, default its defaults) bounds the functions,
    instructions and call nesting a compile takes on: a located DiagnosticError beyond.
    `profile` brackets every kernel with timing marks (`CompiledModule.profile`); such
    compiles bypass the compile cache."""
    from dlc.passes.graph.differentiate import differentiated

    if constants is not None:
        from dlc.bind import bind_constants

        module = bind_constants(module, constants)
        source = None

    allowed = allowed_externs(externs)
    called = check_externs(module, allowed)
    options = compile_options(
        opt_level=opt_level,
        fuse=fuse,
        plan_memory=plan_memory,
        fast_math_functions=fast_math_functions,
        bounds_check=bounds_check,
        fma=fma,
        target_cpu=target_cpu,
        tuning_db=tuning_db,
        rules=rules,
        extra_passes=check_extra_passes(extra_passes),
        profile=profile,
    )  # not `seed`: it only sets the generator state after loading
    # The code depends on the allowed externs the program calls, not on the rest of the
    # allow-list: `called` keys the entry (and check_externs already ran, before any lookup).
    # A planted test fault (DLC_TEST_MISCOMPILE, dlc-bisect's tests) must not be cached.
    cached = (
        cache.enabled()
        and options.tuning_db is None
        and not options.extra_passes
        and not options.profile
        and not planted_fault()
    )
    if is_symbolic(module):
        check_budget(module, budget or ModuleBudget())
        key = cache_key(module, options, called) if cached else None
        prefixes = [f"{file}:{line}:{column}: " for file, line, column in _locations(module)]
        threads = check_threads(num_threads)
        symbolic = compile_symbolic(module, options, called, threads, (key, prefixes))
        symbolic.seed(seed)
        return symbolic
    key = cache_key(module, options, called) if cached else None
    locations = _locations(module)
    prefixes = [f"{file}:{line}:{column}: " for file, line, column in locations]
    module = differentiated(module)  # the signatures of synthesized adjoints
    check_budget(module, budget or ModuleBudget())
    entry = cache.lookup(key) if key is not None else None
    threads = check_threads(num_threads)
    compiled: CompiledModule | None = None
    if entry is not None:
        compiled = _from_cache(entry, module, options, threads, prefixes, called)
    in_cache = compiled is not None
    if compiled is None:
        compiled, in_cache = _compile(module, options, key, called, threads, prefixes)
    if source is not None and key is not None and in_cache:
        facts = quick_facts(options, allowed)
        if facts is not None:  # the next compile of this text skips the parse (dlc.warm)
            sigs = [func_signature(f) for f in defined_functions(module).values()]
            remember(quick_key(source, facts), key, sigs, locations)
    compiled.seed(seed)
    return compiled
