"""Literals of `lower-graph-to-tensor`: scalars and splats stay compile-time `Splat`s,
tensor literals become `tensor.constant` data built in bulk (a dense literal's bytes
used as they are), literals with value elements a compute that selects them, and
aggregates Python lists of their parts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from xdsl.builder import Builder
from xdsl.ir import Attribute, SSAValue

from dlc.diagnostics import error_at
from dlc.dialects import graph, tensor
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_literal import LitTree, all_equal, dense_dtype, scalar_tree
from dlc.dialects.graph_types import NominalType, TensorType, TupleType, format_type
from dlc.dialects.layout import I64, children, is_indirect
from dlc.dialects.recursive_types import enum_tag
from dlc.lowering.graph_to_tensor.compute_builder import BodyBuilder, Lowered, Splat, build_compute
from dlc.lowering.graph_to_tensor.memory import zero

UNSUPPORTED = "not supported by the code generator yet: "
_BOX = "@box"  # a work item: the body above it is complete, box it


@dataclass
class _Segment:
    """Part of a tensor literal: the elements under index `prefix`."""

    prefix: tuple[int, ...]
    tree: LitTree
    type: TensorType


def tensor_literal(
    b: Builder, op: graph.LiteralOp, tree: LitTree, t: TensorType, args: list[Lowered]
) -> Lowered:
    """`<...>` or dense literal: dense constant, splat, or computed when elements are
    values. The data is built in bulk (NumPy), a dense literal's bytes used as they are."""
    segments = _segments(tree, t)
    values = [s for s in segments if s.tree[0] == "operand"]
    data = tree[1] if tree[0] == "dense" else _data(segments, t)
    array = np.frombuffer(data, dense_dtype(t.dt))
    if not values and (array.size == 0 or all_equal(array)):
        return Splat(scalar_tree(array[0], t.dt)[1] if array.size else 0, t)
    if not values:
        return b.insert(tensor.ConstantOp.from_bytes(t, data)).result
    base: Lowered = b.insert(tensor.ConstantOp.from_bytes(t, data)).result if data else Splat(0, t)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        acc = s.read(base, i)
        for seg in values:
            hit = s.all_equal(i[: len(seg.prefix)], seg.prefix)
            acc = s.select(hit, s.read(args[seg.tree[1]], i[len(seg.prefix) :]), acc)
        return acc

    return build_compute(b, t, body).result


def _segments(tree: LitTree, t: TensorType) -> list[_Segment]:
    """Row-major leaves of a tensor literal: scalars, splats, dense parts and value
    elements."""
    out: list[_Segment] = []
    stack = [_Segment((), tree, t)]
    while stack:
        seg = stack.pop()
        if seg.tree[0] != "tensor":
            out.append(seg)
            continue
        sub = seg.type.with_shape(seg.type.dims[1:])
        stack.extend(
            _Segment((*seg.prefix, k), e, sub) for k, e in reversed(list(enumerate(seg.tree[1])))
        )
    return out


def _data(segments: list[_Segment], t: TensorType) -> bytes:
    """The constant data as a dense literal's bytes, value elements filled with 0; runs
    of scalars are converted together (bf16 through f32, as `tensor.bf16_bits`)."""
    dtype = dense_dtype(t.dt)
    via = np.float32 if t.dt == "bf16" else dtype
    chunks: list[np.ndarray] = []
    run: list[int | float | bool] = []
    for seg in segments:
        kind = seg.tree[0]
        value = seg.tree[1] if kind in ("int", "float", "bool") else 0
        if kind != "dense" and seg.type.num_elements == 1:
            run.append(value)
            continue
        chunks.append(np.array(run, via).astype(dtype))
        run = []
        if kind == "dense":
            chunks.append(np.frombuffer(seg.tree[1], dtype))
        else:
            chunks.append(np.full(seg.type.num_elements, value, via).astype(dtype))
    chunks.append(np.array(run, via).astype(dtype))
    return np.concatenate(chunks).tobytes()


Boxer: TypeAlias = "Callable[[Builder, NominalType, Lowered], Lowered]"


def lower_literal(
    b: Builder,
    op: graph.LiteralOp,
    args: list[Lowered],
    symbols: Symbols | None = None,
    boxer: Boxer | None = None,
) -> Lowered:
    """Scalars and splats stay compile-time `Splat`s; aggregates become Python lists; a
    case of an indirect enum is its by-value body put in a new box by `boxer`."""
    symbols = symbols or Symbols()
    root: list[Lowered] = []
    stack: list[tuple[LitTree, Attribute, list[Lowered]]] = [(op.value.data, op.result.type, root)]
    while stack:
        tree, t, out = stack.pop()
        kind = tree[0]
        if kind == _BOX:  # after the body's parts (pushed below it): the box
            assert boxer is not None and isinstance(t, NominalType)
            out.append(boxer(b, t, tree[1][0]))
        elif kind == "enum" and is_indirect(t, symbols):
            if boxer is None:
                raise error_at(op, UNSUPPORTED + f"literal of type {format_type(t)}")
            body: list[Lowered] = []
            stack.append(((_BOX, [body]), t, out))
            stack.extend(reversed(_aggregate_literal(tree, t, body, symbols)))
        elif kind == "operand":
            out.append(args[tree[1]])
        elif kind == "tuple" and isinstance(t, TupleType):
            items: list[Lowered] = []
            out.append(items)
            stack.extend(
                (e, et, items) for e, et in reversed(list(zip(tree[1], t.types, strict=True)))
            )
        elif kind in ("zero", "undefined", "null") and not isinstance(t, TensorType):
            out.append(zero(t, symbols))
        elif kind in ("tuple", "array", "struct", "enum"):
            items = []
            out.append(items)
            stack.extend(reversed(_aggregate_literal(tree, t, items, symbols)))
        elif not isinstance(t, TensorType):
            raise error_at(op, UNSUPPORTED + f"literal of type {format_type(t)}")
        elif kind in ("int", "float", "bool"):
            out.append(Splat(tree[1], t))
        elif kind in ("zero", "undefined"):
            out.append(Splat(False if t.dt == "bool" else 0, t))
        elif kind in ("tensor", "dense"):
            out.append(tensor_literal(b, op, tree, t, args))
        else:
            raise error_at(op, UNSUPPORTED + f"literal {kind}")
    return root[0]


def _aggregate_literal(
    tree: LitTree, t: Attribute, items: list[Lowered], symbols: Symbols
) -> list[tuple[LitTree, Attribute, list[Lowered]]]:
    """Work items filling `items` with the elements of an array/struct/enum literal
    (an enum: its tag, then each case's values, zeros for the other cases)."""
    kind = tree[0]
    if kind == "enum":
        assert isinstance(t, NominalType)
        cases = symbols.enums[t.ident]
        items.append(Splat(enum_tag(t, tree[1], symbols), I64))
        work: list[tuple[LitTree, Attribute, list[Lowered]]] = []
        for name, types in cases:
            if name != tree[1]:
                items.append(zero(TupleType(list(types)), symbols))
                continue
            values: list[Lowered] = []
            items.append(values)
            work.extend((e, et, values) for e, et in zip(tree[2], types, strict=True))
        return work
    kids = children(t, symbols) or []
    elements = list(tree[1])
    if kind == "struct":
        by_name = dict(elements)
        assert isinstance(t, NominalType), t
        elements = [by_name[name] for name, _ in symbols.structs[t.ident]]
    return [(e, et, items) for e, et in zip(elements, kids, strict=True)]
