"""Large llvm-level modules compiled in parts, on several cores.

LLVM's optimizer and code generator are single-threaded per module, and they are most
of a large program's compile time. The runs of loop nests that `lower-loop-to-llvm`
outlines from large functions (`noinline` functions, `parallel.py`) are independent
pieces: `compile_in_parts` moves each (with the functions only it uses, such as its
OpenMP workers) into a module of its own, a unit, and the rest stays in part 0. The
units are converted to LLVM IR one after the other, each named after its content
(`unit_cache.Namer`: alike units are built once) and, with the compile cache on,
looked up there; the units to build are handed out as they print, to worker processes
(`python -m dlc.runtime.jit_worker`, started as the llvm level starts, or as the
loop level is lowered for a large module (`start_ahead`), so that their Python loads
meanwhile; llvmlite serializes all LLVM calls of a process behind one
lock, so threads would not overlap) and, once it has printed and built part 0, to this
process, each unit to whoever is free. Each unit is built alone, so the object code is
the same whatever the number of workers, and with the cache on or off. One MCJIT
engine loads all the objects, which resolve each other's symbols; the compile cache
stores them together (`pack_objects`). A worker that cannot start or fails leaves its
units to this process.

The parts see each other only through declarations: an outlined function becomes
external in its part, the constant data it reads is copied into it, module variables
and other globals are declared. The llvm-level module is left exactly as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import struct
import threading
from typing import TYPE_CHECKING, cast

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
"""Processes that build at most (this one and the workers), fewer on fewer cores."""
MAGIC = b"DLCOBJS1"
AHEAD_OPS = 2_000
"""Loop-level ops from which a module will likely be split (`lower-loop-to-llvm` splits
functions of more ops into runs): its workers start as its loop level is lowered."""


def start_ahead(loop_ops: int, opt_level: int, target: Target | None) -> None:
    """Start the workers of a module of `loop_ops` loop-level ops, not lowered to the
    llvm level yet, when it will likely be split (`jit_worker.start_ahead`)."""
    if loop_ops >= AHEAD_OPS:
        jit_worker.start_ahead(opt_level, target, min(MAX_PARTS, _threads()) - 1)


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


_REFERS: dict[type, int] = {}  # an op class -> `kind_of` a call (1), an address (2)


def _scanned(op: Operation) -> tuple[dict[str, None], int]:
    """The symbols `op` calls or takes the address of, in the order they first occur
    (so parts list their functions alike in every process), and its number of ops."""
    from xdsl.dialects import llvm

    from dlc.runtime.llvm_text_ops import kind_of

    refers = (llvm.CallOp, llvm.AddressOfOp)
    names: dict[str, None] = {}
    count = 0
    for inner in op.walk():
        count += 1
        kind = kind_of(inner, refers, _REFERS)
        if kind == 1:
            callee = cast("llvm.CallOp", inner).callee
            if callee is not None:
                names[callee.string_value()] = None
        elif kind == 2:
            names[cast("llvm.AddressOfOp", inner).global_name.string_value()] = None
    return names, count


@dataclasses.dataclass
class Plan:
    """How a module is split: the functions of each unit (`moved`: its outlined
    function first) and the symbols each defined function references."""

    moved: list[list[llvm.FuncOp]]
    refs: dict[str, dict[str, None]]


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


def _plan(module: ModuleOp) -> Plan | None:
    """Each outlined run a part of its own (part 0 keeps the rest); None when the module
    is too small or has nothing to move."""
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
    return Plan([members for members, _ in groups], refs)


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
    """Object code of `module` in parts (module docstring): part 0's, then the units'
    (found in the unit cache, or built by the workers and this process); `files` holds
    the constant data they include. None when it is better compiled whole."""
    plan = _plan(module)
    if plan is None:
        return None
    count = min(MAX_PARTS, _threads(), len(plan.moved) + 1) - 1
    workers = [w for w in (jit_worker.start_worker(opt_level, target) for _ in range(count)) if w]
    shared = _Shared(workers, opt_level, target)
    try:
        with _split(module, plan) as split:
            roots = [members[0].sym_name.data for members in plan.moved]
            return _build(split, roots, opt_level, target, files, shared)
    finally:
        shared.close()


class _Shared:
    """The distinct units of a module, each found in the unit cache or handed to the
    first of the workers (a thread of this process each) or this process (`help`)
    that is free."""

    def __init__(
        self, workers: list[subprocess.Popen], opt_level: int, target: Target | None
    ) -> None:
        from dlc.runtime import unit_cache
        from dlc.runtime.jit import machine_settings

        self.opt_level, self.target, self.workers = opt_level, target, workers
        self.machine = machine_settings(opt_level, target) if unit_cache.enabled() else None
        self.queue: queue.SimpleQueue[tuple[int, str] | None] = queue.SimpleQueue()
        self.slots: dict[str, int] = {}  # each distinct unit's text -> its slot
        self.first: list[int] = []  # slot -> the first unit with its text (objects' order)
        self.keys: dict[int, str] = {}  # slot -> its unit cache key (the cache on)
        self.cached: set[int] = set()  # slots found in the unit cache
        self.built: dict[int, bytes] = {}
        self.failed: list[tuple[int, str]] = []  # units a worker could not build
        self.threads = [threading.Thread(target=self._serve, args=(w,)) for w in workers]
        for thread in self.threads:
            thread.start()

    def _serve(self, worker: subprocess.Popen) -> None:
        while (unit := self.queue.get()) is not None:
            obj = jit_worker.build(worker, unit[1])
            if obj is None:  # the worker failed: this process builds what is left
                self.failed.append(unit)
                return
            self.built[unit[0]] = obj

    def add(self, named: list[tuple[int, str]]) -> None:
        """Units named (`unit_cache.Namer`: (index, LLVM IR text)): each distinct text
        found in the unit cache or handed out to build."""
        from dlc.runtime import unit_cache

        for k, text in named:
            if text in self.slots:
                self.first[self.slots[text]] = min(self.first[self.slots[text]], k)
                continue
            slot = self.slots[text] = len(self.slots)
            self.first.append(k)
            if self.machine is not None:  # the unit cache is on
                self.keys[slot] = unit_cache.key(text, self.machine)
                if (obj := unit_cache.lookup(self.keys[slot])) is not None:
                    self.built[slot] = obj
                    self.cached.add(slot)
                    continue
            self.queue.put((slot, text))

    def objects(self) -> list[bytes]:
        """The object code of every distinct unit, in the order they first occur; those
        built stored in the unit cache."""
        from dlc.runtime import unit_cache

        built = self.help()
        for slot, key in self.keys.items():
            if slot not in self.cached:
                unit_cache.store(key, built[slot])
        return [built[slot] for slot in sorted(range(len(self.slots)), key=self.first.__getitem__)]

    def help(self) -> dict[int, bytes]:
        """Build units here until none is left, wait for the workers' last: the object
        code of every unit, by slot."""
        from dlc.runtime.jit import build_object

        with contextlib.suppress(queue.Empty):
            while (unit := self.queue.get_nowait()) is not None:
                self.built[unit[0]] = build_object(unit[1], self.opt_level, self.target)
        self.close()
        for slot, text in self.failed:
            self.built[slot] = build_object(text, self.opt_level, self.target)
        self.failed = []
        return self.built

    def close(self, stop: bool = False) -> None:
        """The workers' threads and processes ended (`stop`: at once, their units
        dropped)."""
        for worker in self.workers if stop else ():
            worker.kill()  # its thread reads the end of its output, then it is reaped
        for _ in self.threads:
            self.queue.put(None)
        for thread in self.threads:
            thread.join()
        for worker in self.workers:
            jit_worker.finish_worker(worker)
        self.threads, self.workers = [], []


def _build(
    split: list[ModuleOp],
    roots: list[str],
    opt_level: int,
    target: Target | None,
    files: DataFiles | BoundData | None,
    shared: _Shared,
) -> list[bytes] | None:
    """`compile_in_parts` on the `_split` module (`roots`: each unit's outlined
    function): the units printed, named and handed out one by one, part 0 printed and
    built here, then this process helps with the units; None (and the workers stopped)
    when a part has static constructors."""
    from dlc.runtime import unit_cache
    from dlc.runtime.jit import build_object, ir_text, target_machine
    from dlc.runtime.llvm_text_ops import symbol

    tm = target_machine(opt_level, target)
    namer = unit_cache.Namer([symbol(name) for name in roots])
    for k, part in enumerate(split[1:]):
        text = ir_text(part, tm, files)
        if "@llvm.global_ctors" in text:  # compiled whole
            shared.close(stop=True)
            return None
        shared.add(namer.add(k, text))
    shared.add(namer.finish())
    text0 = unit_cache.named_caller(ir_text(split[0], tm, files), namer.done)
    if "@llvm.global_ctors" in text0:
        shared.close(stop=True)
        return None
    return [build_object(text0, opt_level, target), *shared.objects()]
