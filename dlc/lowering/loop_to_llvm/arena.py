"""llvm-level support for `plan-memory` arenas (used by `lower-loop-to-llvm`).

A planned `loop.func @f` (attribute `dlc.arena_bytes`) gets a global
`@_dlc_arena_f: i64 = 0` holding its arena's address and a getter
`@_dlc_arena_get_f() -> ptr` that allocates the arena (64-byte aligned) on the first
call and returns the cached pointer afterwards. So the arena is allocated once per
compiled function, not per call; it lives as long as the process. A planned
`loop.alloc` (attribute `arena_offset`) becomes `getelementptr i8, arena, offset`.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, i8, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from dlc.dialects import loop
from dlc.dialects.loop import ARENA_ALIGN as ALIGN
from dlc.dialects.loop import ARENA_BYTES
from dlc.dialects.loop import ARENA_OFFSET as OFFSET

PTR = llvm.LLVMPointerType()


def _names(func_name: str) -> tuple[str, str]:
    return f"_dlc_arena_{func_name}", f"_dlc_arena_get_{func_name}"


def is_arena_alloc(op: Operation) -> bool:
    return isinstance(op, loop.AllocOp) and OFFSET in op.attributes


def arena_alloc(emitter: Any, op: loop.AllocOp) -> SSAValue:
    """`&arena[offset]`; the arena base is fetched once per function (cached)."""
    func = op.parent_op()
    assert isinstance(func, loop.FuncOp)
    base = getattr(emitter, "_dlc_arena_base", None)
    if base is None:
        _, getter = _names(func.sym_name.data)
        base = emitter.emit(llvm.CallOp(getter, return_type=PTR))
        size = func.attributes[ARENA_BYTES].data  # type: ignore[attr-defined]
        base = emitter.trap_if_null(base, op, size)
        emitter._dlc_arena_base = base
    offset = op.attributes[OFFSET].data  # type: ignore[attr-defined]
    if offset == 0:
        return base
    index = emitter.emit(llvm.ConstantOp(IntegerAttr(offset, i64), i64))
    gep = llvm.GEPOp(base, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[index], inbounds=True)
    return emitter.emit(gep)


def arena_support(func: loop.FuncOp) -> list[Operation]:
    """The global and getter of a planned function (empty when it has no arena)."""
    size_attr = func.attributes.get(ARENA_BYTES)
    if size_attr is None or size_attr.data == 0:  # type: ignore[attr-defined]
        return []
    size = size_attr.data  # type: ignore[attr-defined]
    name, getter = _names(func.sym_name.data)
    global_op = llvm.GlobalOp(i64, name, "internal", value=IntegerAttr(0, i64))

    entry, allocate, done = Block(), Block(), Block(arg_types=[PTR])
    address = llvm.AddressOfOp(name, PTR)
    cached = llvm.LoadOp(address.results[0], i64, alignment=8)
    zero = llvm.ConstantOp(IntegerAttr(0, i64), i64)
    is_null = llvm.ICmpOp(
        cached.results[0], zero.results[0], IntegerAttr(llvm.ICmpPredicateFlag("eq").to_int(), 64)
    )
    as_ptr = llvm.IntToPtrOp(cached.results[0])
    entry.add_ops([address, cached, zero, is_null, as_ptr])
    entry.add_op(llvm.CondBrOp(is_null.results[0], allocate, [], done, [as_ptr.results[0]]))

    align = llvm.ConstantOp(IntegerAttr(ALIGN, i64), i64)
    nbytes = llvm.ConstantOp(IntegerAttr(size, i64), i64)
    fresh = llvm.CallOp("aligned_alloc", align.results[0], nbytes.results[0], return_type=PTR)
    as_int = llvm.PtrToIntOp(fresh.results[0], i64)
    store = llvm.StoreOp(as_int.results[0], address.results[0], alignment=8)
    allocate.add_ops([align, nbytes, fresh, as_int, store, llvm.BrOp(done, fresh.results[0])])
    done.add_op(llvm.ReturnOp(done.args[0]))

    getter_op = llvm.FuncOp(
        getter,
        llvm.LLVMFunctionType([], PTR),
        linkage=llvm.LinkageAttr("internal"),
        body=Region([entry, allocate, done]),
    )
    return [global_op, getter_op]
