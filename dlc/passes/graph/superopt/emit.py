"""Writing a searched graph back into its block (the inverse of `graphs.from_block`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.dialects.graph_elementwise import AddOp, MultiplyOp
from dlc.dialects.graph_reduction import ConvolveOp, ReduceWindowOp
from dlc.dialects.graph_tensor import ConcatenateOp, DotOp, ShapeCastOp, SliceOp, TransposeOp
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.pass_support import splat, tensor_of
from dlc.passes.graph.superopt.graphs import BlockGraph, Config, MaxOp, Node


def build(node: Node, args: list[SSAValue], configs: Sequence[Config]) -> list[Operation]:
    """The ops computing `node` from `args` (the last one defines its value)."""
    t = TensorType(node.shape, node.dtype)
    if node.kind == "conv":
        return [conv(args, configs[node.attr], t)]
    if node.kind == "maxpool":
        return maxpool(args[0], configs[node.attr], t)
    if node.kind in ("ewadd", "ewmul", "smul"):
        cls = AddOp if node.kind == "ewadd" else MultiplyOp
        return [cls(args[0], args[1], t)]
    if node.kind == "relu":
        zero = splat(0, TensorType((), node.dtype))
        return [zero, MaxOp(args[0], zero.results[0], t)]
    if node.kind == "matmul":
        return [DotOp.create(operands=args, result_types=[t])]
    if node.kind == "transpose":
        return [TransposeOp.create(operands=args, result_types=[t])]
    if node.kind in ("concat0", "concat1"):
        axis = {"axis": IntAttr(int(node.kind[-1]))}
        return [ConcatenateOp.create(operands=args, properties=axis, result_types=[t])]
    if node.kind in ("split0a", "split0b"):
        return [row_slice(node, args[0], t)]
    if len(node.shape) == 4:
        return channel_split(node, args[0], t)
    return column_split(node, args[0], t)


def ints(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(v) for v in values])


def conv(args: list[SSAValue], config: Config, t: TensorType) -> Operation:
    _, strides, padding, left, right = config
    props: dict[str, Attribute] = {"strides": ints(strides), "padding": ints(padding)}
    if any(d != 1 for d in left + right):
        props |= {"left_dilation": ints(left), "right_dilation": ints(right)}
    return ConvolveOp.create(operands=args, properties=props, result_types=[t])


def maxpool(x: SSAValue, config: Config, t: TensorType) -> list[Operation]:
    """reduceWindow x by max init -inf, windows and strides of 1 over N and C."""
    _, window, strides, _, _ = config
    init = splat(-math.inf, TensorType((), t.dt))
    props = {
        "window": ints((1, 1, *window)),
        "strides": ints((1, 1, *strides)),
        "padding": StringAttr("none"),
        "combinator": StringAttr("max"),
    }
    op = ReduceWindowOp.create(operands=[x, init.results[0]], properties=props, result_types=[t])
    return [init, op]


def channel_split(node: Node, x: SSAValue, t: TensorType) -> list[Operation]:
    """split1x of an (n, c, h, w) tensor: a row split of its (c, h·w) matrix when n is
    1 (no copy), else a column split of its (n, c·h·w) matrix."""
    xt = x.type
    assert isinstance(xt, TensorType)
    n, c, h, w = xt.dims
    if n == 1:
        flat = shape_cast(x, xt.with_shape((c, h * w)))
        part = Node("split0" + node.kind[-1], (), node.attr, (t.dims[1], h * w), t.dt)
        cut = row_slice(part, flat.results[0], t.with_shape(part.shape))
        return [flat, cut, shape_cast(cut.results[0], t)]
    flat = shape_cast(x, xt.with_shape((n, c * h * w)))
    part = Node(node.kind, (), node.attr * h * w, (n, t.dims[1] * h * w), t.dt)
    cuts = column_split(part, flat.results[0], t.with_shape(part.shape))
    return [flat, *cuts, shape_cast(cuts[-1].results[0], t)]


def shape_cast(x: SSAValue, t: TensorType) -> Operation:
    props = {"shape": ints(t.dims)}
    return ShapeCastOp.create(operands=[x], properties=props, result_types=[t])


def row_slice(node: Node, x: SSAValue, t: TensorType) -> Operation:
    rows = tensor_of(x).dims[0]
    lo, hi = (0, node.attr - 1) if node.kind.endswith("a") else (node.attr, rows - 1)
    props = {"lower": IntAttr(lo), "upper": IntAttr(hi)}
    return SliceOp.create(operands=[x], properties=props, result_types=[t])


def column_split(node: Node, x: SSAValue, t: TensorType) -> list[Operation]:
    """split1x(x) = transpose(split0x(transpose(x)))"""
    xt = x.type
    assert isinstance(xt, TensorType)
    flip = TransposeOp.create(operands=[x], result_types=[xt.with_shape(xt.dims[::-1])])
    part = Node("split0" + node.kind[-1], (), node.attr, t.dims[::-1], node.dtype)
    cut = row_slice(part, flip.results[0], t.with_shape(t.dims[::-1]))
    back = TransposeOp.create(operands=[cut.results[0]], result_types=[t])
    return [flip, cut, back]


def to_block(block: Block, graph: BlockGraph, roots: tuple[int, ...]) -> None:
    """Make `block` compute `roots`: each node's ops go right before its first reader."""
    pool = graph.pool
    values: dict[int, SSAValue] = {}
    reused: set[Operation] = set()
    for (reader, index, _), root in zip(graph.slots, roots):
        for n in pool.topo((root,)):
            if n in values:
                continue
            node = pool.nodes[n]
            if node.kind == "leaf":
                values[n] = pool.leaves[node.attr].value
                continue
            args = [values[a] for a in node.args]
            op = graph.origin.get(n)
            if op is not None and not node.kind.startswith("split1"):
                op.detach()
                block.insert_op_before(op, reader)
                for i, a in enumerate(ordered_args(op, node, args)):
                    op.operands[i] = a
                reused.add(op)
                values[n] = op.results[0]
                continue
            ops = build(node, args, pool.configs)
            block.insert_ops_before(ops, reader)
            values[n] = ops[-1].results[0]
        reader.operands[index] = values[root]
    erase_unused(block, graph, reused)


def ordered_args(op: Operation, node: Node, args: list[SSAValue]) -> list[SSAValue]:
    """`args` in `op`'s operand order (smul and relu keep their scalar where it was)."""
    if node.kind == "relu":
        return [args[0], op.operands[1]]
    if node.kind == "smul" and op.operands[0].type == args[1].type:
        return args[::-1]
    return args


def erase_unused(block: Block, graph: BlockGraph, reused: set[Operation]) -> None:
    """Erase the original term ops the new graph no longer reads (readers first: ops
    that were not reused kept their order)."""
    for op in reversed([op for op in block.ops if op in graph.terms and op not in reused]):
        if not op.results[0].uses:
            block.erase_op(op)
