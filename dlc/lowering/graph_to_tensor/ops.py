"""Per-op rules of `lower-graph-to-tensor`: one `tensor.compute` per graph op.

Each rule takes the insertion builder, the graph op and its lowered operands and
returns the lowered result. Bodies read operands only through `tensor.read` at index
expressions (see `compute_builder.py`), so later fusion can inline producers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph
from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph_types import TensorType
from dlc.lowering.graph_to_tensor.compute_builder import (
    BodyBuilder,
    Lowered,
    Splat,
    build_compute,
    lowered_type,
)

Rule = Callable[[Builder, Operation, list[Lowered]], Lowered]


class UnsupportedOp(Exception):
    """The op (or this use of it) has no lowering; the message names it."""


def _result_type(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t


def lower_unary(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, ge.UnaryOp)
    dt = _result_type(op).dt
    return build_compute(
        b, _result_type(op), lambda s, i, _: s.unary(op.OPCODE, dt, s.read_broadcast(args[0], i))
    ).result


def lower_binary(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, ge.BinaryOp)
    dt = lowered_type(args[0]).dt

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        return s.binary(op.OPCODE, dt, s.read_broadcast(args[0], i), s.read_broadcast(args[1], i))

    return build_compute(b, _result_type(op), body).result


def lower_not(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    return build_compute(
        b, _result_type(op), lambda s, i, _: s.not_(s.read_broadcast(args[0], i))
    ).result


def lower_select(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        lhs, rhs, mask = (s.read_broadcast(a, i) for a in args)
        return s.select(mask, lhs, rhs)

    return build_compute(b, _result_type(op), body).result


def lower_cast(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    source, target = lowered_type(args[0]).dt, _result_type(op).dt
    return build_compute(
        b, _result_type(op), lambda s, i, _: s.cast(s.read_broadcast(args[0], i), source, target)
    ).result


def lower_dot(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """C[..., m, n] = sum_k A[..., m, k] * B[..., k, n]; vectors: sum_k a[k] * b[k]."""
    lhs, rhs = args
    lt, out = lowered_type(lhs), _result_type(op)
    boolean = out.dt == "bool"

    def body(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        k = r[0]
        if lt.rank == 1:
            a, c = s.read(lhs, [k]), s.read(rhs, [k])
        else:
            a = s.read(lhs, [*i[:-1], k])
            c = s.read(rhs, [*i[:-2], k, i[-1]])
        return s.binary("and" if boolean else "multiply", out.dt, a, c)

    init = Splat(False if boolean else 0, TensorType((), out.dt))
    return build_compute(
        b, out, body, reduction=[lt.dims[-1]], combinator="or" if boolean else "add", init=init
    ).result


def lower_transpose(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    return build_compute(b, _result_type(op), lambda s, i, _: s.read(args[0], list(i)[::-1])).result


def lower_reduce(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.ReduceOp)
    comb = combinator_name(op, "reduce")
    x, init = args[0], args[1]
    dims = sorted(gt.ints(op.dims))
    xt = lowered_type(x)

    def body(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        kept, reduced = iter(i), iter(r)
        return s.read(x, [next(reduced) if d in dims else next(kept) for d in range(xt.rank)])

    return build_compute(
        b,
        _result_type(op),
        body,
        reduction=[xt.dims[d] for d in dims],
        combinator=comb,
        init=init,
    ).result


def combinator_name(op: Operation, opcode: str) -> str:
    """The opcode of a combinator, or `@f` for a function combinator of the module
    (called once per combination step, a left fold in increasing C order)."""
    fn = op.combinator_fn  # type: ignore[attr-defined]
    if fn is None:
        return op.combinator.data  # type: ignore[attr-defined]
    owner = getattr(fn, "owner", None)
    if not isinstance(owner, graph.GlobalRefOp):
        raise UnsupportedOp(f"{opcode} with a function value combinator")
    return "@" + owner.symbol.data


def _strides(dims: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(dims):
        strides.append(step)
        step *= n
    return strides[::-1]


def lower_shape_cast(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """Row-major reshape: out index -> linear offset -> input index (i64 div/rem)."""
    x, out = args[0], _result_type(op)
    in_dims = lowered_type(x).dims

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        linear = s.index(0)
        for index, stride, n in zip(i, _strides(out.dims), out.dims, strict=True):
            if n == 1:
                continue
            term = index if stride == 1 else s.emit(arith.MuliOp(index, s.index(stride)))
            linear = s.emit(arith.AddiOp(linear, term))
        indices: list[SSAValue] = []
        for d, (stride, n) in enumerate(zip(_strides(in_dims), in_dims, strict=True)):
            if n == 1:
                indices.append(s.index(0))
                continue
            q = linear if stride == 1 else s.emit(arith.DivSIOp(linear, s.index(stride)))
            indices.append(q if d == 0 else s.emit(arith.RemSIOp(q, s.index(n))))
        return s.read(x, indices)

    return build_compute(b, out, body).result


def lower_pad_shape(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.PadShapeOp)
    at = op.index.data
    return build_compute(
        b, _result_type(op), lambda s, i, _: s.read(args[0], [*i[:at], *i[at + 1 :]])
    ).result


def lower_squeeze_shape(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.SqueezeShapeOp)
    at = op.index.data
    return build_compute(
        b, _result_type(op), lambda s, i, _: s.read(args[0], [*i[:at], s.index(0), *i[at:]])
    ).result


def lower_concatenate(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """Select the input whose range holds the axis index; reads clamp into each input."""
    assert isinstance(op, gt.ConcatenateOp)
    axis = op.axis.data
    parts: list[tuple[Lowered, int, int]] = []  # (input, offset, size), non-empty inputs
    offset = 0
    for x in args:
        size = lowered_type(x).dims[axis]
        if size:
            parts.append((x, offset, size))
        offset += size

    def read_part(
        s: BodyBuilder, i: Sequence[SSAValue], part: tuple[Lowered, int, int]
    ) -> SSAValue:
        x, start, size = part
        local = s.emit(arith.SubiOp(i[axis], s.index(start))) if start else i[axis]
        local = s.emit(arith.MinSIOp(local, s.index(size - 1)))
        local = s.emit(arith.MaxSIOp(local, s.index(0))) if start else local
        return s.read(x, [*i[:axis], local, *i[axis + 1 :]])

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        value = read_part(s, i, parts[-1])
        for part in reversed(parts[:-1]):
            inside = s.cmpi("slt", i[axis], s.index(part[1] + part[2]))
            value = s.select(inside, read_part(s, i, part), value)
        return value

    if not parts:  # every input is empty: so is the result
        return Splat(0, _result_type(op))
    return build_compute(b, _result_type(op), body).result


def lower_slice(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.SliceOp)
    lo = op.lower.data
    return build_compute(
        b, _result_type(op), lambda s, i, _: s.read(args[0], [s.add_i(i[0], lo), *i[1:]])
    ).result


def lower_reverse(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.ReverseOp)
    dims = set(gt.ints(op.dims))
    shape = lowered_type(args[0]).dims

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        return s.read(
            args[0], [s.sub_i(shape[d] - 1, v) if d in dims else v for d, v in enumerate(i)]
        )

    return build_compute(b, _result_type(op), body).result


def lower_extract(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """Any mix of integer and value keys into a tensor (graph_to_tensor_keys.py)."""
    from dlc.dialects.graph import Symbols
    from dlc.lowering.graph_to_tensor.keys import lower_key_op

    return lower_key_op(b, op, args, Symbols())


def lower_insert(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """A new tensor: the element at the keys replaced (graph_to_tensor_keys.py)."""
    return lower_extract(b, op, args)


def lower_shape_query(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    """rank / unitCount are i64 constants; shape is a constant vector."""
    from dlc.dialects.tensor import ConstantOp

    t = lowered_type(args[0])
    if isinstance(op, gt.RankOp):
        return Splat(t.rank, TensorType((), "i64"))
    if isinstance(op, gt.UnitCountOp):
        return Splat(t.num_elements, TensorType((), "i64"))
    if not t.dims:
        return Splat(0, _result_type(op))  # <0 x i64>
    return b.insert(ConstantOp(_result_type(op), list(t.dims))).result


RULES: dict[type[Operation], Rule] = {
    ge.NotOp: lower_not,
    ge.SelectOp: lower_select,
    ge.DataTypeCastOp: lower_cast,
    gt.DotOp: lower_dot,
    gt.TransposeOp: lower_transpose,
    gt.ReduceOp: lower_reduce,
    gt.ShapeCastOp: lower_shape_cast,
    gt.PadShapeOp: lower_pad_shape,
    gt.SqueezeShapeOp: lower_squeeze_shape,
    gt.ConcatenateOp: lower_concatenate,
    gt.SliceOp: lower_slice,
    gt.ReverseOp: lower_reverse,
    gm.ExtractOp: lower_extract,
    gm.InsertOp: lower_insert,
    gt.RankOp: lower_shape_query,
    gt.ShapeOp: lower_shape_query,
    gt.UnitCountOp: lower_shape_query,
}


def rule_for(op: Operation) -> Rule | None:
    from dlc.lowering.graph_to_tensor.gathers import RULES as GATHER_RULES
    from dlc.lowering.graph_to_tensor.windows import RULES as WINDOW_RULES

    if type(op) in WINDOW_RULES:
        return WINDOW_RULES[type(op)]
    if type(op) in GATHER_RULES:
        return GATHER_RULES[type(op)]
    if isinstance(op, ge.UnaryOp):
        return lower_unary
    if isinstance(op, ge.BinaryOp):
        return lower_binary
    return RULES.get(type(op))


__all__ = ["Attribute", "RULES", "UnsupportedOp", "graph", "rule_for"]
