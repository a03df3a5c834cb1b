"""Python entry wrappers: `_dlc_py_<f>(ctx, ...)` resets the call context, checks the
arguments, calls `f` and returns the status word.

The runtime calls these instead of `f` itself. When NumPy's array layout is the one it
probed (`dlc.dialects.abi.ArrayLayout`) they take the `PyArrayObject*`s and load the
data pointers natively, which is cheaper than asking NumPy for them from Python. For a
function of plain tensor parameters the entry also checks each argument natively
before anything runs, so the runtime's common call does no per-argument work in
Python: the object's type is exactly `numpy.ndarray` (read first: every Python
object has a type, so reading it is safe whatever was passed), its dtype object is the
parameter's, its rank and every extent match, and it is C-contiguous. On a failed check
the entry returns `abi.BAD_ARGUMENTS` without calling, and the runtime takes its
general path (conversions, or an error naming the argument).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dlc.dialects import abi
from dlc.dialects.abi import PY_ENTRY_PREFIX, ArrayLayout, function_symbol
from dlc.lowering.prebuilt import make

PTR = llvm.LLVMPointerType()

Check = tuple[tuple[int, ...], int]
"""What an entry checks of one argument: its shape and the index of its dtype in
`graph_types.NATIVE_DTYPES` (the slot after `ndarray`'s in `abi.PY_TYPES`)."""


class _Entry:
    """The blocks of one entry under construction. Constants and the type table's
    address are made once, at the top of the first block (which dominates every
    other): entries are built for every compiled function, so their op count is
    compile time."""

    def __init__(self, arg_types: Sequence[Attribute]) -> None:
        self.block = Block(arg_types=arg_types)
        self.region = Region(self.block)
        self.bad = Block()
        self.hoisted: list[Operation] = []
        self.constants: dict[tuple[int, Attribute], SSAValue] = {}
        self.table: SSAValue | None = None

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def hoist(self, op: Operation) -> SSAValue:
        """Add the pure `op` after the ops hoisted before it, atop the first block."""
        first = self.region.blocks.first
        assert first is not None
        later = first.ops.first if not self.hoisted else self.hoisted[-1].next_op
        if later is None:
            first.add_op(op)
        else:
            first.insert_op_before(op, later)
        self.hoisted.append(op)
        return op.results[0]

    def const(self, value: int, t: IntegerType = i64) -> SSAValue:
        key = (value, t)
        if key not in self.constants:
            self.constants[key] = self.hoist(make(llvm.ConstantOp, IntegerAttr(value, t), t))
        return self.constants[key]

    def field(self, obj: SSAValue, offset: int, t: Attribute) -> SSAValue:
        """The `t` at byte `offset` of the object `obj` points to."""
        address = self.add(
            make(llvm.GEPOp, obj, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[self.const(offset)])
        )
        return self.add(make(llvm.LoadOp, address, t, alignment=4 if t == i32 else 8))

    def equal(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.add(
            make(llvm.ICmpOp, lhs, rhs, IntegerAttr(llvm.ICmpPredicateFlag("eq").to_int(), 64))
        )

    def require(self, ok: SSAValue) -> None:
        """Go on in a new block if `ok`, else to the bad-arguments exit."""
        good = Block()
        self.add(make(llvm.CondBrOp, ok, good, [], self.bad, []))
        self.region.add_block(good)
        self.block = good

    def type_slot(self, index: int) -> SSAValue:
        """Slot `index` of `abi.PY_TYPES` (through an integer: llvmlite types a global's
        address `[N x i64]*`)."""
        if self.table is None:
            table = self.hoist(make(llvm.AddressOfOp, abi.PY_TYPES, PTR))
            self.table = self.hoist(
                make(llvm.IntToPtrOp, self.hoist(make(llvm.PtrToIntOp, table, i64)))
            )
        slot = self.add(make(llvm.GEPOp, self.table, [index], i64, inbounds=True))
        return self.add(make(llvm.LoadOp, slot, i64, alignment=8))

    def check(self, obj: SSAValue, layout: ArrayLayout, check: Check) -> None:
        """Branch to the bad exit unless `obj` is a C-contiguous ndarray of `check`."""
        shape, dtype_index = check
        self.require(self.equal(self.field(obj, layout.type, i64), self.type_slot(0)))
        same = [self.equal(self.field(obj, layout.descr, i64), self.type_slot(1 + dtype_index))]
        same.append(self.equal(self.field(obj, layout.nd, i32), self.const(len(shape), i32)))
        flags = self.field(obj, layout.flags, i32)
        contiguous = self.add(make(llvm.AndOp, flags, self.const(1, i32)))
        same.append(self.equal(contiguous, self.const(1, i32)))
        for ok in same[1:]:
            same[0] = self.add(make(llvm.AndOp, same[0], ok))
        self.require(same[0])
        if not shape:
            return
        dims = self.add(make(llvm.IntToPtrOp, self.field(obj, layout.dims, i64)))
        extents = []
        for axis, extent in enumerate(shape):
            slot = self.add(make(llvm.GEPOp, dims, [axis], i64, inbounds=True))
            value = self.add(make(llvm.LoadOp, slot, i64, alignment=8))
            extents.append(self.equal(value, self.const(extent)))
        for ok in extents[1:]:
            extents[0] = self.add(make(llvm.AndOp, extents[0], ok))
        self.require(extents[0])


def python_entry(
    name: str,
    n_args: int,
    layout: ArrayLayout | None,
    checks: Sequence[Check] | None = None,
) -> llvm.FuncOp:
    """`_dlc_py_<name>(ctx, ...) -> i64`: reset the ctx, check, call
    `name(ctx, data...)`, return the status word.

    The reset gives every call from Python a clean context whatever the last one left
    (a call interrupted by KeyboardInterrupt never had its status read): status and
    depth 0, the arena empty, and the interrupt flag clear (a signal that arrived
    before this call is Python's to handle). With a `layout`, the arguments are
    `PyArrayObject*`s whose data pointers are loaded natively; without, data pointers.
    `checks` (with a layout) covers the first arguments after ctx, one per argument
    (module docstring). `n_args` counts `name`'s arguments, ctx included."""
    entry = _Entry([PTR] * n_args)
    ctx, *objects = entry.block.args
    for op in _reset(ctx):
        entry.add(op)
    data: list[SSAValue] = list(objects)
    if layout is not None:
        for obj, check in zip(objects, checks or (), strict=False):
            entry.check(obj, layout, check)
        data = [entry.field(obj, layout.data, PTR) for obj in objects]
    entry.add(make(llvm.CallOp, function_symbol(name), ctx, *data))
    entry.add(make(llvm.ReturnOp, entry.add(make(llvm.LoadOp, ctx, i64, alignment=8))))
    entry.region.add_block(entry.bad)
    entry.bad.add_ops([bad := make(llvm.ConstantOp, IntegerAttr(abi.BAD_ARGUMENTS, i64), i64)])
    entry.bad.add_op(make(llvm.ReturnOp, bad.result))
    return llvm.FuncOp(
        PY_ENTRY_PREFIX + name,
        llvm.LLVMFunctionType([PTR] * n_args, i64),
        linkage=llvm.LinkageAttr("external"),
        body=entry.region,
    )


def fast_entry(name: str, n_args: int, layout: ArrayLayout, checks: Sequence[Check]) -> llvm.FuncOp:
    """`_dlc_pyfast_<name>(self, args, nargs) -> PyObject*`: CPython's METH_FASTCALL
    signature, called as `fn(ctx_words, *arguments, result)` (`abi.FAST_ENTRY_PREFIX`).
    The same reset, checks and call as `python_entry`; it returns the result array when
    the status word is 0, else `self`, both as new references (the status word says
    why: > 0 a message, `BAD_ARGUMENTS` refused arguments). `n_args` counts `name`'s
    arguments, ctx included: the objects a call passes."""
    entry = _Entry([PTR, PTR, i64])
    self_obj, args, nargs = entry.block.args
    failed, refused = Block(), Block()
    entry.bad = failed
    entry.require(entry.equal(nargs, entry.const(n_args)))
    objects = []
    for i in range(n_args):
        slot = entry.add(make(llvm.GEPOp, args, [i], PTR, inbounds=True))
        objects.append(entry.add(make(llvm.LoadOp, slot, PTR, alignment=8)))
    words, *arrays = objects
    entry.require(entry.equal(entry.field(words, layout.type, i64), entry.type_slot(0)))
    ctx = entry.field(words, layout.data, PTR)
    for op in _reset(ctx):
        entry.add(op)
    entry.bad = refused
    for obj, check in zip(arrays, checks, strict=False):
        entry.check(obj, layout, check)
    entry.add(
        make(
            llvm.CallOp,
            function_symbol(name),
            ctx,
            *[entry.field(obj, layout.data, PTR) for obj in arrays],
        )
    )
    entry.bad = failed
    entry.require(entry.equal(entry.add(make(llvm.LoadOp, ctx, i64, alignment=8)), entry.const(0)))
    entry.add(make(llvm.ReturnOp, _new_reference(entry, arrays[-1])))
    entry.region.add_block(refused)
    entry.block = refused
    entry.add(make(llvm.StoreOp, entry.const(abi.BAD_ARGUMENTS), ctx, alignment=8))
    entry.add(make(llvm.BrOp, failed))
    entry.region.add_block(failed)
    entry.block = failed
    entry.add(make(llvm.ReturnOp, _new_reference(entry, self_obj)))
    return llvm.FuncOp(
        abi.FAST_ENTRY_PREFIX + name,
        llvm.LLVMFunctionType([PTR, PTR, i64], PTR),
        linkage=llvm.LinkageAttr("external"),
        body=entry.region,
    )


def _new_reference(entry: _Entry, obj: SSAValue) -> SSAValue:
    """`Py_INCREF(obj)` of a mortal object (64-bit CPython with the GIL: the count is
    the object's first word), then `obj`."""
    count = entry.add(make(llvm.LoadOp, obj, i64, alignment=8))
    entry.add(
        make(llvm.StoreOp, entry.add(make(llvm.AddOp, count, entry.const(1))), obj, alignment=8)
    )
    return obj


def _reset(ctx: SSAValue) -> list[Operation]:
    """status = depth = 0; arena top = arena base; *interrupt flag = 0."""
    ops: list[Operation] = []

    def word(index: int) -> SSAValue:
        ops.append(make(llvm.GEPOp, ctx, [index], i64, inbounds=True))
        return ops[-1].results[0]

    zero = make(llvm.ConstantOp, IntegerAttr(0, i64), i64)
    ops.append(zero)
    ops.append(make(llvm.StoreOp, zero.result, ctx, alignment=8))  # CTX_STATUS is word 0
    ops.append(make(llvm.StoreOp, zero.result, word(abi.CTX_DEPTH), alignment=8))
    base = make(llvm.LoadOp, word(abi.CTX_ARENA_BASE), i64, alignment=8)
    ops.append(base)
    ops.append(make(llvm.StoreOp, base.dereferenced_value, word(abi.CTX_ARENA_TOP), alignment=8))
    flag_word = make(llvm.LoadOp, word(abi.CTX_INTERRUPT), i64, alignment=8)
    flag = make(llvm.IntToPtrOp, flag_word.dereferenced_value)
    zero32 = make(llvm.ConstantOp, IntegerAttr(0, i32), i32)
    ops.extend([flag_word, flag, zero32, make(llvm.StoreOp, zero32.result, flag, alignment=4)])
    return ops


def add_python_entries(
    llvm_level: ModuleOp,
    names: dict[str, Sequence[Check] | None],
    layout: ArrayLayout | None,
    n_types: int,
    fast: bool = False,
) -> None:
    """Add an entry for each function of `names` that `llvm_level` defines, checking
    the arguments `names[f]` describes (None: none), and the `abi.PY_TYPES` table of
    `n_types` dtype slots their checks read; with `fast`, also a METH_FASTCALL entry
    (`fast_entry`) for each checked function."""
    defined = {
        f.sym_name.data: f
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and f.body.blocks
    }
    checked = False
    for name in sorted(n for n in names if function_symbol(n) in defined):
        n_args = len(defined[function_symbol(name)].function_type.inputs.data)
        checks = names[name] if layout is not None else None
        checked |= checks is not None
        llvm_level.body.block.add_op(python_entry(name, n_args, layout, checks))
        single = checks is not None and n_args - 1 - len(checks) == 1  # one result array
        if layout is not None and checks is not None and fast and single:
            llvm_level.body.block.add_op(fast_entry(name, n_args, layout, checks))
    if checked:  # common, not internal: LLVM must not fold its loads to the zeros
        size = 1 + n_types
        zeros = DenseIntOrFPElementsAttr.from_list(TensorType(i64, [size]), [0] * size)
        table = llvm.LLVMArrayType(IntAttr(size), i64)
        llvm_level.body.block.add_op(
            make(llvm.GlobalOp, table, abi.PY_TYPES, "common", value=zeros)
        )
