"""The `tensor` dialect: tensors defined element by element (TVM `compute` style).

Values are whole tensors of type `!graph.tensor<...>` (rank 0 = scalar). The core op is
`tensor.compute`: an iteration domain (the result shape), optional reduction axes, and a
scalar body that reads its operands only through `tensor.read` at index expressions.
That keeps every compute fusion-ready: inlining a producer into a consumer replaces a
`tensor.read` of the producer by the producer's body with its index variables bound to
the read's index expressions.

Body conventions: the block arguments are `i64` index variables (output dimensions,
then reduction dimensions); scalars are builtin types (`f32`, `f64`, `i8`..`i64`, `i1`
for bool); arithmetic is xDSL `arith`/`math`; the block ends with `tensor.yield`.

    %y = "tensor.compute"(%x) ({
    ^bb0(%i: i64, %j: i64):
      %v = "tensor.read"(%x, %j, %i) : (!graph.tensor<3x2xf32>, i64, i64) -> f32
      "tensor.yield"(%v) : (f32) -> ()
    }) : (!graph.tensor<3x2xf32>) -> !graph.tensor<2x3xf32>

With a reduction (`reduction = [k]`, `combinator = "add"`), the body yields one element
per reduction point and the result element is `fold(init, elements...)` in increasing
row-major order of the reduction indices; `init` is the `init` operand (a rank-0 tensor)
or the `init_value` property (an `IntegerAttr`/`FloatAttr` of the element type).
Combinators are DLVM binary opcodes (`add`, `multiply`, `min`, `max`, `and`, `or`, ...).

This dialect's mnemonic is `tensor`; dlc never loads xDSL's `tensor` dialect.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.graph_types import NATIVE_DTYPES, TensorType, format_type
from dlc.dialects.schedule import ScheduleAttr

SUPPORTED_DTYPES = NATIVE_DTYPES


def scalar_type(dtype: str) -> Attribute:
    """The builtin scalar type of a data type inside compute bodies (bool -> i1)."""
    if dtype == "f16":
        return Float16Type()
    if dtype == "f32":
        return Float32Type()
    if dtype == "f64":
        return Float64Type()
    if dtype == "bool":
        return i1
    assert dtype in SUPPORTED_DTYPES, f"unsupported data type {dtype}"
    return IntegerType(int(dtype[1:]))


class OpVerifyException(VerifyException):
    """A verifier error that belongs to `op`, nested in the op being verified (dlc's
    located verifier reports it at `op`'s location)."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


def _tensor(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{what}: expected a tensor, got {value.type}")
    return value.type


@irdl_op_definition
class FuncOp(IRDLOperation):
    """`tensor.func`: a function of tensors; results are returned by `tensor.return`.

    Tuple results of the graph level are flattened into several results. The body is a
    CFG: the entry block takes the arguments; other blocks (graph blocks, with tuple
    block arguments flattened) end with `tensor.br`, `tensor.cond_br` or `tensor.return`.
    """

    name = "tensor.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(self, name: str, inputs: Sequence[Attribute], outputs: Sequence[Attribute]):
        block = Block(arg_types=inputs)
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(inputs, outputs),
            },
            regions=[Region(block)],
        )

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return self.body.blocks[0].args

    def verify_(self) -> None:
        ftype = self.function_type
        if tuple(a.type for a in self.args) != tuple(ftype.inputs.data):
            raise VerifyException("tensor.func: block arguments differ from the signature")
        for block in self.body.blocks:
            last = block.last_op
            if not isinstance(last, ReturnOp | BrOp | CondBrOp):
                raise VerifyException(
                    "tensor.func: every block must end with tensor.return, tensor.br or "
                    "tensor.cond_br"
                )
            if isinstance(last, ReturnOp) and tuple(v.type for v in last.values) != tuple(
                ftype.outputs.data
            ):
                raise VerifyException("tensor.func: returned types differ from the signature")
        self._verify_groups()

    def _verify_groups(self) -> None:
        """Fusion groups are runs of consecutive computes and legal (tensor_groups.py)."""
        from dlc.dialects.tensor_groups import fusion_of, group_members, verify_group

        seen: set[int] = set()
        for block in self.body.blocks:
            for op in block.ops:
                fusion = fusion_of(op) if isinstance(op, ComputeOp) else None
                members = group_members(op) if fusion is not None else []  # type: ignore[arg-type]
                if not members:
                    continue
                if fusion[0] in seen:  # type: ignore[index]
                    message = f"the members of group {fusion[0]} must be consecutive"  # type: ignore[index]
                    raise OpVerifyException(op, f"tensor.compute: schedule: {message}")
                seen.add(fusion[0])  # type: ignore[index]
                failure = verify_group(members)
                if failure is not None:
                    raise OpVerifyException(failure[0], f"tensor.compute: schedule: {failure[1]}")


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """`tensor.return %a, %b`: ends a `tensor.func`."""

    name = "tensor.return"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(FuncOp))

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


def _check_edge(what: str, dest: Block, args: Sequence[SSAValue]) -> None:
    if tuple(a.type for a in args) != tuple(a.type for a in dest.args):
        raise VerifyException(f"{what}: arguments differ from the destination block arguments")


@irdl_op_definition
class BrOp(IRDLOperation):
    """`tensor.br ^dest(%a, ...)`: jump to another block of the function."""

    name = "tensor.br"
    args = var_operand_def(TensorType)
    dest = successor_def()
    traits = traits_def(IsTerminator())

    def __init__(self, dest: Block, args: Sequence[SSAValue]):
        super().__init__(operands=[list(args)], successors=[dest])

    def verify_(self) -> None:
        _check_edge("tensor.br", self.dest, self.args)


@irdl_op_definition
class CondBrOp(IRDLOperation):
    """`tensor.cond_br %c, ^then(...), ^else(...)`; `%c` is a bool scalar tensor."""

    name = "tensor.cond_br"
    cond = operand_def(TensorType)
    then_args = var_operand_def(TensorType)
    else_args = var_operand_def(TensorType)
    then_block = successor_def()
    else_block = successor_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(IsTerminator())

    def __init__(
        self,
        cond: SSAValue,
        then_block: Block,
        then_args: Sequence[SSAValue],
        else_block: Block,
        else_args: Sequence[SSAValue],
    ):
        super().__init__(
            operands=[cond, list(then_args), list(else_args)],
            successors=[then_block, else_block],
        )

    def verify_(self) -> None:
        if self.cond.type != TensorType((), "bool"):
            raise VerifyException("tensor.cond_br: the condition must be a bool scalar")
        _check_edge("tensor.cond_br", self.then_block, self.then_args)
        _check_edge("tensor.cond_br", self.else_block, self.else_args)


@irdl_op_definition
class CallOp(IRDLOperation):
    """`tensor.call @f(%a, ...)`: call a function of the module (tuple results and
    arguments flattened). With `extern`, `@f` is a C symbol of the process taking and
    returning scalars by value."""

    name = "tensor.call"
    callee = prop_def(StringAttr)
    args = var_operand_def(TensorType)
    res = var_result_def(TensorType)
    extern = opt_prop_def(UnitAttr)

    def __init__(
        self,
        callee: str,
        args: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        *,
        extern: bool = False,
    ):
        props: dict[str, Attribute] = {"callee": StringAttr(callee)}
        if extern:
            props["extern"] = UnitAttr()
        super().__init__(operands=[list(args)], result_types=[list(result_types)], properties=props)


@irdl_op_definition
class TrapOp(IRDLOperation):
    """`tensor.trap`: stop the program; the call from Python raises `TrapError`."""

    name = "tensor.trap"

    def __init__(self) -> None:
        super().__init__()


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """`tensor.constant`: a literal tensor with dense data (bool data as i1)."""

    name = "tensor.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, result_type: TensorType, values: Sequence[int | float | bool]):
        from xdsl.dialects.builtin import TensorType as BuiltinTensorType

        data_type = BuiltinTensorType(scalar_type(result_type.dt), result_type.dims)
        if result_type.dt == "bool" or result_type.dt.startswith("i"):
            values = [int(v) for v in values]
        else:
            values = [float(v) for v in values]
        dense = DenseIntOrFPElementsAttr.from_list(data_type, values)  # type: ignore[arg-type]
        super().__init__(result_types=[result_type], properties={"value": dense})

    def verify_(self) -> None:
        t = _tensor(self.result, "tensor.constant")
        if tuple(self.value.get_shape()) != t.dims:
            raise VerifyException(
                f"tensor.constant: data shape {self.value.get_shape()} differs from {format_type(t)}"
            )

    @property
    def values(self) -> tuple[int | float, ...]:
        return self.value.get_values()  # type: ignore[return-value]


@irdl_op_definition
class ComputeOp(IRDLOperation):
    """`tensor.compute`: result[i...] = body(i...) or fold over the reduction axes.

    Operands: `inputs` (tensors the body reads) and an optional rank-0 `init`.
    Properties: `reduction` (extents of the reduction axes), `combinator` (a DLVM
    binary opcode), `init_value` (a constant init when there is no `init` operand),
    `schedule` (how the nest runs, a `#schedule.nest`; none: the plain nest, output
    loops then reduction loops).
    """

    name = "tensor.compute"
    inputs = var_operand_def(TensorType)
    init = opt_operand_def(TensorType)
    reduction = opt_prop_def(ArrayAttr[IntAttr])
    combinator = opt_prop_def(StringAttr)
    init_value = opt_prop_def(Attribute)
    schedule = opt_prop_def(ScheduleAttr)
    result = result_def(TensorType)
    body = region_def("single_block")
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_type: TensorType,
        body: Block,
        *,
        reduction: Sequence[int] = (),
        combinator: str | None = None,
        init: SSAValue | None = None,
        init_value: Attribute | None = None,
    ):
        props: dict[str, Attribute | None] = {}
        if combinator is not None:
            props["reduction"] = ArrayAttr([IntAttr(n) for n in reduction])
            props["combinator"] = StringAttr(combinator)
            props["init_value"] = init_value
        super().__init__(
            operands=[list(inputs), [init] if init is not None else []],
            result_types=[result_type],
            properties=props,
            regions=[Region(body)],
        )

    @property
    def reduction_extents(self) -> tuple[int, ...]:
        return tuple(n.data for n in self.reduction.data) if self.reduction else ()

    @property
    def domain(self) -> tuple[int, ...]:
        return _tensor(self.result, "tensor.compute").dims

    def verify_(self) -> None:
        out = _tensor(self.result, "tensor.compute")
        block = self.body.block
        want = out.rank + len(self.reduction_extents)
        if len(block.args) != want or any(a.type != i64 for a in block.args):
            raise VerifyException(f"tensor.compute: body needs {want} i64 index arguments")
        yield_op = block.last_op
        if not isinstance(yield_op, YieldOp) or yield_op.value.type != scalar_type(out.dt):
            raise VerifyException(
                f"tensor.compute: body must yield one {scalar_type(out.dt)} for {format_type(out)}"
            )
        self._verify_reduction(out)
        if self.schedule is not None:
            why = self.schedule.check(self.domain, self.reduction_extents)
            if why is not None:
                raise VerifyException(f"tensor.compute: schedule: {why}")

    def _verify_reduction(self, out: TensorType) -> None:
        has_comb = self.combinator is not None
        if has_comb != (self.reduction is not None):
            raise VerifyException("tensor.compute: reduction and combinator go together")
        if not has_comb:
            if self.init is not None or self.init_value is not None:
                raise VerifyException("tensor.compute: init without a reduction")
            return
        if (self.init is None) == (self.init_value is None):
            raise VerifyException("tensor.compute: a reduction needs exactly one init")
        if self.init is not None and self.init.type != TensorType((), out.dt):
            raise VerifyException(f"tensor.compute: init must be a {out.dt} scalar")
        if self.init_value is not None and not isinstance(self.init_value, IntegerAttr | FloatAttr):
            raise VerifyException(
                "tensor.compute: init_value must be an integer or float attribute"
            )


@irdl_op_definition
class ReadOp(IRDLOperation):
    """`tensor.read %t[%i, %j]`: one element of an input of the enclosing compute."""

    name = "tensor.read"
    tensor = operand_def(TensorType)
    indices = var_operand_def(i64)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, tensor: SSAValue, indices: Sequence[SSAValue]):
        t = _tensor(tensor, "tensor.read")
        super().__init__(operands=[tensor, list(indices)], result_types=[scalar_type(t.dt)])

    def verify_(self) -> None:
        t = _tensor(self.tensor, "tensor.read")
        if len(self.indices) != t.rank:
            raise VerifyException(f"tensor.read: {len(self.indices)} indices for {format_type(t)}")
        if self.result.type != scalar_type(t.dt):
            raise VerifyException(f"tensor.read: result must be {scalar_type(t.dt)}")
        compute = self.parent_op()
        while compute is not None and not isinstance(compute, ComputeOp):
            compute = compute.parent_op()
        if compute is None or self.tensor not in compute.inputs:
            raise VerifyException(
                "tensor.read: the tensor must be an input of the enclosing compute"
            )


@irdl_op_definition
class ScanOp(IRDLOperation):
    """`tensor.scan(%x) {dim, combinator}`: inclusive left scan of `x` along `dim`,
    `out[..0..] = x[..0..]`, `out[..k..] = combinator(out[..k-1..], x[..k..])` (no
    identity needed, so any combinator works, notably function combinators `@f`).
    The result has the type of `x`. Combinator calls happen in increasing k per line,
    lines in C order of the other indices (the reference interpreter's order)."""

    name = "tensor.scan"
    input = operand_def(TensorType)
    dim = prop_def(IntAttr)
    combinator = prop_def(StringAttr)
    result = result_def(TensorType)

    def __init__(self, input: SSAValue, dim: int, combinator: str):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={"dim": IntAttr(dim), "combinator": StringAttr(combinator)},
        )

    def verify_(self) -> None:
        t = _tensor(self.input, self.name)
        if self.result.type != t:
            raise VerifyException(f"{self.name}: the result must have the type of the input")
        if not 0 <= self.dim.data < t.rank:
            raise VerifyException(
                f"{self.name}: dim {self.dim.data} out of range for rank {t.rank}"
            )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`tensor.yield %v`: the element value of a compute body."""

    name = "tensor.yield"
    value = operand_def()
    traits = traits_def(IsTerminator(), HasParent(ComputeOp))

    def __init__(self, value: SSAValue | Operation):
        super().__init__(operands=[value])


def _all_ops() -> list[type[IRDLOperation]]:
    from dlc.dialects.tensor_memory import MEMORY_OPS

    core = [FuncOp, ReturnOp, BrOp, CondBrOp, CallOp, TrapOp, ConstantOp, ComputeOp, ReadOp]
    return [*core, ScanOp, YieldOp, *MEMORY_OPS]


Tensor = Dialect("tensor", _all_ops(), [])

__all__ = [
    "BrOp",
    "CallOp",
    "CondBrOp",
    "ComputeOp",
    "ConstantOp",
    "FuncOp",
    "ReadOp",
    "ReturnOp",
    "SUPPORTED_DTYPES",
    "ScanOp",
    "Tensor",
    "TrapOp",
    "YieldOp",
    "scalar_type",
]
