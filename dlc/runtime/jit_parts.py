"""Large llvm-level modules compiled in parts, on several threads.

LLVM's optimizer and code generator are single-threaded per module, and they are most
of a large program's compile time. The runs of loop nests that `lower-loop-to-llvm`
outlines from large functions (`noinline` functions, `parallel.py`) are independent
pieces: `compile_in_parts` moves groups of them (each with the functions only it
uses, such as its OpenMP workers) into modules of their own, converts each to LLVM IR,
then optimizes it and emits its object code in a worker process
(`python -m dlc.runtime.jit_worker`; llvmlite serializes all LLVM calls of a process
behind one lock, so threads would not overlap) while this process builds part 0. One
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

import dataclasses
import json
import os
import struct
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: loading cached objects needs none of them
    import subprocess

    from llvmlite.binding import TargetMachine
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


def _references(op: Operation) -> set[str]:
    """Symbols `op` calls or takes the address of."""
    from xdsl.dialects import llvm

    names: set[str] = set()
    for inner in op.walk():
        if isinstance(inner, llvm.CallOp) and inner.callee is not None:
            names.add(inner.callee.string_value())
        elif isinstance(inner, llvm.AddressOfOp):
            names.add(inner.global_name.string_value())
    return names


def _groups(module: ModuleOp) -> list[tuple[list[llvm.FuncOp], int]]:
    """Each outlined run with the internal functions only it reaches, and its size."""
    from xdsl.dialects import llvm

    funcs = {
        op.sym_name.data: op
        for op in module.body.block.ops
        if isinstance(op, llvm.FuncOp) and op.body.blocks
    }
    roots = [f for f in funcs.values() if f.no_inline is not None]
    refs = {name: _references(f) for name, f in funcs.items()}
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
        groups.append((members, sum(sum(1 for _ in m.walk()) for m in members)))
    return groups


def _self_contained(module: ModuleOp, groups: list[tuple[list[llvm.FuncOp], int]]) -> bool:
    from xdsl.dialects import llvm

    """Whether every internal symbol a group uses is its own: no internal function is
    used from outside its group, no internal variable from inside one (they could not
    be linked across parts)."""
    owner = {f.sym_name.data: i for i, (members, _) in enumerate(groups) for f in members}
    roots = {f.sym_name.data for members, _ in groups for f in members if f.no_inline is not None}
    for op in module.body.block.ops:
        if not isinstance(op, llvm.FuncOp) or not op.body.blocks:
            continue
        here = owner.get(op.sym_name.data)
        for name in _references(op):
            if name in owner and name not in roots and owner[name] != here:
                return False
    mutable = {
        op.sym_name.data
        for op in module.body.block.ops
        if isinstance(op, llvm.GlobalOp)
        and op.linkage.linkage.data == "internal"
        and op.constant is None
    }
    return not any(_references(f) & mutable for members, _ in groups for f in members)


def _plan(module: ModuleOp, parts: int, units: bool = False) -> list[list[llvm.FuncOp]] | None:
    """Groups of outlined runs for parts 1..n-1 (part 0 keeps the rest), balanced by
    op count, or with `units` each run a part of its own (`unit_cache`); None when the
    module is too small or has nothing to move."""
    total = sum(1 for _ in module.walk())
    groups = _groups(module)
    if total < MIN_OPS or len(groups) < 2 or not _self_contained(module, groups):
        return None
    if units:
        return [members for members, _ in groups]
    if parts < 2:
        return None
    loads = [total - sum(size for _, size in groups)] + [0] * (parts - 1)
    planned: list[list[llvm.FuncOp]] = [[] for _ in range(parts)]
    for members, size in sorted(groups, key=lambda g: -g[1]):
        k = loads.index(min(loads))
        loads[k] += size
        planned[k].extend(members)
    moved = [p for p in planned[1:] if p]
    return moved or None


def _declaration(op: Operation) -> Operation:
    """What a part needs to refer to `op` (a function or global) defined elsewhere."""
    from xdsl.dialects import llvm

    if isinstance(op, llvm.FuncOp):
        return llvm.FuncOp(op.sym_name.data, op.function_type, linkage=llvm.LinkageAttr("external"))
    assert isinstance(op, llvm.GlobalOp)
    if op.constant is not None and op.linkage.linkage.data == "internal":
        return op.clone()  # read-only data: each part its own copy
    return llvm.GlobalOp(op.global_type, op.sym_name.data, "external")


def _part_texts(
    module: ModuleOp,
    moved: list[list[llvm.FuncOp]],
    tm: TargetMachine,
    files: DataFiles | BoundData | None,
) -> list[str]:
    """LLVM IR of part 0 (the module without the moved functions) and of each part,
    constant data included from `files` (`constant_data`); the module is restored
    afterwards."""
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import ModuleOp

    from dlc.runtime.jit import ir_text

    block = module.body.block
    order = list(block.ops)
    symbols = {op.sym_name.data: op for op in order if isinstance(op, llvm.FuncOp | llvm.GlobalOp)}
    roots = [f for part in moved for f in part if f.no_inline is not None]
    for f in roots:
        f.linkage = llvm.LinkageAttr("external")
    added: list[Operation] = []
    texts: list[str] = []
    try:
        for part in moved:
            for f in part:
                f.detach()
        for f in roots:  # part 0 calls them
            added.append(_declaration(f))
        block.add_ops(added)
        texts.append(ir_text(module, tm, files))
        for part in moved:
            names = {f.sym_name.data for f in part}
            needed = set().union(*(_references(f) for f in part)) - names
            decls = [_declaration(symbols[n]) for n in sorted(needed) if n in symbols]
            texts.append(ir_text(ModuleOp([*decls, *part]), tm, files))
            for f in part:
                f.detach()
    finally:
        for op in added:
            op.detach()
        for op in order:
            if op.parent is not None:
                op.detach()
            block.add_op(op)
        for f in roots:
            f.linkage = llvm.LinkageAttr("internal")
    return texts


def compile_in_parts(
    module: ModuleOp,
    opt_level: int,
    target: Target | None,
    files: DataFiles | BoundData | None = None,
) -> list[bytes] | None:
    """Object code of `module` in parts (module docstring), parts 1.. found in the
    unit cache or built in worker processes while this one builds part 0 (`files` holds
    the constant data they include); None when it is better compiled whole."""
    from dlc.runtime import unit_cache
    from dlc.runtime.jit import build_object, machine_settings, target_machine

    units = unit_cache.enabled()
    moved = _plan(module, min(MAX_PARTS, _threads()), units)
    if moved is None:
        return None
    texts = _part_texts(module, moved, target_machine(opt_level, target), files)
    if any("@llvm.global_ctors" in text for text in texts):
        return None
    if units:  # named by content, the same unit once
        texts = list(dict.fromkeys(unit_cache.named_by_content(texts)))
    machine = machine_settings(opt_level, target)
    keys = [unit_cache.key(text, machine) for text in texts[1:]] if units else []
    found: list[bytes | None] = [None] * (len(texts) - 1)  # each unit's stored object
    if units:
        found = [unit_cache.lookup(k) for k in keys]
    batches = _batches(texts, [i for i, obj in enumerate(found) if obj is None])
    workers = [_start_worker([texts[1 + i] for i in b], opt_level, target) for b in batches[1:]]
    objects = [build_object(texts[0], opt_level, target)]
    for batch, worker in zip(batches, [None, *workers], strict=True):
        built = _worker_objects(worker, len(batch))
        for j, i in enumerate(batch):
            obj = built[j] or build_object(texts[1 + i], opt_level, target)
            found[i] = obj
            if units:
                unit_cache.store(keys[i], obj)
    return [*objects, *(obj for obj in found if obj is not None)]


def _worker_objects(worker: subprocess.Popen | None, count: int) -> list[bytes | None]:
    """The `count` objects `worker` built, or Nones for those this process must build."""
    try:
        built = unpack_objects(_finish_worker(worker) or b"")
    except ValueError:  # a malformed bundle: build them here
        built = []
    return list(built) if len(built) == count and all(built) else [None] * count


def _batches(texts: list[str], missing: list[int]) -> list[list[int]]:
    """The parts to build (indices into `texts[1:]`) spread over this process (batch 0,
    which also builds part 0) and up to `MAX_PARTS - 1` workers, balanced by text size;
    empty batches dropped but the first."""
    count = min(MAX_PARTS, _threads(), len(missing) + 1)
    loads = [len(texts[0])] + [0] * (count - 1)
    batches: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(missing, key=lambda i: -len(texts[1 + i])):
        k = loads.index(min(loads))
        loads[k] += len(texts[1 + i])
        batches[k].append(i)
    return [batches[0], *(b for b in batches[1:] if b)]


def _start_worker(
    texts: list[str], opt_level: int, target: Target | None
) -> subprocess.Popen | None:
    """`python -m dlc.runtime.jit_worker` building `texts` (its output: their objects,
    `pack_objects`), its input written; None when no worker process can be started (the
    caller builds the parts itself)."""
    import subprocess

    if not sys.executable:
        return None
    data = [text.encode() for text in texts]
    header = {
        "opt_level": opt_level,
        "target": dataclasses.asdict(target) if target else None,
        "sizes": [len(d) for d in data],
    }
    root = str(Path(__file__).resolve().parents[2])  # the dlc this process runs
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    try:
        worker = subprocess.Popen(
            # -P: the working directory is not on the worker's path (nothing found
            # there is imported); PYTHONPATH leads with this process's dlc
            [sys.executable, "-P", "-m", "dlc.runtime.jit_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError:
        return None
    feed = threading.Thread(
        target=_feed, args=(worker, json.dumps(header).encode() + b"\n" + b"".join(data))
    )
    feed.start()
    worker.feeder = feed  # type: ignore[attr-defined]
    return worker


def _feed(worker: subprocess.Popen, data: bytes) -> None:
    try:
        assert worker.stdin is not None
        worker.stdin.write(data)
        worker.stdin.close()
    except OSError:  # the worker died: `_finish_worker` sees its status
        pass


def _finish_worker(worker: subprocess.Popen | None) -> bytes | None:
    """The worker's object code, or None when it failed."""
    if worker is None:
        return None
    assert worker.stdout is not None and worker.stderr is not None
    out = worker.stdout.read()  # stderr carries a short message at most
    worker.stderr.read()
    worker.wait()
    worker.feeder.join()  # type: ignore[attr-defined]
    worker.stdout.close()
    worker.stderr.close()
    return out if worker.returncode == 0 and out else None
