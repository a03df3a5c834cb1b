"""loop -> llvm for the raw-memory ops (dlc/dialects/loop_memory.py).

Addresses are i64 (`inttoptr`/`ptrtoint` at each use). Module variables live in
runtime-owned zeroed storage whose address is in the i64 global `_dlc_var_<name>`
(`VAR_PREFIX`); the module attribute `dlc.vars` lists name -> byte size so the runtime
can allocate and install it right after JIT compilation.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import IntegerAttr, MemRefType, i1, i8, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.dialects import loop_memory as lm
from dlc.dialects.abi import (
    ADDRESS_MASK,
    DEAD,
    HEAP_HEADER,
    LIVE,
    TAG_SHIFT,
    VAR_PREFIX,
    function_symbol,
)
from dlc.dialects.loop_buffer import memref_type
from dlc.lowering.loop_to_llvm.buffers import element_bytes, element_count
from dlc.lowering.loop_to_llvm.scalar import const, icmp, select
from dlc.lowering.prebuilt import make

if TYPE_CHECKING:
    from dlc.lowering.loop_to_llvm.func_emitter import FuncEmitter

PTR = llvm.LLVMPointerType()


def _ptr(em: FuncEmitter, addr: SSAValue) -> SSAValue:
    return em.emit(make(llvm.IntToPtrOp, addr))


def _int(em: FuncEmitter, ptr: SSAValue) -> SSAValue:
    return em.emit(make(llvm.PtrToIntOp, ptr, i64))


def _buffer_bytes(em: FuncEmitter, op: Operation, mtype: MemRefType) -> int:
    return element_count(mtype) * element_bytes(mtype, op)


def _memmove(em: FuncEmitter, dst: SSAValue, src: SSAValue, n: SSAValue) -> None:
    args = [dst, src, n, const(em, 0, i1)]
    em.emit(make(llvm.CallIntrinsicOp, "llvm.memmove.p0.p0.i64", args, []))


def lower_raw_memory(em: FuncEmitter, op: Operation) -> None:
    """Emit the llvm ops of one raw-memory op."""
    get = em.get
    match op:
        case lm.AddressOp():
            em.values[op.res] = _int(em, get(op.buffer))
        case lm.GlobalAddressOp():
            name = VAR_PREFIX + op.sym_name.data
            em.status.variables[op.sym_name.data] = op.size.data
            slot = em.emit(make(llvm.AddressOfOp, name, PTR))
            em.values[op.res] = em.emit(make(llvm.LoadOp, slot, i64, alignment=8))
        case lm.RawLoadOp():
            n = _buffer_bytes(em, op, memref_type(op.buffer, op.name))
            _memmove(em, get(op.buffer), _ptr(em, get(op.addr)), const(em, n, i64))
        case lm.RawStoreOp():
            n = _buffer_bytes(em, op, memref_type(op.buffer, op.name))
            _memmove(em, _ptr(em, get(op.addr)), get(op.buffer), const(em, n, i64))
        case lm.RawCopyOp():
            _memmove(em, _ptr(em, get(op.dst)), _ptr(em, get(op.src)), get(op.nbytes))
        case lm.RawAllocOp():
            em.values[op.res] = _heap_alloc(em, op, get(op.nbytes))
        case lm.RawFreeOp() if op.raw is not None:
            em.declare("free", [PTR], llvm.LLVMVoidType())
            em.emit(make(llvm.CallOp, "free", _ptr(em, get(op.addr))))
        case lm.RawFreeOp():
            _heap_free(em, op)
        case lm.StackAllocOp():
            em.values[op.res] = _stack_alloc(em, op)
        case lm.RawCheckOp():
            _check(em, op)
        case lm.StackPushOp():
            em.values[op.res] = _stack_push(em, op)
        case lm.StackPopOp():
            em.values[op.res] = _stack_pop(em, op)
        case lm.ScalarCallOp():
            em.values[op.res] = _scalar_call(em, op)
        case _:
            raise AssertionError(op.name)


def _stack_alloc(em: FuncEmitter, op: lm.StackAllocOp) -> SSAValue:
    """An alloca at the top of the entry block (one frame slot), zeroed here."""
    entry = em.region.blocks.first
    assert entry is not None
    size = max(1, op.size.data)
    count = make(llvm.ConstantOp, IntegerAttr(size, i64), i64)
    alloca = make(llvm.AllocaOp, count, i8, alignment=16)
    first = entry.first_op
    if first is None:
        entry.add_ops([count, alloca])
    else:
        entry.insert_ops_before([count, alloca], first)
    args = [alloca.results[0], const(em, 0, i8), const(em, size, i64), const(em, 0, i1)]
    em.emit(make(llvm.CallIntrinsicOp, "llvm.memset.p0.i64", args, []))
    return _int(em, alloca.results[0])


def _heap_alloc(em: FuncEmitter, op: lm.RawAllocOp, nbytes: SSAValue) -> SSAValue:
    """calloc(1, HEAP_HEADER + n), the header word set to LIVE; the object starts after
    it. A failed allocation (n negative or too large: NULL) traps instead of handing out
    a null pointer whose bounds claim n bytes."""
    em.declare("calloc", [i64, i64], PTR)
    total = em.emit(make(llvm.AddOp, nbytes, const(em, HEAP_HEADER, i64)))
    base = em.emit(make(llvm.CallOp, "calloc", const(em, 1, i64), total, return_type=PTR))
    null = icmp(em, "eq", _int(em, base), const(em, 0, i64))
    failed = em.emit(make(llvm.OrOp, null, icmp(em, "slt", nbytes, const(em, 0, i64))))
    em.trap_when(failed, op, "trap", "heap allocation failed (out of memory or a negative count)")
    em.emit(make(llvm.StoreOp, const(em, LIVE, i64), base, alignment=8))
    return em.emit(make(llvm.AddOp, _int(em, base), const(em, HEAP_HEADER, i64)))


def _heap_free(em: FuncEmitter, op: lm.RawFreeOp) -> None:
    """free of a `raw_alloc` object (address 0: nothing): its header must say LIVE, else
    (freed twice, or not the start of a heap object) trap instead of corrupting the
    allocator; the header says DEAD before the memory goes back."""
    addr = em.get(op.addr)
    check, done = Block(), Block()
    em.emit(make(llvm.CondBrOp, icmp(em, "eq", addr, const(em, 0, i64)), done, [], check, []))
    em.start(check)
    base = _ptr(em, em.emit(make(llvm.SubOp, addr, const(em, HEAP_HEADER, i64))))
    word = em.emit(make(llvm.LoadOp, base, i64, alignment=8))
    message = "deallocate of memory that is not a live heap object (deallocated twice?)"
    em.trap_when(icmp(em, "ne", word, const(em, LIVE, i64)), op, "trap", message)
    em.emit(make(llvm.StoreOp, const(em, DEAD, i64), base, alignment=8))
    tag_word = _ptr(em, em.emit(make(llvm.SubOp, addr, const(em, 8, i64))))
    em.emit(make(llvm.StoreOp, const(em, 0, i64), tag_word, alignment=8))  # pointers to it trap
    em.declare("free", [PTR], llvm.LLVMVoidType())
    em.emit(make(llvm.CallOp, "free", base))
    em.emit(make(llvm.BrOp, done))
    em.start(done)


POINTER_ACCESSES = ("load", "store")


def _check(em: FuncEmitter, op: lm.RawCheckOp) -> None:
    """addr < lo or addr + n > hi (or addr + n wraps around past 2^64): record the
    location and the offending value (ctx word `CTX_FAULT`), return from the function.

    Accesses through user pointers (`load`, `store`, `copy`) are always checked: their
    addresses come from the program's own arithmetic, and compiled code must never touch
    memory outside the object a pointer came from; the message gives the byte offset
    into the object ("out-of-bounds load of 4 bytes through a pointer at byte offset
    16"). Other checks are dynamic indices (the access is `what` of a
    `tensor.index_check`, the address the index itself, also clamped by its users); they
    only exist in bounds-checking builds and give the index ("out-of-bounds extract index
    9 into <4 x f32>")."""
    access = op.access.data
    always = op.always is not None or access in POINTER_ACCESSES
    if not em.status.bounds_check and not always:
        return
    shown, n, lo, hi = (em.get(v) for v in (op.addr, op.nbytes, op.lo, op.hi))
    if access in POINTER_ACCESSES:
        lo, hi = _live_object(em, op, lo, hi)
    addr = shown
    if op.offset is not None:  # a signed range moved to start at 0
        addr = em.emit(make(llvm.SubOp, shown, const(em, op.offset.data, i64)))
    end = em.emit(make(llvm.AddOp, addr, n))
    below = icmp(em, "ult", addr, lo)
    above = icmp(em, "ugt", end, hi)
    wrapped = icmp(em, "ult", end, addr)  # addr + n past 2^64: an address near the top
    bad = em.emit(make(llvm.OrOp, em.emit(make(llvm.OrOp, below, above)), wrapped))
    if access not in POINTER_ACCESSES:
        em.trap_when(bad, op, "bounds-value", _index_message(access), shown)
        return
    size = _static_int(op.nbytes)
    of = f" of {size} bytes" if size is not None else ""
    message = f"out-of-bounds {access}{of} through a pointer at byte offset \t"
    em.trap_when(bad, op, "bounds-value", message, em.emit(make(llvm.SubOp, addr, lo)))


def _live_object(
    em: FuncEmitter, op: lm.RawCheckOp, lo: SSAValue, hi: SSAValue
) -> tuple[SSAValue, SSAValue]:
    """The bounds of a pointer without its tag (`abi.TAG_SHIFT`); a tagged pointer (to an
    `allocateHeap` object) traps unless the header word before its object still holds
    the tag (`deallocate` clears it; freed memory holds the allocator's own words)."""
    mask = const(em, ADDRESS_MASK, i64)
    shift = const(em, TAG_SHIFT, i64)
    high = em.emit(make(llvm.ShlOp, em.emit(make(llvm.LShrOp, lo, shift)), const(em, 16, i64)))
    tag = em.emit(make(llvm.OrOp, high, em.emit(make(llvm.LShrOp, hi, shift))))
    base = em.emit(make(llvm.AndOp, lo, mask))
    check, done = Block(), Block()
    em.emit(make(llvm.CondBrOp, icmp(em, "ne", tag, const(em, 0, i64)), check, [], done, []))
    em.start(check)
    word = em.emit(
        make(llvm.LoadOp, _ptr(em, em.emit(make(llvm.SubOp, base, const(em, 8, i64)))), i64)
    )
    message = f"{op.access.data} through a pointer to a deallocated heap object"
    em.trap_when(icmp(em, "ne", word, tag), op, "trap", message)
    em.emit(make(llvm.BrOp, done))
    em.start(done)
    return base, em.emit(make(llvm.AndOp, hi, mask))


def _index_message(what: str) -> str:
    """The message of a failed index check `what` with a tab where the index goes:
    `extract index into <4 x f32>` -> `out-of-bounds extract index \\t into <4 x f32>`."""
    head, index, tail = what.partition(" index")
    if not index:
        return f"out-of-bounds {what}: index \t"
    return f"out-of-bounds {head} index \t{tail}"


def _static_int(value: SSAValue) -> int | None:
    """The value of an `arith.constant` integer, else None."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _field(em: FuncEmitter, header: SSAValue, index: int) -> SSAValue:
    """Pointer to i64 field `index` of a stack header."""
    return _ptr(em, em.emit(make(llvm.AddOp, header, const(em, 8 * index, i64))))


def _load_field(em: FuncEmitter, header: SSAValue, index: int) -> SSAValue:
    return em.emit(make(llvm.LoadOp, _field(em, header, index), i64, alignment=8))


def _store_field(em: FuncEmitter, value: SSAValue, header: SSAValue, index: int) -> None:
    em.emit(make(llvm.StoreOp, value, _field(em, header, index), alignment=8))


TAG_BYTES = 8
"""Above each stack item: a tag of its type (`stack_tag`), checked by `pop`."""


def stack_tag(item: str) -> int:
    """The 64-bit tag of the stack item type whose text is `item` (BLAKE2b: distinct
    types of a module never share a tag in practice, and no program chooses it)."""
    return int.from_bytes(hashlib.blake2b(item.encode(), digest_size=8).digest(), "little") - (
        1 << 63
    )


def _trap_if_destroyed(em: FuncEmitter, op: Operation, header: SSAValue, what: str) -> None:
    """A null header (a zero `stack` value, never created) or capacity -1 (destroyed)
    traps before any field is used."""
    null = icmp(em, "eq", header, const(em, 0, i64))
    em.trap_when(null, op, "trap", f"{what} a stack that was never created")
    capacity = _load_field(em, header, 2)
    destroyed = icmp(em, "eq", capacity, const(em, -1, i64))
    em.trap_when(destroyed, op, "trap", f"{what} a destroyed stack")


def _stack_push(em: FuncEmitter, op: lm.StackPushOp) -> SSAValue:
    """size + n + 8 > capacity: data = realloc(data, max(2 capacity, size + n + 8, 64));
    the item's tag goes in the 8 bytes above its n bytes."""
    header = em.get(op.header)
    _trap_if_destroyed(em, op, header, "push to")
    size = _load_field(em, header, 1)
    need = em.emit(make(llvm.AddOp, size, const(em, op.nbytes.data + TAG_BYTES, i64)))
    capacity = _load_field(em, header, 2)
    grow, join = Block(), Block()
    em.emit(make(llvm.CondBrOp, icmp(em, "ugt", need, capacity), grow, [], join, []))
    em.start(grow)
    twice = em.emit(make(llvm.AddOp, capacity, capacity))
    larger = select(em, icmp(em, "ugt", twice, need), twice, need)
    floor = const(em, 64, i64)
    new_capacity = select(em, icmp(em, "ugt", larger, floor), larger, floor)
    em.declare("realloc", [PTR, i64], PTR)
    data = _ptr(em, _load_field(em, header, 0))
    grown = em.emit(make(llvm.CallOp, "realloc", data, new_capacity, return_type=PTR))
    em.trap_if_null(grown, op, op.nbytes.data + TAG_BYTES)
    _store_field(em, _int(em, grown), header, 0)
    _store_field(em, new_capacity, header, 2)
    em.emit(make(llvm.BrOp, join))
    em.start(join)
    _store_field(em, need, header, 1)
    at = em.emit(make(llvm.AddOp, _load_field(em, header, 0), size))
    tag_at = _ptr(em, em.emit(make(llvm.AddOp, at, const(em, op.nbytes.data, i64))))
    em.emit(make(llvm.StoreOp, const(em, stack_tag(op.item.data), i64), tag_at, alignment=1))
    return at


def _stack_pop(em: FuncEmitter, op: lm.StackPopOp) -> SSAValue:
    """Traps when the stack is destroyed or empty or its top tag is not the popped
    type's; else size -= n + 8."""
    header = em.get(op.header)
    _trap_if_destroyed(em, op, header, "pop from")
    size = _load_field(em, header, 1)
    n = const(em, op.nbytes.data + TAG_BYTES, i64)
    em.trap_when(icmp(em, "ult", size, n), op, "trap", "pop from an empty stack")
    data = _load_field(em, header, 0)
    tag_at = em.emit(
        make(llvm.SubOp, em.emit(make(llvm.AddOp, data, size)), const(em, TAG_BYTES, i64))
    )
    tag = em.emit(make(llvm.LoadOp, _ptr(em, tag_at), i64, alignment=1))
    wrong = icmp(em, "ne", tag, const(em, stack_tag(op.item.data), i64))
    item = op.item.data
    em.trap_when(wrong, op, "trap", f"pop {item} from a stack whose top item is not a {item}")
    rest = em.emit(make(llvm.SubOp, size, n))
    _store_field(em, rest, header, 1)
    return em.emit(make(llvm.AddOp, data, rest))


def _entry_slot(em: FuncEmitter, t: Attribute) -> SSAValue:
    """An alloca of one `t` at the top of the entry block."""
    entry = em.region.blocks.first
    assert entry is not None
    count = make(llvm.ConstantOp, IntegerAttr(1, i64), i64)
    alloca = make(llvm.AllocaOp, count, t, alignment=16)
    first = entry.first_op
    if first is None:
        entry.add_ops([count, alloca])
    else:
        entry.insert_ops_before([count, alloca], first)
    return alloca.results[0]


def _scalar_call(em: FuncEmitter, op: lm.ScalarCallOp) -> SSAValue:
    """Scalars through stack slots: f(&a, &b, &out); bool (i1) is one byte."""
    slots = []
    for value in op.args:
        item = em.get(value)
        if item.type == i1:
            item = em.emit(make(llvm.ZExtOp, item, i8))
        slot = _entry_slot(em, item.type)
        em.emit(make(llvm.StoreOp, item, slot))
        slots.append(slot)
    rtype = op.res.type
    out = _entry_slot(em, i8 if rtype == i1 else rtype)
    em.emit(make(llvm.CallOp, function_symbol(op.callee.data), em.ctx, *slots, out))
    em.return_if_status()
    if rtype == i1:
        return em.emit(make(llvm.TruncOp, em.emit(make(llvm.LoadOp, out, i8)), i1))
    return em.emit(make(llvm.LoadOp, out, rtype))
