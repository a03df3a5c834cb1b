"""Building `tensor.compute` ops: index variables, operand reads, broadcasting.

A lowered graph value is a `Lowered`: a tensor-level SSA value, a `Splat` (a constant
known at compile time, read as an `arith.constant` without touching memory), or a
Python list of `Lowered` for a tuple (tuples exist only at compile time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, i1, i64
from xdsl.ir import Attribute, Block, SSAValue

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_types import bf16_bits
from dlc.lowering.scalar_ops import ScalarBuilder, wrap_int


@dataclass(frozen=True)
class Splat:
    """A tensor of type `type` whose every element is `value`."""

    value: int | float | bool
    type: TensorType


Lowered: TypeAlias = "SSAValue | Splat | list[Lowered]"


def lowered_type(value: Lowered) -> TensorType:
    if isinstance(value, Splat):
        return value.type
    assert isinstance(value, SSAValue) and isinstance(value.type, TensorType)
    return value.type


def scalar_attr(value: int | float | bool, dtype: str) -> Attribute:
    """An `IntegerAttr`/`FloatAttr` of a DLVM data type (bool as i1)."""
    t = tensor.scalar_type(dtype)
    if not isinstance(t, IntegerType):
        return FloatAttr(float(value), t)
    if dtype == "bf16":  # its bits (`bf16_bits`)
        return IntegerAttr(bf16_bits(float(value)), t)
    return IntegerAttr(wrap_int(int(value), t.width.data), t)


class BodyBuilder(ScalarBuilder):
    """Builds one compute body; records the tensors it reads as the compute's inputs."""

    def __init__(self, block: Block):
        super().__init__(Builder(InsertPoint.at_end(block)))
        self.inputs: list[SSAValue] = []
        self._indices: dict[int, SSAValue] = {}

    def index(self, value: int) -> SSAValue:
        if value not in self._indices:
            self._indices[value] = super().index(value)
        return self._indices[value]

    def read(self, value: Lowered, indices: Sequence[SSAValue]) -> SSAValue:
        """The element of `value` at `indices` (a splat reads no memory)."""
        if isinstance(value, Splat):
            return self.const(value.value, value.type.dt)
        assert isinstance(value, SSAValue), "tuples have no elements to read"
        if value not in self.inputs:
            self.inputs.append(value)
        return self.emit(tensor.ReadOp(value, list(indices)))

    def read_broadcast(self, value: Lowered, out_indices: Sequence[SSAValue]) -> SSAValue:
        """DLVM broadcasting: a size-1 dimension reads index 0, a scalar reads no index."""
        dims = lowered_type(value).dims
        indices = [self.index(0) if n == 1 else out_indices[d] for d, n in enumerate(dims)]
        return self.read(value, indices)

    def add_i(self, a: SSAValue, b: int) -> SSAValue:
        return a if b == 0 else self.emit(arith.AddiOp(a, self.index(b)))

    def sub_i(self, a: int, b: SSAValue) -> SSAValue:
        return self.emit(arith.SubiOp(self.index(a), b))

    def all_equal(self, indices: Sequence[SSAValue], values: Sequence[int]) -> SSAValue:
        """i1: indices == values element-wise (true for empty lists)."""
        cond = self.emit(arith.ConstantOp(IntegerAttr(1, i1)))
        for index, value in zip(indices, values, strict=True):
            eq = self.cmpi("eq", index, self.index(value))
            cond = self.emit(arith.AndIOp(cond, eq))
        return cond


BodyFn = Callable[[BodyBuilder, Sequence[SSAValue], Sequence[SSAValue]], SSAValue]


def build_compute(
    builder: Builder,
    result_type: TensorType,
    body_fn: BodyFn,
    *,
    reduction: Sequence[int] = (),
    combinator: str | None = None,
    init: Lowered | None = None,
) -> tensor.ComputeOp:
    """Insert a `tensor.compute` whose body is `body_fn(body, out_indices, red_indices)`."""
    block = Block(arg_types=[i64] * (result_type.rank + len(reduction)))
    body = BodyBuilder(block)
    value = body_fn(body, block.args[: result_type.rank], block.args[result_type.rank :])
    body.builder.insert(tensor.YieldOp(value))
    init_operand, init_value = None, None
    if isinstance(init, Splat):
        init_value = scalar_attr(init.value, result_type.dt)
    elif init is not None:
        assert isinstance(init, SSAValue)
        init_operand = init
    op = tensor.ComputeOp(
        body.inputs,
        result_type,
        block,
        reduction=reduction,
        combinator=combinator,
        init=init_operand,
        init_value=init_value,
    )
    builder.insert(op)
    return op


def tag_is(b: Builder, tag: Lowered, stored: int) -> SSAValue:
    """A `bool` scalar: whether the i64 scalar `tag` (an enum's) is `stored`."""
    return build_compute(
        b, TensorType((), "bool"), lambda s, i, _: s.cmpi("eq", s.read(tag, []), s.index(stored))
    ).result
