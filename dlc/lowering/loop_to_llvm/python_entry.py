"""Python entry wrappers: `_dlc_py_<f>(ctx, ...)` resets the call context and calls `f`.

The runtime calls these instead of `f` itself. When NumPy's array layout is the one it
probed (`dlc.runtime.convention.DATA_OFFSET`) they take the `PyArrayObject*`s and load
the data pointers natively, which is cheaper than asking NumPy for them from Python.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i8, i32, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from dlc.dialects import abi
from dlc.dialects.abi import PY_ENTRY_PREFIX


def python_entry(name: str, n_args: int, offset: int | None) -> llvm.FuncOp:
    """`_dlc_py_<name>(ctx, ...)`: reset the ctx, then call `name(ctx, data...)`.

    The reset gives every call from Python a clean context whatever the last one left
    (a call interrupted by KeyboardInterrupt never had its status read): status and
    depth 0, the arena empty, and the interrupt flag clear (a signal that arrived
    before this call is Python's to handle). With an `offset`, the arguments are
    `PyArrayObject*`s whose data pointers are loaded natively; without, data pointers.
    `n_args` counts `name`'s arguments, ctx included."""
    ptr = llvm.LLVMPointerType()
    entry = Block(arg_types=[ptr] * n_args)
    ctx, *objects = entry.args
    entry.add_ops(_reset(ctx))
    data: list[SSAValue] = list(objects)
    if offset is not None:
        offset_value = llvm.ConstantOp(IntegerAttr(offset, i64), i64)
        entry.add_op(offset_value)
        data = []
        for obj in objects:
            field = llvm.GEPOp(obj, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[offset_value])
            load = llvm.LoadOp(field, ptr, alignment=8)
            entry.add_ops([field, load])
            data.append(load.dereferenced_value)
    entry.add_ops([llvm.CallOp(name, ctx, *data), llvm.ReturnOp()])
    ftype = llvm.LLVMFunctionType([ptr] * n_args)
    return llvm.FuncOp(
        PY_ENTRY_PREFIX + name, ftype, linkage=llvm.LinkageAttr("external"), body=Region(entry)
    )


def _reset(ctx: SSAValue) -> list[Operation]:
    """status = depth = 0; arena top = arena base; *interrupt flag = 0."""
    ops: list[Operation] = []

    def word(index: int) -> SSAValue:
        ops.append(llvm.GEPOp(ctx, [index], i64, inbounds=True))
        return ops[-1].results[0]

    zero = llvm.ConstantOp(IntegerAttr(0, i64), i64)
    ops.append(zero)
    ops.append(llvm.StoreOp(zero.result, ctx, alignment=8))  # CTX_STATUS is word 0
    ops.append(llvm.StoreOp(zero.result, word(abi.CTX_DEPTH), alignment=8))
    base = llvm.LoadOp(word(abi.CTX_ARENA_BASE), i64, alignment=8)
    ops.append(base)
    ops.append(llvm.StoreOp(base.dereferenced_value, word(abi.CTX_ARENA_TOP), alignment=8))
    flag_word = llvm.LoadOp(word(abi.CTX_INTERRUPT), i64, alignment=8)
    flag = llvm.IntToPtrOp(flag_word.dereferenced_value)
    zero32 = llvm.ConstantOp(IntegerAttr(0, i32), i32)
    ops.extend([flag_word, flag, zero32, llvm.StoreOp(zero32.result, flag, alignment=4)])
    return ops


def add_python_entries(llvm_level: ModuleOp, names: set[str], offset: int | None) -> None:
    """Add an entry for each function of `names` that `llvm_level` defines."""
    defined = {
        f.sym_name.data: f
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and f.body.blocks
    }
    for name in sorted(names & set(defined)):
        n_args = len(defined[name].function_type.inputs.data)
        llvm_level.body.block.add_op(python_entry(name, n_args, offset))
