"""Large llvm-level modules compiled in parts, on several threads.

LLVM's optimizer and code generator are single-threaded per module, and they are most
of a large program's compile time. The runs of loop nests that `lower-loop-to-llvm`
outlines from large functions (`noinline` functions, `parallel.py`) are independent
pieces: `compile_in_parts` moves groups of them (each with the functions only it
uses, such as its OpenMP workers) into modules of their own, converts each to LLVM IR,
then optimizes it and emits its object code in a worker process
(`python -m dlc.runtime.jit_worker`; llvmlite serializes all LLVM calls of a process
behind one lock, so threads would not overlap) while this process prints and builds
part 0: the parts are printed first and sent, and without the cache (every part to
build) the workers start before that, so that their Python loads meanwhile. One
MCJIT engine loads all the objects, which resolve each other's symbols; the compile
cache stores them together (`pack_objects`). A worker that cannot start or fails
leaves its part to this process.

With the compile cache on, each run is a part of its own, named after its content and
looked up in the cache before anything is built (`unit_cache.py`); the runs to build
are spread over this process and the workers (several to a worker).

The parts see each other only through declarations: an outlined function becomes
external in its part, the constant data it reads is copied into it, module variables
and other globals are declared. The llvm-level module is left exactly as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import struct
from typing import TYPE_CHECKING

from dlc.runtime import jit_worker

if TYPE_CHECKING:  # imported where used: loading cached objects needs none of them
    import subprocess
    from collections.abc import Iterator

    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Operation

    from dlc.runtime.constant_data import BoundData, DataFiles
    from dlc.target import Target

MIN_OPS = 5_000
"""llvm-level ops below which a module is compiled whole: a worker process costs about
0.2 s to start."""
MAX_PARTS = 4
MAGIC = b"DLCOBJS1"


def pack_objects(objects: list[bytes]) -> bytes:
    """Several object files as one byte string (one object stays as it is)."""
    if len(objects) == 1:
        return objects[0]
    sizes = b"".join(struct.pack("<Q", len(o)) for o in objects)
    return MAGIC + struct.pack("<I", len(objects)) + sizes + b"".join(objects)


def unpack_objects(data: bytes) -> list[bytes]:
    """The object files `pack_objects` made (ValueError when `data` is malformed)."""
    if not data.startswith(MAGIC):
        return [data]
    try:
        (count,) = struct.unpack_from("<I", data, len(MAGIC))
        start = len(MAGIC) + 4
        sizes = struct.unpack_from(f"<{count}Q", data, start)
    except struct.error:
        raise ValueError("malformed object bundle") from None
    offset = start + 8 * count
    objects = []
    for size in sizes:
        objects.append(data[offset : offset + size])
        offset += size
    if offset != len(data) or any(len(o) != s for o, s in zip(objects, sizes, strict=True)):
        raise ValueError("malformed object bundle")
    return objects


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _scanned(op: Operation) -> tuple[dict[str, None], int]:
    """The symbols `op` calls or takes the address of, in the order they first occur
    (so parts list their functions alike in every process), and its number of ops."""
    from xdsl.dialects import llvm

    names: dict[str, None] = {}
    count = 0
    for inner in op.walk():
        count += 1
        if isinstance(inner, llvm.CallOp) and inner.callee is not None:
            names[inner.callee.string_value()] = None
        elif isinstance(inner, llvm.AddressOfOp):
            names[inner.global_name.string_value()] = None
    return names, count


@dataclasses.dataclass
class Plan:
    """How a module is split: the functions of parts 1.. (`moved`), the symbols each
    defined function references and the ops left in part 0."""

    moved: list[list[llvm.FuncOp]]
    refs: dict[str, dict[str, None]]
    rest_ops: int
    moved_ops: int


def _groups(
    funcs: dict[str, llvm.FuncOp], refs: dict[str, dict[str, None]], sizes: dict[str, int]
) -> list[tuple[list[llvm.FuncOp], int]]:
    """Each outlined run with the internal functions only it reaches, and its size."""
    roots = [f for f in funcs.values() if f.no_inline is not None]
    groups = []
    for root in roots:
        members, stack = [root], [root.sym_name.data]
        seen = {root.sym_name.data}
        while stack:
            for name in refs[stack.pop()]:
                f = funcs.get(name)
                if f is None or name in seen or f.no_inline is not None:
                    continue
                if f.linkage.linkage.data != "internal":
                    continue
                seen.add(name)
                members.append(f)
                stack.append(name)
        groups.append((members, sum(sizes[m.sym_name.data] for m in members)))
    return groups


def _self_contained(
    module: ModuleOp, groups: list[tuple[list[llvm.FuncOp], int]], refs: dict[str, dict[str, None]]
) -> bool:
    """Whether every internal symbol a group uses is its own: no internal function is
    used from outside its group, no internal variable from inside one (they could not
    be linked across parts)."""
    from xdsl.dialects import llvm

    owner = {f.sym_name.data: i for i, (members, _) in enumerate(groups) for f in members}
    roots = {f.sym_name.data for members, _ in groups for f in members if f.no_inline is not None}
    for name, used in refs.items():
        here = owner.get(name)
        for callee in used:
            if callee in owner and callee not in roots and owner[callee] != here:
                return False
    mutable = {
        op.sym_name.data
        for op in module.body.block.ops
        if isinstance(op, llvm.GlobalOp)
        and op.linkage.linkage.data == "internal"
        and op.constant is None
    }
    return not any(refs[f.sym_name.data].keys() & mutable for members, _ in groups for f in members)


def _plan(module: ModuleOp, parts: int, units: bool = False) -> Plan | None:
    """Groups of outlined runs for parts 1..n-1 (part 0 keeps the rest), balanced by
    op count, or with `units` each run a part of its own (`unit_cache`); None when the
    module is too small or has nothing to move."""
    from xdsl.dialects import llvm

    funcs, refs, sizes = {}, {}, {}
    total = 1
    for op in module.body.block.ops:
        used, count = _scanned(op)
        total += count
        if isinstance(op, llvm.FuncOp) and op.body.blocks:
            name = op.sym_name.data
            funcs[name], refs[name], sizes[name] = op, used, count
    groups = _groups(funcs, refs, sizes)
    if total < MIN_OPS or len(groups) < 2 or not _self_contained(module, groups, refs):
        return None
    moved_ops = sum(size for _, size in groups)
    if units:
        return Plan([members for members, _ in groups], refs, total - moved_ops, moved_ops)
    if parts < 2:
        return None
    loads = [total - moved_ops] + [0] * (parts - 1)
    planned: list[list[llvm.FuncOp]] = [[] for _ in range(parts)]
    for members, size in sorted(groups, key=lambda g: -g[1]):
        k = loads.index(min(loads))
        loads[k] += size
        planned[k].extend(members)
    moved = [p for p in planned[1:] if p]
    return Plan(moved, refs, loads[0], total - loads[0]) if moved else None


def _declaration(op: Operation) -> Operation:
    """What a part needs to refer to `op` (a function or global) defined elsewhere."""
    from xdsl.dialects import llvm

    if isinstance(op, llvm.FuncOp):
        return llvm.FuncOp(op.sym_name.data, op.function_type, linkage=llvm.LinkageAttr("external"))
    assert isinstance(op, llvm.GlobalOp)
    if op.constant is not None and op.linkage.linkage.data == "internal":
        return op.clone()  # read-only data: each part its own copy
    return llvm.GlobalOp(op.global_type, op.sym_name.data, "external")


@contextlib.contextmanager
def _split(module: ModuleOp, plan: Plan) -> Iterator[list[ModuleOp]]:
    """The module as its parts while the context lasts: part 0 (`module` without the
    moved functions, declaring the runs it calls), then a module for each part with
    declarations of what it uses from elsewhere; `module` is restored afterwards."""
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import ModuleOp

    block = module.body.block
    order = list(block.ops)
    symbols = {op.sym_name.data: op for op in order if isinstance(op, llvm.FuncOp | llvm.GlobalOp)}
    roots = [f for part in plan.moved for f in part if f.no_inline is not None]
    for f in roots:
        f.linkage = llvm.LinkageAttr("external")
    added: list[Operation] = []
    parts: list[ModuleOp] = []
    try:
        for part in plan.moved:
            for f in part:
                f.detach()
        added.extend(_declaration(f) for f in roots)  # part 0 calls them
        block.add_ops(added)
        for part in plan.moved:
            names = {f.sym_name.data for f in part}
            needed = set().union(*(plan.refs[f.sym_name.data] for f in part)) - names
            decls = [_declaration(symbols[n]) for n in sorted(needed) if n in symbols]
            parts.append(ModuleOp([*decls, *part]))
        yield [module, *parts]
    finally:
        for op in added:
            op.detach()
        for made in parts:
            for inner in list(made.body.block.ops):
                inner.detach()
        for op in order:
            if op.parent is not None:
                op.detach()
            block.add_op(op)
        for f in roots:
            f.linkage = llvm.LinkageAttr("internal")


def compile_in_parts(
    module: ModuleOp,
    opt_level: int,
    target: Target | None,
    files: DataFiles | BoundData | None = None,
) -> list[bytes] | None:
    """Object code of `module` in parts (module docstring), parts 1.. found in the
    unit cache or built in worker processes while this one prints and builds part 0
    (`files` holds the constant data they include); None when it is better compiled
    whole."""
    from dlc.runtime import unit_cache

    units = unit_cache.enabled()
    plan = _plan(module, min(MAX_PARTS, _threads()), units)
    if plan is None:
        return None
    # without the cache every part is built: the workers start while the parts print
    spare = [] if units else [w for w in (jit_worker.spawn_worker() for _ in plan.moved) if w]
    try:
        with _split(module, plan) as split:
            return _build(split, plan, opt_level, target, files, spare)
    finally:
        for worker in spare:  # started early, not needed
            jit_worker.stop_worker(worker)


def _build(
    split: list[ModuleOp],
    plan: Plan,
    opt_level: int,
    target: Target | None,
    files: DataFiles | BoundData | None,
    spare: list[subprocess.Popen],
) -> list[bytes] | None:
    """`compile_in_parts` on the `_split` module: the parts printed and sent to
    workers (`spare` first), part 0 printed and built here, the parts gathered."""
    from dlc.runtime import unit_cache
    from dlc.runtime.jit import build_object, ir_text, target_machine

    tm = target_machine(opt_level, target)
    texts = ["", *(ir_text(part, tm, files) for part in split[1:])]
    if any("@llvm.global_ctors" in text for text in texts):
        return None
    texts, names, keys, found = _named_and_found(texts, opt_level, target)
    sizes = [len(text) for text in texts[1:]]
    load0 = sum(sizes) * plan.rest_ops // max(plan.moved_ops, 1)  # part 0's, estimated
    batches = _batches(load0, sizes, [i for i, obj in enumerate(found) if obj is None])
    workers = []
    for batch in batches[1:]:
        worker = spare.pop(0) if spare else jit_worker.spawn_worker()
        jit_worker.send(worker, [texts[1 + i] for i in batch], opt_level, target)
        workers.append(worker)
    text0 = unit_cache.named_caller(ir_text(split[0], tm, files), names)
    if "@llvm.global_ctors" in text0:  # compiled whole: the workers stopped
        for worker in workers:
            jit_worker.stop_worker(worker)
        return None
    objects = [build_object(text0, opt_level, target)]
    for batch, worker in zip(batches, [None, *workers], strict=True):
        built = jit_worker.worker_objects(worker, len(batch))
        for j, i in enumerate(batch):
            obj = built[j] or build_object(texts[1 + i], opt_level, target)
            found[i] = obj
            if keys:  # the unit cache is on
                unit_cache.store(keys[i], obj)
    return [*objects, *(obj for obj in found if obj is not None)]


def _named_and_found(
    texts: list[str], opt_level: int, target: Target | None
) -> tuple[list[str], dict[str, str], list[str], list[bytes | None]]:
    """With the unit cache on: the parts' `texts` (part 0 not printed yet) named by
    content, the same unit once, with the names given, each unit's key and its stored
    object (None: to build); without, `texts` as they are and no keys."""
    from dlc.runtime import unit_cache
    from dlc.runtime.jit import machine_settings

    if not unit_cache.enabled():
        return texts, {}, [], [None] * (len(texts) - 1)
    named, names = unit_cache.named_units(texts)
    named = list(dict.fromkeys(named))
    machine = machine_settings(opt_level, target)
    keys = [unit_cache.key(text, machine) for text in named[1:]]
    return named, names, keys, [unit_cache.lookup(k) for k in keys]


def _batches(load0: int, sizes: list[int], missing: list[int]) -> list[list[int]]:
    """The parts to build (indices into `sizes`, their texts' lengths) spread over this
    process (batch 0, which also builds part 0 of about `load0`) and up to
    `MAX_PARTS - 1` workers, balanced by text size; empty batches dropped but the first."""
    count = min(MAX_PARTS, _threads(), len(missing) + 1)
    loads = [load0] + [0] * (count - 1)
    batches: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(missing, key=lambda i: -sizes[i]):
        k = loads.index(min(loads))
        loads[k] += sizes[i]
        batches[k].append(i)
    return [batches[0], *(b for b in batches[1:] if b)]
