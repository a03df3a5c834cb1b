"""plan-memory: place every intermediate buffer of a `loop.func` in one static arena.

Buffers whose live ranges (over the top-level ops of one block) are disjoint share bytes,
and an element-wise writer may take its input's bytes in place; offsets are a greedy
lowest fit (two orders, the smaller arena wins). Each planned `loop.alloc` gets
`arena_offset`, its `loop.dealloc` goes, the function gets `dlc.arena_bytes` and
`dlc.min_live_bytes`. Details: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import IntAttr, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.analysis.loop_callgraph import is_recursive
from dlc.analysis.walk import kind_of, walk_ops
from dlc.dialects import loop, loop_memory

ALIGN = loop.ARENA_ALIGN
OFFSET = loop.ARENA_OFFSET
ARENA_BYTES = loop.ARENA_BYTES
MIN_LIVE_BYTES = loop.MIN_LIVE_BYTES


def buffer_bytes(mtype: MemRefType) -> int:
    """Bytes of a buffer rounded up to the arena alignment (at least one unit)."""
    count = 1
    for dim in mtype.get_shape():
        count *= dim
    nbytes = count * (loop.element_bytes(mtype.element_type) or 8)
    return max(ALIGN, (nbytes + ALIGN - 1) // ALIGN * ALIGN)


def _top_level(op: Operation, body: Block) -> Operation:
    while op.parent_block() is not body:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


@dataclass
class Slot:
    """Bytes shared by one buffer or an in-place chain of buffers."""

    allocs: list[loop.AllocOp]
    size: int
    start: int
    end: int
    offset: int = 0
    copies: list[Operation] = field(default_factory=list)  # no-ops once placed

    def overlaps(self, other: Slot) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class _Buffer:
    alloc: loop.AllocOp
    first: int
    last: int
    writer: Operation | None = None  # the first top-level user


def _users(alloc: loop.AllocOp) -> list[Operation]:
    return [u.operation for u in alloc.res.uses if not isinstance(u.operation, loop.DeallocOp)]


def _home_block(alloc: loop.AllocOp, func: loop.FuncOp) -> Block | None:
    """The one top-level block of `func` holding every use of `alloc` (its value is
    then born and dead within one execution of that block), or None."""
    homes: set[Block] = set()
    for user in _users(alloc):
        op = user
        while op.parent_op() is not func:
            parent = op.parent_op()
            assert parent is not None
            op = parent
        block = op.parent_block()
        assert block is not None
        homes.add(block)
    return homes.pop() if len(homes) == 1 else None


def _buffers(func: loop.FuncOp, body: Block | None = None) -> list[_Buffer]:
    """The buffers of a single-block function, or those local to block `body` of a
    multi-block one (liveness by position among `body`'s top-level ops)."""
    allocs: list[loop.AllocOp]
    if body is None:
        body = func.body.block
        allocs = [op for op in body.ops if isinstance(op, loop.AllocOp)]
    else:
        allocs = [
            op
            for op in func.body.walk()
            if isinstance(op, loop.AllocOp) and _home_block(op, func) is body
        ]
    position = {op: i for i, op in enumerate(body.ops)}
    out = []
    for op in allocs:
        users = [_top_level(use, body) for use in _users(op)]
        if not users:
            out.append(_Buffer(op, position.get(op, 0), position.get(op, 0)))
            continue
        writer = min(users, key=lambda u: position[u])
        at = [position[u] for u in users]
        out.append(_Buffer(op, min(at), max(at), writer))
    return out


def _loop_ivs(nest: Operation) -> set[SSAValue]:
    return {o.iv for o in nest.walk() if isinstance(o, loop.ForOp)}


def elementwise_in_place(nest: Operation, source: SSAValue, dest: SSAValue) -> bool:
    """`nest` reads `source` and writes `dest` only at one common list of distinct ivs,
    and every read of `source` comes before the first write of `dest` in the body (a fused
    nest may store one member's result before a later member reads the old buffer)."""
    if source.type != dest.type:
        return False
    ivs = _loop_ivs(nest)
    index_lists: set[tuple[SSAValue, ...]] = set()
    written = False
    for op in nest.walk():
        if isinstance(op, loop.StoreOp) and op.buffer == dest:
            written = True
        if written and isinstance(op, loop.LoadOp) and op.buffer == source:
            return False
        if any(v in (source, dest) for v in op.operands):
            if not isinstance(op, loop.LoadOp | loop.StoreOp):
                return False
            if isinstance(op, loop.LoadOp) and op.buffer == dest:
                return False
            if isinstance(op, loop.StoreOp) and op.buffer == source:
                return False
            if isinstance(op, loop.StoreOp) and op.value in (source, dest):
                return False
            index_lists.add(tuple(op.indices))
    if len(index_lists) != 1:
        return False
    (indices,) = index_lists
    return len(set(indices)) == len(indices) and all(i in ivs for i in indices)


def _slots(buffers: list[_Buffer]) -> list[Slot]:
    """One slot per buffer, merging in-place chains; intervals in half-steps."""
    slot_of: dict[loop.AllocOp, Slot] = {}
    slots: list[Slot] = []
    by_last: dict[int, list[_Buffer]] = {}
    for buf in buffers:
        by_last.setdefault(buf.last, []).append(buf)
    taken: set[loop.AllocOp] = set()
    allocs: dict[SSAValue, _Buffer] = {buf.alloc.res: buf for buf in buffers}
    for buf in sorted(buffers, key=lambda b: b.first):
        size = buffer_bytes(buf.alloc.res.type)
        copy = _copied_from(buf, allocs)
        if copy is not None and copy[0].alloc in slot_of and copy[0].alloc not in taken:
            source, store = copy
            slot = slot_of[source.alloc]
            slot.allocs.append(buf.alloc)
            assert buf.writer is not None  # the copy's `loop.address`
            slot.copies += [store, buf.writer]
            slot.end = max(slot.end, 2 * buf.last, 2 * source.last)
            slot_of[buf.alloc] = slot
            if source.last > buf.first + 1:  # the source outlives the copy: no donor
                taken.update((source.alloc, buf.alloc))
            continue
        donor = _in_place_donor(buf, by_last.get(buf.first, []), taken)
        if donor is not None:
            taken.add(donor.alloc)
            slot = slot_of[donor.alloc]
            slot.allocs.append(buf.alloc)
            slot.end = 2 * buf.last
            slot_of[buf.alloc] = slot
            continue
        slot = Slot([buf.alloc], size, 2 * buf.first, 2 * buf.last)
        slots.append(slot)
        slot_of[buf.alloc] = slot
    return slots


def _copied_from(
    buf: _Buffer, allocs: dict[SSAValue, _Buffer]
) -> tuple[_Buffer, loop_memory.RawStoreOp] | None:
    """The buffer `buf` is a byte copy of (a `tensor.bitcast`: its first user the
    `loop.address` whose one use, the next op, is `loop.raw_store` of that buffer), of
    the same size, and that store; None otherwise. Sharing the source's bytes (both
    immutable from then on) makes the copy a no-op."""
    address = buf.writer
    if not isinstance(address, loop_memory.AddressOp) or address.res.uses.get_length() != 1:
        return None
    store = next(iter(address.res.uses)).operation
    if not isinstance(store, loop_memory.RawStoreOp) or store.parent_block() is not (
        address.parent_block()
    ):
        return None
    source = allocs.get(store.buffer)
    if source is None or store is not address.next_op or source.first >= buf.first:
        return None
    if buffer_bytes(source.alloc.res.type) != buffer_bytes(buf.alloc.res.type):
        return None
    return source, store


def _in_place_donor(
    buf: _Buffer, candidates: list[_Buffer], taken: set[loop.AllocOp]
) -> _Buffer | None:
    """A buffer dead after `buf`'s first writer whose bytes `buf` can take over."""
    writer = buf.writer
    if writer is None:
        return None
    for cand in candidates:
        if cand is buf or cand.alloc in taken or cand.first == buf.first:
            continue
        if elementwise_in_place(writer, cand.alloc.res, buf.alloc.res):
            return cand
    return None


def _place(slots: list[Slot], order: list[Slot]) -> int:
    """Greedy lowest-offset fit in `order`; returns the arena size."""
    placed: list[Slot] = []
    top = 0
    for slot in order:
        offset = 0
        for other in sorted((p for p in placed if p.overlaps(slot)), key=lambda p: p.offset):
            if offset + slot.size <= other.offset:
                break
            offset = max(offset, other.offset + other.size)
        slot.offset = offset
        placed.append(slot)
        top = max(top, offset + slot.size)
    return top


def plan_slots(slots: list[Slot]) -> int:
    """Assign offsets (best of two orders); returns the arena size."""
    best, best_offsets = None, None
    for key in (lambda s: (-s.size, s.start), lambda s: (s.start, -s.size)):
        size = _place(slots, sorted(slots, key=key))
        if best is None or size < best:
            best, best_offsets = size, [s.offset for s in slots]
    assert best_offsets is not None
    for slot, offset in zip(slots, best_offsets, strict=True):
        slot.offset = offset
    return best or 0


def min_live_bytes(slots: list[Slot]) -> int:
    """Largest total size of slots live at one time (the arena's lower bound)."""
    points = {s.start for s in slots}
    return max((sum(s.size for s in slots if s.start <= t <= s.end) for t in points), default=0)


def plan_function(func: loop.FuncOp) -> None:
    """Assign arena offsets to `func`'s allocs and drop their deallocs.

    A multi-block function plans each block's local buffers (every use in that block:
    the value is born and dies within one execution of it) from offset 0, since two
    blocks never execute at once; buffers used in several blocks (block arguments,
    values crossing a branch or a loop back edge) stay heap allocations."""
    if len(func.body.blocks) == 1:
        per_block = [_slots(_buffers(func))]
    else:
        per_block = [_slots(_buffers(func, block)) for block in func.body.blocks]
    arena = 0
    for slots in per_block:
        arena = max(arena, plan_slots(slots))
        _assign(slots)
    func.attributes[ARENA_BYTES] = IntAttr(arena)
    func.attributes[MIN_LIVE_BYTES] = IntAttr(max(min_live_bytes(s) for s in per_block))


def _assign(slots: list[Slot]) -> None:
    for slot in slots:
        for copy in slot.copies:
            copy.detach()
            copy.erase()
        for alloc in slot.allocs:
            alloc.attributes[OFFSET] = IntAttr(slot.offset)
            for use in list(alloc.res.uses):
                if isinstance(use.operation, loop.DeallocOp):
                    use.operation.detach()
                    use.operation.erase()


_ALLOCS = (loop.AllocOp, loop.AllocSizedOp)


def function_stats(func: loop.FuncOp) -> dict[str, int]:
    """The compile report of one loop-level function (after planning, if it ran)."""
    kinds: dict[type, int] = {}
    ops = walk_ops(func)
    allocs = [cast(loop.AllocOp, op) for op in ops if kind_of(op, _ALLOCS, kinds) == 1]
    arena = func.attributes.get(ARENA_BYTES)
    min_live = func.attributes.get(MIN_LIVE_BYTES)
    heap = [a for a in allocs if OFFSET not in a.attributes]
    sized = sum(1 for op in ops if kind_of(op, _ALLOCS, kinds) == 2)
    if min_live is None:  # unplanned: every buffer has its own heap block
        if len(func.body.blocks) == 1:
            min_live_value = min_live_bytes(_slots(_buffers(func)))
        else:
            min_live_value = sum(buffer_bytes(a.res.type) for a in allocs)
        arena_value = 0  # every buffer is a heap block of its own
        heap = allocs
    else:
        assert isinstance(min_live, IntAttr) and isinstance(arena, IntAttr), "set together"
        min_live_value = min_live.data
        arena_value = arena.data
    return {
        "loop_nests": sum(
            1 for block in func.body.blocks for op in block.ops if isinstance(op, loop.ForOp)
        ),
        "buffers": len(allocs) + sized,  # sized: symbolic dimensions, on the heap
        "arena_bytes": arena_value,
        "min_live_bytes": min_live_value,
        "heap_buffers": len(heap) + sized,  # unplanned: all; planned multi-block: cross-block ones
    }


class PlanMemoryPass(ModulePass):
    """Loop level: give every intermediate buffer an offset in one per-function arena.

    Input: verified loop level. Output: the same functions; planned `loop.alloc`s carry
    `arena_offset`, their `loop.dealloc`s are gone, and each planned `loop.func` carries
    `dlc.arena_bytes` / `dlc.min_live_bytes`. Functions that may call themselves are
    left unchanged. See the module docstring for the liveness and in-place rules.
    """

    name = "plan-memory"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "loop", self.name)
        funcs = {f.sym_name.data: f for f in op.body.block.ops if isinstance(f, loop.FuncOp)}
        for func in funcs.values():
            if OFFSET in func.attributes or ARENA_BYTES in func.attributes:
                continue
            if is_recursive(func, funcs):
                continue  # the arena is static: not reentrant
            plan_function(func)
