"""Python entry wrappers: `_dlc_py_<f>(PyArrayObject*...)` calls `f` on their data.

The runtime calls these instead of `f` itself when NumPy's array layout is the one it
probed (`dlc.runtime.convention.DATA_OFFSET`): loading the data pointer natively is
cheaper than asking NumPy for it from Python.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i8, i32, i64
from xdsl.ir import Block, Region

from dlc.dialects import abi
from dlc.dialects.abi import PY_ENTRY_PREFIX


def python_entry(name: str, n_args: int, offset: int) -> llvm.FuncOp:
    """`_dlc_py_<name>(ctx, PyArrayObject*...)`: clear the interrupt flag (a signal
    that arrived before this call is Python's to handle), load each array's data
    pointer, call `name(ctx, data...)`. `n_args` counts `name`'s arguments, ctx too."""
    ptr = llvm.LLVMPointerType()
    entry = Block(arg_types=[ptr] * n_args)
    ctx, *objects = entry.args
    flag_slot = llvm.GEPOp(ctx, [abi.CTX_INTERRUPT], i64, inbounds=True)
    flag_word = llvm.LoadOp(flag_slot, i64, alignment=8)
    flag = llvm.IntToPtrOp(flag_word.dereferenced_value)
    zero = llvm.ConstantOp(IntegerAttr(0, i32), i32)
    entry.add_ops([flag_slot, flag_word, flag, zero, llvm.StoreOp(zero, flag, alignment=4)])
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


def add_python_entries(llvm_level: ModuleOp, names: set[str], offset: int) -> None:
    """Add an entry for each function of `names` that `llvm_level` defines."""
    defined = {
        f.sym_name.data: f
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and f.body.blocks
    }
    for name in sorted(names & set(defined)):
        n_args = len(defined[name].function_type.inputs.data)
        llvm_level.body.block.add_op(python_entry(name, n_args, offset))
