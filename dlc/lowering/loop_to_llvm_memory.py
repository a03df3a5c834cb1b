"""loop -> llvm for the raw-memory ops (dlc/dialects/loop_memory.py).

Addresses are i64 (`inttoptr`/`ptrtoint` at each use). Module variables live in
runtime-owned zeroed storage whose address is in the i64 global `_dlc_var_<name>`
(`VAR_PREFIX`); the module attribute `dlc.vars` lists name -> byte size so the runtime
can allocate and install it right after JIT compilation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, MemRefType, i1, i8, i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.diagnostics import get_loc
from dlc.dialects import loop_memory as lm
from dlc.lowering.loop_to_llvm_scalar import const, icmp

if TYPE_CHECKING:
    from dlc.lowering.lower_loop_to_llvm import _FuncEmitter

VAR_PREFIX = "_dlc_var_"
PTR = llvm.LLVMPointerType()


def _ptr(em: _FuncEmitter, addr: SSAValue) -> SSAValue:
    return em.emit(llvm.IntToPtrOp(addr))


def _int(em: _FuncEmitter, ptr: SSAValue) -> SSAValue:
    return em.emit(llvm.PtrToIntOp(ptr, i64))


def _buffer_bytes(em: _FuncEmitter, op: Operation, mtype: MemRefType) -> int:
    from dlc.lowering.lower_loop_to_llvm import element_bytes, element_count

    return element_count(mtype) * element_bytes(mtype, op)


def _memmove(em: _FuncEmitter, dst: SSAValue, src: SSAValue, n: SSAValue) -> None:
    args = [dst, src, n, const(em, 0, i1)]
    em.emit(llvm.CallIntrinsicOp("llvm.memmove.p0.p0.i64", args, []))


def lower_raw_memory(em: _FuncEmitter, op: Operation) -> None:
    """Emit the llvm ops of one raw-memory op."""
    get = em.get
    match op:
        case lm.AddressOp():
            em.values[op.res] = _int(em, get(op.buffer))
        case lm.GlobalAddressOp():
            assert em.status is not None
            name = VAR_PREFIX + op.sym_name.data
            em.status.variables[op.sym_name.data] = op.size.data
            slot = em.emit(llvm.AddressOfOp(name, PTR))
            em.values[op.res] = em.emit(llvm.LoadOp(slot, i64, alignment=8))
        case lm.RawLoadOp():
            n = _buffer_bytes(em, op, op.buffer.type)  # type: ignore[arg-type]
            _memmove(em, get(op.buffer), _ptr(em, get(op.addr)), const(em, n, i64))
        case lm.RawStoreOp():
            n = _buffer_bytes(em, op, op.buffer.type)  # type: ignore[arg-type]
            _memmove(em, _ptr(em, get(op.addr)), get(op.buffer), const(em, n, i64))
        case lm.RawCopyOp():
            _memmove(em, _ptr(em, get(op.dst)), _ptr(em, get(op.src)), get(op.nbytes))
        case lm.RawAllocOp():
            em.declare("calloc", [i64, i64], PTR)
            one = const(em, 1, i64)
            call = llvm.CallOp("calloc", one, get(op.nbytes), return_type=PTR)
            em.values[op.res] = _int(em, em.emit(call))
        case lm.RawFreeOp():
            em.declare("free", [PTR], llvm.LLVMVoidType())
            em.emit(llvm.CallOp("free", _ptr(em, get(op.addr))))
        case lm.StackAllocOp():
            em.values[op.res] = _stack_alloc(em, op)
        case lm.RawCheckOp():
            _check(em, op)
        case _:
            raise AssertionError(op.name)


def _stack_alloc(em: _FuncEmitter, op: lm.StackAllocOp) -> SSAValue:
    """An alloca at the top of the entry block (one frame slot), zeroed here."""
    entry = em.region.blocks.first
    assert entry is not None
    size = max(1, op.size.data)
    count = llvm.ConstantOp(IntegerAttr(size, i64), i64)
    alloca = llvm.AllocaOp(count, i8, alignment=16)
    first = entry.first_op
    if first is None:
        entry.add_ops([count, alloca])
    else:
        entry.insert_ops_before([count, alloca], first)
    args = [alloca.results[0], const(em, 0, i8), const(em, size, i64), const(em, 0, i1)]
    em.emit(llvm.CallIntrinsicOp("llvm.memset.p0.i64", args, []))
    return _int(em, alloca.results[0])


def _check(em: _FuncEmitter, op: lm.RawCheckOp) -> None:
    """addr < lo or addr + n > hi: record the location, return from the function."""
    status = em.status
    if status is None or not status.bounds_check:
        return
    addr, n, lo, hi = (em.get(v) for v in (op.addr, op.nbytes, op.lo, op.hi))
    end = em.emit(llvm.AddOp(addr, n))
    below = icmp(em, "ult", addr, lo)
    above = icmp(em, "ugt", end, hi)
    bad = em.emit(llvm.OrOp(below, above))
    loc = get_loc(op)
    where = f"{loc.filename}:{loc.line}:{loc.column}: " if loc is not None else ""
    text = f"{where}out-of-bounds {op.access.data} through a pointer ({op.name})"
    code = status.code("bounds", text)
    leave, resume = Block(), Block()
    em.emit(llvm.CondBrOp(bad, leave, [], resume, []))
    em.start(leave)
    em.emit(llvm.StoreOp(const(em, code, i64), em.status_address(), alignment=8))
    em.emit(llvm.ReturnOp())
    em.start(resume)
