"""Reverse-mode rules of the `differentiate` pass: one adjoint rule per graph op.

A rule receives the op, the adjoint `d` of its result and the indices of the operands
whose adjoints are wanted, and returns {operand index: adjoint}. Adjoints of tensors
are SSA values of exactly the operand's type (broadcasts are undone by `unbroadcast`);
adjoints of tuples are sparse dicts {element index: adjoint}; `None` means zero.

The rules are DLVM's intent (shared/DLVM.md §4.3) with its bugs fixed: the seed
multiplies every rule, unbroadcasting reduces every stretched axis, `slice`/`extract`
embed into zeros, `power` differentiates the exponent with f·ln x, aggregates pass
gradients through, and min/max/select route the gradient through the chosen values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph import GraphInstruction, LiteralOp, Symbols
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_tensor import int_array
from dlc.dialects.graph_types import TensorType, TupleType, dtype_is_float, scalar

Adj = SSAValue | dict[int, "Adj"] | None


class Emitter:
    """Builds graph ops (types inferred) in `block` before `anchor`, located at `where`."""

    def __init__(self, block: Block, anchor: Operation, where: Operation, symbols: Symbols | None):
        self.block, self.anchor, self.where, self.symbols = block, anchor, where, symbols

    def insert(self, op: Operation) -> Operation:
        self.block.insert_op_before(op, self.anchor)
        copy_loc(self.where, op)
        return op

    def emit(
        self, cls: type[GraphInstruction], operands: Sequence[SSAValue], **props: Attribute
    ) -> SSAValue:
        types = cls.infer([o.type for o in operands], dict(props), self.symbols)
        op = cls.create(operands=list(operands), result_types=types, properties=dict(props))
        return self.insert(op).results[0]

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
        return self.const(value, _tensor(like).dt)

    # -- element-wise -------------------------------------------------------------------

    def unary(self, opcode: str, x: SSAValue) -> SSAValue:
        return self.emit(ge.UNARY_OPS[opcode], [x])

    def binary(self, opcode: str, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.emit(ge.BINARY_OPS[opcode], [x, y])

    def add(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.binary("add", x, y)

    def sub(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.binary("subtract", x, y)

    def mul(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.binary("multiply", x, y)

    def div(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.binary("divide", x, y)

    def neg(self, x: SSAValue) -> SSAValue:
        return self.unary("negate", x)

    def select(self, a: SSAValue, b: SSAValue, mask: SSAValue) -> SSAValue:
        return self.emit(ge.SelectOp, [a, b, mask])

    # -- shapes -------------------------------------------------------------------------

    def reduce_add(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        if not dims:
            return x
        init = self.c(0, x)
        return self.emit(
            gt.ReduceOp, [x, init], combinator=StringAttr("add"), dims=int_array(sorted(dims))
        )

    def pad(self, x: SSAValue, index: int) -> SSAValue:
        return self.emit(gt.PadShapeOp, [x], index=IntAttr(index))

    def pad_dims(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        """Re-insert reduced dimensions (as 1s) at their original positions."""
        for d in sorted(dims):
            x = self.pad(x, d)
        return x

    def reshape(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        if _tensor(x).dims == tuple(dims):
            return x
        return self.emit(gt.ShapeCastOp, [x], shape=int_array(dims))

    def transpose(self, x: SSAValue) -> SSAValue:
        return self.emit(gt.TransposeOp, [x])

    def concat(self, parts: Sequence[SSAValue], axis: int) -> SSAValue:
        if len(parts) == 1:
            return parts[0]
        return self.emit(gt.ConcatenateOp, parts, axis=IntAttr(axis))

    def slice_rows(self, x: SSAValue, lo: int, hi: int) -> SSAValue:
        if lo == 0 and hi == _tensor(x).dims[0] - 1:
            return x
        return self.emit(gt.SliceOp, [x], lower=IntAttr(lo), upper=IntAttr(hi))

    def slice_axis(self, x: SSAValue, axis: int, lo: int, hi: int) -> SSAValue:
        """Indices lo..hi (closed) of dimension `axis`: [P, N·S] -> transpose -> rows."""
        dims = _tensor(x).dims
        if axis == 0:
            return self.slice_rows(x, lo, hi)
        p, s = math.prod(dims[:axis]), math.prod(dims[axis + 1 :])
        flat = self.transpose(self.reshape(x, [p, dims[axis] * s]))
        part = self.transpose(self.slice_rows(flat, lo * s, (hi + 1) * s - 1))
        return self.reshape(part, [*dims[:axis], hi - lo + 1, *dims[axis + 1 :]])

    def embed_rows(self, x: SSAValue, lo: int, total: int) -> SSAValue:
        """x placed at rows lo.. of a zero tensor with `total` rows."""
        t = _tensor(x)
        parts: list[SSAValue] = []
        if lo > 0:
            parts.append(self.splat(0, t.with_shape([lo, *t.dims[1:]])))
        parts.append(x)
        rest = total - lo - t.dims[0]
        if rest > 0:
            parts.append(self.splat(0, t.with_shape([rest, *t.dims[1:]])))
        return self.concat(parts, 0)

    def broadcast_to(self, x: SSAValue, t: TensorType) -> SSAValue:
        """x stretched to t (x + 0 of type t; a zero splat costs no memory)."""
        if _tensor(x).dims == t.dims:
            return x
        return self.add(x, self.splat(0, t))

    def unbroadcast(self, g: SSAValue, t: TensorType) -> SSAValue:
        """Sum g over the axes broadcasting stretched, then reshape to t."""
        dims = _tensor(g).dims
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


def _tensor(v: SSAValue) -> TensorType:
    assert isinstance(v.type, TensorType), v.type
    return v.type


# ---------------------------------------------------------------------------------------
# Element-wise unary ops: d(op x) = D · f'(x), f the op's result
# ---------------------------------------------------------------------------------------

UnaryRule = Callable[[Emitter, SSAValue, SSAValue, SSAValue], SSAValue | None]
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

UNARY_RULES: dict[str, UnaryRule] = {
    "negate": lambda e, d, x, f: e.neg(d),  # -D
    "square": lambda e, d, x, f: e.mul(d, e.add(x, x)),  # D·2x
    "sqrt": lambda e, d, x, f: e.div(d, e.add(f, f)),  # D/(2f)
    "rsqrt": lambda e, d, x, f: e.mul(d, e.div(e.mul(f, e.c(-0.5, x)), x)),  # D·(-f/2x)
    "exp": lambda e, d, x, f: e.mul(d, f),  # D·eˣ
    "log": lambda e, d, x, f: e.div(d, x),  # D/x
    "sin": lambda e, d, x, f: e.mul(d, e.unary("cos", x)),  # D·cos x
    "cos": lambda e, d, x, f: e.mul(d, e.neg(e.unary("sin", x))),  # -D·sin x
    "tan": lambda e, d, x, f: e.mul(d, e.add(e.mul(f, f), e.c(1, x))),  # D·(1+tan²x)
    "sinh": lambda e, d, x, f: e.mul(d, e.unary("cosh", x)),  # D·cosh x
    "cosh": lambda e, d, x, f: e.mul(d, e.unary("sinh", x)),  # D·sinh x
    "tanh": lambda e, d, x, f: e.mul(d, e.sub(e.c(1, x), e.mul(f, f))),  # D·(1-f²)
    "asin": lambda e, d, x, f: e.div(d, e.unary("sqrt", e.sub(e.c(1, x), e.mul(x, x)))),
    "acos": lambda e, d, x, f: e.neg(e.div(d, e.unary("sqrt", e.sub(e.c(1, x), e.mul(x, x))))),
    "atan": lambda e, d, x, f: e.div(d, e.add(e.mul(x, x), e.c(1, x))),  # D/(1+x²)
    "erf": lambda e, d, x, f: e.mul(
        d, e.mul(e.unary("exp", e.neg(e.mul(x, x))), e.c(TWO_OVER_SQRT_PI, x))
    ),
    "erfc": lambda e, d, x, f: e.mul(
        d, e.mul(e.unary("exp", e.neg(e.mul(x, x))), e.c(-TWO_OVER_SQRT_PI, x))
    ),
    "lgamma": lambda e, d, x, f: e.mul(d, e.unary("digamma", x)),  # D·ψ(x)
    # piecewise constant: the derivative is 0 wherever it exists
    "sign": lambda e, d, x, f: None,
    "round": lambda e, d, x, f: None,
    "rint": lambda e, d, x, f: None,
    "ceil": lambda e, d, x, f: None,
    "floor": lambda e, d, x, f: None,
}


# ---------------------------------------------------------------------------------------
# Per-op rules
# ---------------------------------------------------------------------------------------

Rule = Callable[[Emitter, Any, Any, set[int]], dict[int, Adj]]


def unary_rule(e: Emitter, op: ge.UnaryOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    return {0: UNARY_RULES[op.OPCODE](e, d, op.operand, op.result)}


def binary_rule(e: Emitter, op: ge.BinaryOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    x, y, f = op.lhs, op.rhs, op.result
    gx: SSAValue | None = None
    gy: SSAValue | None = None
    match op.OPCODE:
        case "add":
            gx, gy = d, d
        case "subtract":
            gx, gy = d, (e.neg(d) if 1 in want else None)
        case "multiply":
            gx = e.mul(d, y) if 0 in want else None  # D·y
            gy = e.mul(d, x) if 1 in want else None  # D·x
        case "divide":
            gx = e.div(d, y) if 0 in want else None  # D/y
            gy = e.neg(e.div(e.mul(d, f), y)) if 1 in want else None  # -D·f/y
        case "power":
            if 0 in want:  # D·y·x^(y-1)
                gx = e.mul(d, e.mul(y, e.binary("power", x, e.sub(y, e.c(1, y)))))
            if 1 in want:  # D·f·ln x
                gy = e.mul(d, e.mul(f, e.unary("log", x)))
        case "max" | "min":
            mask = e.binary("greaterThanOrEqual" if op.OPCODE == "max" else "lessThanOrEqual", x, y)
            gx = e.select(d, e.c(0, d), mask) if 0 in want else None
            gy = e.select(e.c(0, d), d, mask) if 1 in want else None
    out: dict[int, Adj] = {}
    if gx is not None and 0 in want:
        out[0] = e.unbroadcast(gx, _tensor(x))
    if gy is not None and 1 in want:
        out[1] = e.unbroadcast(gy, _tensor(y))
    return out


def select_rule(e: Emitter, op: ge.SelectOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    out: dict[int, Adj] = {}
    if 0 in want:  # the gradient flows to a where the mask is true
        out[0] = e.unbroadcast(e.select(d, e.c(0, d), op.mask), _tensor(op.lhs))
    if 1 in want:
        out[1] = e.unbroadcast(e.select(e.c(0, d), d, op.mask), _tensor(op.rhs))
    return out


def cast_rule(e: Emitter, op: ge.DataTypeCastOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    source = _tensor(op.operand).dt
    if source == _tensor(d).dt:
        return {0: d}
    return {0: e.emit(ge.DataTypeCastOp, [d], dtype=StringAttr(source))}


def dot_rule(e: Emitter, op: gt.DotOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    x, y = op.lhs, op.rhs
    r = _tensor(x).rank
    out: dict[int, Adj] = {}
    if r == 1:  # x·y is a scalar
        if 0 in want:
            out[0] = e.mul(d, y)
        if 1 in want:
            out[1] = e.mul(d, x)
        return out
    if r == 2:
        if 0 in want:
            out[0] = e.emit(gt.DotOp, [d, e.transpose(y)])  # D·yᵀ
        if 1 in want:
            out[1] = e.emit(gt.DotOp, [e.transpose(x), d])  # xᵀ·D
        return out
    # batched: transpose reverses batch dimensions too, so contract explicitly
    if 0 in want:  # dx[b,m,k] = Σn D[b,m,n]·y[b,k,n]
        out[0] = e.reduce_add(e.mul(e.pad(d, r - 1), e.pad(y, r - 2)), [r])
    if 1 in want:  # dy[b,k,n] = Σm x[b,m,k]·D[b,m,n]
        out[1] = e.reduce_add(e.mul(e.pad(x, r), e.pad(d, r - 1)), [r - 2])
    return out


def reduce_rule(e: Emitter, op: gt.ReduceOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    x, f = op.operand, op.result
    dims = [a.data for a in op.dims.data]
    comb = op.combinator.data if op.combinator is not None else ""
    xt = _tensor(x)
    out: dict[int, Adj] = {}
    dp = e.pad_dims(d, dims)
    if 0 in want:
        match comb:
            case "add":
                out[0] = e.broadcast_to(dp, xt)
            case "multiply":  # D·f/x (x ≠ 0)
                out[0] = e.broadcast_to(e.div(e.mul(dp, e.pad_dims(f, dims)), x), xt)
            case _:  # max/min: D at every position equal to the extremum
                mask = e.binary("equal", x, e.pad_dims(f, dims))
                out[0] = e.select(dp, e.c(0, d), mask)
    if 1 in want:  # add only: init is added once to every result element
        out[1] = e.reduce_add(d, range(_tensor(d).rank))
    return out


def concatenate_rule(
    e: Emitter, op: gt.ConcatenateOp, d: SSAValue, want: set[int]
) -> dict[int, Adj]:
    axis = op.axis.data
    out: dict[int, Adj] = {}
    offset = 0
    for i, part in enumerate(op.inputs):
        n = _tensor(part).dims[axis]
        if i in want:
            out[i] = e.slice_axis(d, axis, offset, offset + n - 1)
        offset += n
    return out


def slice_rule(e: Emitter, op: gt.SliceOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    return {0: e.embed_rows(d, op.lower.data, _tensor(op.operand).dims[0])}


def shape_rule(e: Emitter, op: Operation, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    """transpose, reverse, shapeCast, padShape, squeezeShape: the inverse reshuffle."""
    x = op.operands[0]
    if isinstance(op, gt.TransposeOp):
        return {0: e.transpose(d)}
    if isinstance(op, gt.ReverseOp):
        return {0: e.emit(gt.ReverseOp, [d], dims=op.dims)}
    if isinstance(op, gt.PadShapeOp):
        return {0: e.emit(gt.SqueezeShapeOp, [d], index=op.index)}
    if isinstance(op, gt.SqueezeShapeOp):
        return {0: e.pad(d, op.index.data)}
    return {0: e.reshape(d, _tensor(x).dims)}


def literal_rule(e: Emitter, op: LiteralOp, d: Adj, want: set[int]) -> dict[int, Adj]:
    """Aggregate literals pass each element's part of D to the element's operand."""
    out: dict[int, Adj] = {}
    stack: list[tuple[Any, tuple[int, ...]]] = [(op.value.data, ())]
    while stack:
        node, path = stack.pop()
        if node[0] == "operand" and node[1] in want:
            out[node[1]] = component(e, d, path)
        elif node[0] in ("tuple", "tensor"):
            stack.extend((sub, (*path, k)) for k, sub in enumerate(node[1]))
    return out


def component(e: Emitter, d: Adj, path: Sequence[int]) -> Adj:
    """The part of adjoint d at element path `path`."""
    for i, key in enumerate(path):
        if d is None:
            return None
        if isinstance(d, dict):
            d = d.get(key)
            continue
        return e.extract(d, path[i:])
    return d


def extract_rule(e: Emitter, op: gm.ExtractOp, d: Adj, want: set[int]) -> dict[int, Adj]:
    """Put D at the extracted place of a zero aggregate."""
    keys = [k.data for k in op.keys.data]  # type: ignore[union-attr]
    containers: list[Attribute] = [op.operand.type]
    for k in keys[:-1]:
        t = containers[-1]
        containers.append(t.types[k] if isinstance(t, TupleType) else _element(t))
    for key, t in zip(reversed(keys), reversed(containers), strict=False):
        if isinstance(t, TupleType):
            d = {key: d}
        else:
            assert isinstance(d, SSAValue)
            d = e.embed_rows(e.pad(d, 0), key, _tensor_type(t).dims[0])
    return {0: d}


def _element(t: Attribute) -> TensorType:
    tt = _tensor_type(t)
    return tt.with_shape(tt.dims[1:])


def _tensor_type(t: Attribute) -> TensorType:
    assert isinstance(t, TensorType)
    return t


def extract_is_differentiable(op: gm.ExtractOp) -> bool:
    """Integer keys through tuples and tensors only."""
    if op.key_values:
        return False
    t: Attribute = op.operand.type
    for k in op.keys.data:  # type: ignore[union-attr]
        if not isinstance(k, IntAttr):
            return False
        if isinstance(t, TupleType):
            t = t.types[k.data]
        elif isinstance(t, TensorType) and t.rank >= 1:
            t = t.with_shape(t.dims[1:])
        else:
            return False
    return True


RULES: dict[type[Operation], Rule] = {
    ge.SelectOp: select_rule,
    ge.DataTypeCastOp: cast_rule,
    gt.DotOp: dot_rule,
    gt.ReduceOp: reduce_rule,
    gt.ConcatenateOp: concatenate_rule,
    gt.SliceOp: slice_rule,
    gt.TransposeOp: shape_rule,
    gt.ReverseOp: shape_rule,
    gt.ShapeCastOp: shape_rule,
    gt.PadShapeOp: shape_rule,
    gt.SqueezeShapeOp: shape_rule,
    LiteralOp: literal_rule,
    gm.ExtractOp: extract_rule,
}

DIFFERENTIABLE_BINARY = ("add", "subtract", "multiply", "divide", "power", "min", "max")


def rule_for(op: Operation) -> Rule | None:
    """The adjoint rule of `op` (calls are handled by the pass), None if it has none."""
    if isinstance(op, ge.UnaryOp):
        return unary_rule if op.OPCODE in UNARY_RULES else None
    if isinstance(op, ge.BinaryOp):
        return binary_rule if op.OPCODE in DIFFERENTIABLE_BINARY else None
    if isinstance(op, gm.ExtractOp) and not extract_is_differentiable(op):
        return None
    if isinstance(op, ge.DataTypeCastOp) and not dtype_is_float(_tensor(op.operand).dt):
        return None
    return RULES.get(type(op))


def differentiable_operands(op: Operation) -> set[int] | None:
    """Operand positions gradients flow through; None when `op` has no rule."""
    if isinstance(op, gm.ApplyOp):
        return set(range(len(op.operands)))
    if rule_for(op) is None:
        return None
    if isinstance(op, ge.SelectOp):
        return {0, 1}
    if isinstance(op, gt.ReduceOp):
        if op.combinator is None or op.combinator.data not in ("add", "multiply", "max", "min"):
            return set()
        return {0, 1} if op.combinator.data == "add" else {0}
    if isinstance(op, gm.ExtractOp):
        return {0}
    return set(range(len(op.operands)))
