"""The `loop` dialect: explicit loop nests over buffers (builtin `memref`).

Buffers have static shapes; all index arithmetic is `i64` (no `index` type). Scalar work
uses xDSL's `arith` and `math` dialects. A `loop.func` takes its inputs and then its
outputs as memref block arguments (the caller allocates outputs) and returns nothing.

Example (generic syntax):

    "loop.func"() <{sym_name = "add", function_type = (memref<4xf32>, memref<4xf32>,
                    memref<4xf32>) -> ()}> ({
    ^bb0(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>):
      %c0 = arith.constant 0 : i64
      %c4 = arith.constant 4 : i64
      %c1 = arith.constant 1 : i64
      "loop.for"(%c0, %c4, %c1) ({
      ^bb1(%i: i64):
        %a = "loop.load"(%x, %i) : (memref<4xf32>, i64) -> f32
        %b = "loop.load"(%y, %i) : (memref<4xf32>, i64) -> f32
        %s = arith.addf %a, %b : f32
        "loop.store"(%s, %out, %i) : (f32, memref<4xf32>, i64) -> ()
        "loop.yield"() : () -> ()
      }) : (i64, i64, i64) -> ()
      "loop.return"() : () -> ()
    }) : () -> ()
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AnyFloat,
    FunctionType,
    IntAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.graph_types import NATIVE_DTYPES, dtype_bytes
from dlc.dialects.tensor import scalar_type


def element_bytes(t: Attribute) -> int | None:
    """Bytes of one buffer element of scalar type `t` (f16..f64, i8..i64), else None
    (bool tensors are i8 buffers)."""
    return _ELEMENT_BYTES.get(str(t))


_ELEMENT_BYTES = {str(scalar_type(dt)): dtype_bytes(dt) for dt in NATIVE_DTYPES if dt != "bool"}

ARENA_ALIGN = 64
"""Byte alignment of arena offsets and of every buffer (plan-memory and the lowering)."""
ARENA_OFFSET = "arena_offset"
"""`loop.alloc` attribute set by plan-memory: the buffer's byte offset in the arena."""
ARENA_BYTES = "dlc.arena_bytes"
"""`loop.func` attribute set by plan-memory: the size of the function's arena."""
MIN_LIVE_BYTES = "dlc.min_live_bytes"
"""`loop.func` attribute set by plan-memory: the peak bytes of live intermediates."""


def _memref(value: SSAValue, what: str) -> MemRefType:
    if not isinstance(value.type, MemRefType):
        raise VerifyException(f"{what}: expected a memref, got {value.type}")
    return value.type


def _check_indices(buffer: SSAValue, indices: Sequence[SSAValue], what: str) -> MemRefType:
    mtype = _memref(buffer, what)
    rank = len(mtype.get_shape())
    if len(indices) != rank:
        raise VerifyException(f"{what}: {len(indices)} indices for a rank-{rank} memref {mtype}")
    for index in indices:
        if index.type != i64:
            raise VerifyException(f"{what}: indices must be i64, got {index.type}")
    return mtype


def _element_count(mtype: MemRefType) -> int:
    count = 1
    for dim in mtype.get_shape():
        count *= dim
    return count


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Terminator of a `loop.func` body; outputs are written through the output buffers."""

    name = "loop.return"
    traits = traits_def(IsTerminator())

    def __init__(self) -> None:
        super().__init__()


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `loop.for` and `loop.if` blocks, passing iteration/branch values."""

    name = "loop.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())

    def __init__(self, *values: SSAValue | Operation) -> None:
        super().__init__(operands=[list(values)])


@irdl_op_definition
class FuncOp(IRDLOperation):
    """A function over buffers: block args are the input memrefs then the output memrefs.

    All buffer arguments are assumed not to alias (they become `noalias` pointers).
    """

    name = "loop.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(
        self, name: str, arg_types: Sequence[MemRefType], body: Region | None = None
    ) -> None:
        if body is None:
            body = Region(Block(arg_types=arg_types))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(arg_types), []),
            },
            regions=[body],
        )

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.blocks[0].args)

    def verify_(self) -> None:
        if self.function_type.outputs.data:
            raise VerifyException("loop.func: function_type must have no results")
        inputs = tuple(self.function_type.inputs.data)
        arg_types = tuple(arg.type for arg in self.body.blocks[0].args)
        if inputs != arg_types:
            raise VerifyException("loop.func: block argument types differ from function_type")
        for t in inputs:
            if not isinstance(t, MemRefType):
                raise VerifyException(f"loop.func: arguments must be memrefs, got {t}")
        if len(self.body.blocks) == 1 and not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException("loop.func: body must end with loop.return")
        for block in self.body.blocks:
            if not isinstance(block.last_op, ReturnOp | BrOp | CondBrOp):
                raise VerifyException(
                    "loop.func: every block must end with loop.return, loop.br or loop.cond_br"
                )
        for block in list(self.body.blocks)[1:]:
            if block.args:
                raise VerifyException("loop.func: only the entry block has arguments")


@irdl_op_definition
class ForOp(IRDLOperation):
    """`for (iv = lb; iv < ub; iv += step)` with loop-carried values (iter_args).

    The body block has args (iv: i64, *iters) and ends with `loop.yield(*next_iters)`;
    the results are the final iter values. `parallel` marks independent iterations.
    """

    name = "loop.for"
    lb = operand_def(IntegerType)
    ub = operand_def(IntegerType)
    step = operand_def(IntegerType)
    iter_inits = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")
    parallel = opt_prop_def(UnitAttr)

    def __init__(
        self,
        lb: SSAValue | Operation,
        ub: SSAValue | Operation,
        step: SSAValue | Operation,
        iter_inits: Sequence[SSAValue | Operation] = (),
        body: Region | Block | None = None,
        *,
        parallel: bool = False,
    ) -> None:
        init_types = [SSAValue.get(v).type for v in iter_inits]
        if body is None:
            body = Block(arg_types=[i64, *init_types])
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[lb, ub, step, list(iter_inits)],
            result_types=[init_types],
            regions=[body],
            properties={"parallel": UnitAttr()} if parallel else {},
        )

    @property
    def iv(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def iter_args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[1:])

    def verify_(self) -> None:
        for name, value in (("lb", self.lb), ("ub", self.ub), ("step", self.step)):
            if value.type != i64:
                raise VerifyException(f"loop.for: {name} must be i64, got {value.type}")
        init_types = [v.type for v in self.iter_inits]
        arg_types = [a.type for a in self.body.block.args]
        if arg_types != [i64, *init_types]:
            raise VerifyException(
                "loop.for: body block args must be (i64, *iter_init types), got "
                f"({', '.join(str(t) for t in arg_types)})"
            )
        if [r.type for r in self.res] != init_types:
            raise VerifyException("loop.for: result types must equal iter_init types")
        _check_yield(self.body, init_types, "loop.for")


def _check_yield(region: Region, types: Sequence[Attribute], what: str) -> None:
    last = region.block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f"{what}: block must end with loop.yield")
    got = [v.type for v in last.values]
    if got != list(types):
        raise VerifyException(
            f"{what}: loop.yield types ({', '.join(str(t) for t in got)}) differ from "
            f"expected ({', '.join(str(t) for t in types)})"
        )


@irdl_op_definition
class IfOp(IRDLOperation):
    """`if cond { then } else { else }`; both regions yield the results."""

    name = "loop.if"
    cond = operand_def(i1)
    res = var_result_def()
    then_region = region_def("single_block")
    else_region = region_def()

    def __init__(
        self,
        cond: SSAValue | Operation,
        result_types: Sequence[Attribute],
        then_block: Block | None = None,
        else_block: Block | None = None,
    ) -> None:
        then_region = Region(then_block if then_block is not None else Block())
        if else_block is None and result_types:
            else_block = Block()
        else_region = Region(else_block) if else_block is not None else Region()
        super().__init__(
            operands=[cond], result_types=[list(result_types)], regions=[then_region, else_region]
        )

    def verify_(self) -> None:
        types = [r.type for r in self.res]
        _check_yield(self.then_region, types, "loop.if")
        if not self.else_region.blocks:
            if types:
                raise VerifyException("loop.if: an else region is required when there are results")
            return
        if len(self.else_region.blocks) != 1:
            raise VerifyException("loop.if: else region must have one block")
        _check_yield(self.else_region, types, "loop.if")


@irdl_op_definition
class LoadOp(IRDLOperation):
    """`buffer[indices]` (row-major, i64 indices) -> element scalar."""

    name = "loop.load"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(i64)
    res = result_def()

    def __init__(self, buffer: SSAValue | Operation, indices: Sequence[SSAValue | Operation]):
        mtype = SSAValue.get(buffer).type
        assert isinstance(mtype, MemRefType)
        super().__init__(operands=[buffer, list(indices)], result_types=[mtype.element_type])

    def verify_(self) -> None:
        mtype = _check_indices(self.buffer, self.indices, "loop.load")
        if self.res.type != mtype.element_type:
            raise VerifyException(
                f"loop.load: result type {self.res.type} differs from element type "
                f"{mtype.element_type}"
            )


@irdl_op_definition
class StoreOp(IRDLOperation):
    """`buffer[indices] = value`."""

    name = "loop.store"
    value = operand_def()
    buffer = operand_def(MemRefType)
    indices = var_operand_def(i64)

    def __init__(
        self,
        value: SSAValue | Operation,
        buffer: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
    ) -> None:
        super().__init__(operands=[value, buffer, list(indices)])

    def verify_(self) -> None:
        mtype = _check_indices(self.buffer, self.indices, "loop.store")
        if self.value.type != mtype.element_type:
            raise VerifyException(
                f"loop.store: value type {self.value.type} differs from element type "
                f"{mtype.element_type}"
            )


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A fresh intermediate buffer (aligned to `align` bytes); freed by `loop.dealloc`."""

    name = "loop.alloc"
    res = result_def(MemRefType)
    align = prop_def(IntAttr, default_value=IntAttr(64))

    def __init__(self, mtype: MemRefType, align: int = 64) -> None:
        super().__init__(result_types=[mtype], properties={"align": IntAttr(align)})


@irdl_op_definition
class DeallocOp(IRDLOperation):
    """Frees a buffer made by `loop.alloc`."""

    name = "loop.dealloc"
    buffer = operand_def(MemRefType)

    def __init__(self, buffer: SSAValue | Operation) -> None:
        super().__init__(operands=[buffer])


@irdl_op_definition
class CopyOp(IRDLOperation):
    """Flat byte copy `source -> dest` (same element type and element count)."""

    name = "loop.copy"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)

    def __init__(self, source: SSAValue | Operation, dest: SSAValue | Operation) -> None:
        super().__init__(operands=[source, dest])

    def verify_(self) -> None:
        src, dst = _memref(self.source, "loop.copy"), _memref(self.dest, "loop.copy")
        if src.element_type != dst.element_type or _element_count(src) != _element_count(dst):
            raise VerifyException(f"loop.copy: {src} and {dst} differ in element type or count")


@irdl_op_definition
class CallOp(IRDLOperation):
    """Calls another `loop.func` with buffers (inputs then outputs)."""

    name = "loop.call"
    callee = prop_def(StringAttr)
    buffers = var_operand_def(MemRefType)

    def __init__(self, callee: str, buffers: Sequence[SSAValue | Operation]) -> None:
        super().__init__(operands=[list(buffers)], properties={"callee": StringAttr(callee)})


@irdl_op_definition
class BrOp(IRDLOperation):
    """`loop.br ^dest`: unconditional jump between blocks of a multi-block `loop.func`.

    Blocks other than the entry have no arguments: values that cross blocks live in
    buffers allocated in the entry block (the branch copies into them beforehand)."""

    name = "loop.br"
    dest = successor_def()
    traits = traits_def(IsTerminator())

    def __init__(self, dest: Block) -> None:
        super().__init__(successors=[dest])


@irdl_op_definition
class CondBrOp(IRDLOperation):
    """`loop.cond_br %c, ^then, ^else` (`%c: i1`), see `loop.br`."""

    name = "loop.cond_br"
    cond = operand_def(IntegerType(1))
    then_block = successor_def()
    else_block = successor_def()
    traits = traits_def(IsTerminator())

    def __init__(self, cond: SSAValue | Operation, then_block: Block, else_block: Block) -> None:
        super().__init__(operands=[cond], successors=[then_block, else_block])


@irdl_op_definition
class ExternCallOp(IRDLOperation):
    """`loop.extern_call @f(%a, ...)`: a C call of an external symbol, scalars by value
    (`[extern]` graph functions; the result, if any, is a scalar returned by value)."""

    name = "loop.extern_call"
    callee = prop_def(StringAttr)
    args = var_operand_def()
    res = var_result_def()

    def __init__(
        self, callee: str, args: Sequence[SSAValue | Operation], result_types: Sequence[Attribute]
    ) -> None:
        super().__init__(
            operands=[list(args)],
            result_types=[list(result_types)],
            properties={"callee": StringAttr(callee)},
        )

    def verify_(self) -> None:
        if len(self.res) > 1:
            raise VerifyException("loop.extern_call: at most one result")


@irdl_op_definition
class TrapOp(IRDLOperation):
    """`loop.trap`: set the module's status word to this trap's message and return from
    the function (callers return too after each `loop.call`); Python raises TrapError."""

    name = "loop.trap"
    message = prop_def(StringAttr)

    def __init__(self, message: str) -> None:
        super().__init__(properties={"message": StringAttr(message)})


@irdl_op_definition
class RemFOp(IRDLOperation):
    """Float remainder with the sign of the dividend (C `fmod`); xDSL's arith has no remf."""

    name = "loop.remf"
    lhs = operand_def(AnyFloat)
    rhs = operand_def(AnyFloat)
    res = result_def(AnyFloat)

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation) -> None:
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])

    def verify_(self) -> None:
        if not self.lhs.type == self.rhs.type == self.res.type:
            raise VerifyException("loop.remf: operand and result types must be equal")


@irdl_op_definition
class ErfcOp(IRDLOperation):
    """Complementary error function `1 - erf(x)` computed accurately (libm `erfc`)."""

    name = "loop.erfc"
    operand = operand_def(AnyFloat)
    res = result_def(AnyFloat)

    def __init__(self, operand: SSAValue | Operation) -> None:
        super().__init__(operands=[operand], result_types=[SSAValue.get(operand).type])

    def verify_(self) -> None:
        if self.operand.type != self.res.type:
            raise VerifyException("loop.erfc: operand and result types must be equal")


def _memory_ops() -> list[type[IRDLOperation]]:
    from dlc.dialects.loop_memory import MEMORY_OPS

    return MEMORY_OPS


Loop = Dialect(
    "loop",
    [
        *_memory_ops(),
        FuncOp,
        ReturnOp,
        ForOp,
        YieldOp,
        IfOp,
        LoadOp,
        StoreOp,
        AllocOp,
        DeallocOp,
        CopyOp,
        CallOp,
        BrOp,
        CondBrOp,
        ExternCallOp,
        TrapOp,
        RemFOp,
        ErfcOp,
    ],
    [],
)
