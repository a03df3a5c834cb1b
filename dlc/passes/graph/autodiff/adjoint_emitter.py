"""The op builder of the `differentiate` pass's adjoint rules.

`Emitter` inserts graph ops (result types inferred by the ops' own `infer`) before an
anchor op. Three peepholes keep adjoint code small, each exact under IEEE arithmetic
and applied only to values the emitter built itself (primal values stay untouched):

- `-(-a) -> a`, `(-a)·b -> -(a·b)`, `(-a)/b -> -(a/b)`: negations of adjoints cancel;
- `broadcast_to(a)·b -> a·b` (any element-wise binary op): a broadcast that the
  consumer would perform anyway is not materialized;
- `embed(a) + embed(b) -> embed(a, b)` when the embedded pieces are disjoint: the
  adjoints of slices of one value are concatenated instead of added.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph import GraphInstruction, LiteralOp, Symbols
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_tensor import int_array
from dlc.dialects.graph_types import TensorType, broadcast_shapes, dtype_is_float, scalar
from dlc.passes.graph.pass_support import tensor_of

OpT = TypeVar("OpT", bound=Operation)

Adj = SSAValue | dict[int, "Adj"] | None
"""An adjoint: a value of the primal value's type, a sparse tuple {index: Adj}, or zero."""

Segment = tuple[int, int, SSAValue]  # (first row, row count, value) of a row embedding


class Emitter:
    """Builds graph ops (types inferred) in `block` before `anchor`, located at `where`."""

    def __init__(self, block: Block, anchor: Operation, where: Operation, symbols: Symbols | None):
        self.block, self.anchor, self.where, self.symbols = block, anchor, where, symbols
        self.created: set[Operation] = set()

    def insert(self, op: Operation) -> Operation:
        self.block.insert_op_before(op, self.anchor)
        copy_loc(self.where, op)
        self.created.add(op)
        return op

    def emit(
        self, cls: type[GraphInstruction], operands: Sequence[SSAValue], **props: Attribute
    ) -> SSAValue:
        types = cls.infer([o.type for o in operands], dict(props), self.symbols)
        op = cls.create(operands=list(operands), result_types=types, properties=dict(props))
        return self.insert(op).results[0]

    def built(self, v: SSAValue, cls: type[OpT]) -> OpT | None:
        """The op of class `cls` that this emitter built and that defines v, else None."""
        owner = v.owner
        return owner if isinstance(owner, cls) and owner in self.created else None

    # -- constants --------------------------------------------------------------------

    def const(self, value: float, dtype: str) -> SSAValue:
        """An inline scalar literal."""
        tree = ("float", float(value)) if dtype_is_float(dtype) else ("int", int(value))
        return self.insert(LiteralOp(LiteralAttr(tree), scalar(dtype), inline=True)).results[0]

    def splat(self, value: float, t: TensorType) -> SSAValue:
        if t.rank == 0:
            return self.const(value, t.dt)
        tree = ("float", float(value)) if dtype_is_float(t.dt) else ("int", int(value))
        return self.insert(LiteralOp(LiteralAttr(tree), t)).results[0]

    def c(self, value: float, like: SSAValue) -> SSAValue:
        return self.const(value, tensor_of(like).dt)

    # -- element-wise -------------------------------------------------------------------

    def unary(self, opcode: str, x: SSAValue) -> SSAValue:
        return self.emit(ge.UNARY_OPS[opcode], [x])

    def binary(self, opcode: str, x: SSAValue, y: SSAValue) -> SSAValue:
        x, y = self.unbroadcast_operand(x, y), self.unbroadcast_operand(y, x)
        return self.emit(ge.BINARY_OPS[opcode], [x, y])

    def unbroadcast_operand(self, v: SSAValue, other: SSAValue) -> SSAValue:
        """broadcast_to(a) op b -> a op b, when b broadcasts a to the same shape anyway."""
        add = self.built(v, ge.BINARY_OPS["add"])
        if add is None or not is_zero_splat(add.operands[1]):
            return v
        inner = add.operands[0]
        shape = broadcast_shapes(tensor_of(inner).dims, tensor_of(other).dims)
        return inner if shape == tensor_of(v).dims else v

    def add(self, x: SSAValue, y: SSAValue) -> SSAValue:
        merged = self.merge_embeddings(x, y)
        return merged if merged is not None else self.binary("add", x, y)

    def sub(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.binary("subtract", x, y)

    def mul(self, x: SSAValue, y: SSAValue) -> SSAValue:
        for a, b in ((x, y), (y, x)):
            negation = self.built(a, ge.UNARY_OPS["negate"])
            if negation is not None:
                return self.neg(self.mul(negation.operands[0], b))  # (-a)·b = -(a·b)
        return self.binary("multiply", x, y)

    def div(self, x: SSAValue, y: SSAValue) -> SSAValue:
        negation = self.built(x, ge.UNARY_OPS["negate"])
        if negation is not None:
            return self.neg(self.div(negation.operands[0], y))  # (-a)/b = -(a/b)
        return self.binary("divide", x, y)

    def neg(self, x: SSAValue) -> SSAValue:
        negation = self.built(x, ge.UNARY_OPS["negate"])
        if negation is not None:
            return negation.operands[0]  # -(-a) = a
        return self.unary("negate", x)

    def select(self, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
        return self.emit(ge.SelectOp, [a, b, mask])

    # -- shapes -------------------------------------------------------------------------

    def reduce_add(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        return self.reduce(x, dims, "add", self.c(0, x))

    def reduce(self, x: SSAValue, dims: Sequence[int], comb: str, init: SSAValue) -> SSAValue:
        if not dims:
            return x
        props = {"combinator": StringAttr(comb), "dims": int_array(sorted(dims))}
        return self.emit(gt.ReduceOp, [x, init], **props)

    def pad(self, x: SSAValue, index: int) -> SSAValue:
        return self.emit(gt.PadShapeOp, [x], index=IntAttr(index))

    def pad_dims(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        """Re-insert reduced dimensions (as 1s) at their original positions."""
        for d in sorted(dims):
            x = self.pad(x, d)
        return x

    def reshape(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        if tensor_of(x).dims == tuple(dims):
            return x
        return self.emit(gt.ShapeCastOp, [x], shape=int_array(dims))

    def transpose(self, x: SSAValue) -> SSAValue:
        return self.emit(gt.TransposeOp, [x])

    def concat(self, parts: Sequence[SSAValue], axis: int) -> SSAValue:
        if len(parts) == 1:
            return parts[0]
        return self.emit(gt.ConcatenateOp, parts, axis=IntAttr(axis))

    def slice_rows(self, x: SSAValue, lo: int, hi: int) -> SSAValue:
        if lo == 0 and hi == tensor_of(x).dims[0] - 1:
            return x
        return self.emit(gt.SliceOp, [x], lower=IntAttr(lo), upper=IntAttr(hi))

    def slice_axis(self, x: SSAValue, axis: int, lo: int, hi: int) -> SSAValue:
        """Indices lo..hi (closed) of dimension `axis`: [P, N·S] -> transpose -> rows."""
        dims = tensor_of(x).dims
        if axis == 0:
            return self.slice_rows(x, lo, hi)
        p, s = math.prod(dims[:axis]), math.prod(dims[axis + 1 :])
        flat = self.transpose(self.reshape(x, [p, dims[axis] * s]))
        part = self.transpose(self.slice_rows(flat, lo * s, (hi + 1) * s - 1))
        return self.reshape(part, [*dims[:axis], hi - lo + 1, *dims[axis + 1 :]])

    def embed_rows(self, x: SSAValue, lo: int, total: int) -> SSAValue:
        """x placed at rows lo.. of a zero tensor with `total` rows."""
        return self.embedding([(lo, tensor_of(x).dims[0], x)], total, tensor_of(x))

    def embedding(self, segments: Sequence[Segment], total: int, t: TensorType) -> SSAValue:
        """Disjoint row segments, sorted by first row, in a zero tensor of `total` rows."""
        parts: list[SSAValue] = []
        row = 0
        for lo, count, value in segments:
            if lo > row:
                parts.append(self.splat(0, t.with_shape([lo - row, *t.dims[1:]])))
            parts.append(value)
            row = lo + count
        if total > row:
            parts.append(self.splat(0, t.with_shape([total - row, *t.dims[1:]])))
        return self.concat(parts, 0)

    def segments(self, v: SSAValue) -> list[Segment]:
        """The non-zero row segments of v (v itself unless it is an embedding we built)."""
        cat = self.built(v, gt.ConcatenateOp)
        if cat is None or cat.axis.data != 0:
            return [(0, tensor_of(v).dims[0], v)]
        out: list[Segment] = []
        row = 0
        for part in cat.operands:
            count = tensor_of(part).dims[0]
            if not is_zero_splat(part):
                out.append((row, count, part))
            row += count
        return out

    def merge_embeddings(self, x: SSAValue, y: SSAValue) -> SSAValue | None:
        """x + y as one embedding when their non-zero rows are disjoint, else None."""
        t = tensor_of(x)
        if t.rank == 0 or t != y.type:
            return None
        segments = sorted(self.segments(x) + self.segments(y), key=lambda s: s[0])
        if any(a[0] + a[1] > b[0] for a, b in zip(segments, segments[1:], strict=False)):
            return None
        return self.embedding(segments, t.dims[0], t)

    def broadcast_to(self, x: SSAValue, t: TensorType) -> SSAValue:
        """x stretched to t (x + 0 of type t; a zero splat costs no memory)."""
        if tensor_of(x).dims == t.dims:
            return x
        return self.binary("add", x, self.splat(0, t))

    def unbroadcast(self, g: SSAValue, t: TensorType) -> SSAValue:
        """Sum g over the axes broadcasting stretched, then reshape to t."""
        dims = tensor_of(g).dims
        if dims == t.dims:
            return g
        if t.rank == 0:
            axes = list(range(len(dims)))
        else:
            axes = [
                i for i, (a, b) in enumerate(zip(dims, t.dims, strict=False)) if b == 1 and a != 1
            ]
        return self.reshape(self.reduce_add(g, axes), t.dims)

    def extract(self, x: SSAValue, keys: Sequence[int]) -> SSAValue:
        keys_attr = ArrayAttr([IntAttr(k) for k in keys])
        return self.emit(gm.ExtractOp, [x], keys=keys_attr)


def is_zero_splat(v: SSAValue) -> bool:
    """Whether v is a literal splat of 0 (inline scalar or tensor)."""
    owner = v.owner
    return isinstance(owner, LiteralOp) and owner.value.data in (("float", 0.0), ("int", 0))
