"""ONNX If, Loop and Scan: subgraphs imported as blocks of the same function
(`subgraph.py` says why), loops as CFG loops (`loops.py`).

If with a known condition imports its branch, else both joined by a `conditional` (a
branch that cannot be imported beside one that can is a trap with an
`UnreachableBranchWarning`); Loop unrolls up to `UNROLL_MAX` known iterations, else runs
as a CFG loop; Scan is a CFG loop over rows gathered from its inputs. A refusal a constant would remove is a `NotConstant`.
Details: docs/guide/onnx.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from onnx import GraphProto
from xdsl.dialects.builtin import IntAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_gather import GatherOp
from dlc.dialects.graph_tensor import ReverseOp
from dlc.onnx import fold
from dlc.onnx.emitter import (
    Emitter,
    ImportProblem,
    NotConstant,
    describe,
    ints_attr,
    shape_of,
    tensor_type,
)
from dlc.onnx.loops import BranchTypesDiffer, branches, cfg_loop
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.subgraph import import_graph

UNROLL_MAX = 16
"""Loops with a constant trip count up to this are unrolled at import time."""

MAX_BATCH = 64
"""Opset 8 Scan runs one loop per batch row, up to this many rows."""


def if_(node: Node) -> list[Result]:
    then_graph, else_graph = node.attr("then_branch"), node.attr("else_branch")
    cond = node.constants[0] if node.names else None
    if cond is not None:
        if cond.size != 1:
            raise ImportProblem(f"the condition has {cond.size} elements, expected 1")
        taken = then_graph if bool(cond.reshape(-1)[0]) else else_graph
        return import_graph(node.scope, taken, [], node.opset)
    c = node.input(0)
    if tensor_type(c).dt != "bool" or int(np.prod(shape_of(c))) != 1:
        raise ImportProblem(f"the condition is {describe(c)}, expected one bool")
    arms = [
        lambda: import_graph(node.scope, then_graph, [], node.opset),
        lambda: import_graph(node.scope, else_graph, [], node.opset),
    ]
    try:
        values, why = branches(node.emit, node.scope.names, c, arms)
    except BranchTypesDiffer as err:
        raise NotConstant(f"{err}; a constant condition picks one branch", node.names[0]) from None
    if why is not None:
        label = f"node '{node.proto.name}' ({node.op_type})" if node.proto.name else "If"
        message = f"{label}: a branch cannot be imported ({why}); it traps if the model takes it"
        warnings.warn(UnreachableBranchWarning(message), stacklevel=2)
    return list(values)


class UnreachableBranchWarning(UserWarning):
    """An If's branch that cannot be imported (the other can): compiled as a trap. The
    exporters write such branches for inputs of another rank or size than the model
    is compiled for; the condition does not take them then."""


# ---- Loop -------------------------------------------------------------------------


def loop(node: Node) -> list[Result]:
    body: GraphProto = node.attr("body")
    carried = len(node.names) - 2
    scans = len(body.output) - 1 - carried
    if carried < 0 or scans < 0 or len(body.input) != carried + 2:
        raise ImportProblem(
            f"the body has {len(body.input)} inputs and {len(body.output)} outputs for "
            f"{max(carried, 0)} loop-carried values"
        )
    count, cond0 = node.constants[0], node.constants[1]
    has_cond = bool(node.names[1])
    if (
        count is not None
        and int(count.reshape(-1)[0]) <= UNROLL_MAX
        and (not has_cond or (cond0 is not None and _folds(node, body)))
    ):
        return _unrolled(node, body, int(count.reshape(-1)[0]), cond0 if has_cond else None)
    return _cfg_loop(node, body, carried, scans)


def _folds(node: Node, body: GraphProto) -> bool:
    """Whether the body's condition is a constant once the iteration number and the
    incoming condition are: computed from them and constants by foldable ops."""
    producers = {out: inner for inner in body.node for out in inner.output}
    known = {body.input[0].name, body.input[1].name, *(i.name for i in body.initializer)}
    stack, seen = [body.output[0].name], set()
    while stack:
        name = stack.pop()
        if name in seen or name in known or not name:
            continue
        seen.add(name)
        inner = producers.get(name)
        if inner is None:  # from the outer scope
            if name not in node.scope.constants:
                return False
            continue
        if inner.op_type != "Constant" and inner.op_type not in fold.FOLDABLE:
            return False
        stack.extend(inner.input)
    return True


def _unrolled(node: Node, body: GraphProto, count: int, cond: np.ndarray | None) -> list[Result]:
    """The body imported once per iteration (iteration number and condition constant)."""
    carried: list[Result] = [
        c if c is not None else node.input(k + 2) for k, c in enumerate(node.constants[2:])
    ]
    scans: list[list[Result]] = []
    for it in range(count):
        if cond is not None and not bool(cond.reshape(-1)[0]):
            break
        given = cond if cond is not None else np.array(True)
        outs = import_graph(node.scope, body, [np.array(it, np.int64), given, *carried], node.opset)
        if cond is not None:
            if not isinstance(outs[0], np.ndarray):
                raise ImportProblem(f"the condition of iteration {it} is not a constant")
            cond = outs[0]
        carried, scans = outs[1 : 1 + len(carried)], [*scans, outs[1 + len(carried) :]]
    width = len(body.output) - 1 - len(carried)
    if width and not scans:
        raise ImportProblem("scan outputs of a Loop that runs no iteration are not supported")
    return carried + [stack(node.emit, [s[k] for s in scans]) for k in range(width)]


def _cfg_loop(node: Node, body: GraphProto, carried: int, scans: int) -> list[Result]:
    e = node.emit
    count = _scalar(node, 0, "i64") if node.names[0] else None
    cond = _scalar(node, 1, "bool") if node.names[1] else None
    if count is None and cond is None:
        raise ImportProblem("a Loop with neither a trip count nor a condition never ends")
    trips = _trips(node, body) if scans else None
    if trips is not None:
        cond = None  # constant true all along

    def step(
        i: SSAValue, c: SSAValue | None, values: list[SSAValue]
    ) -> tuple[Result | None, list[Result], list[Result]]:
        given: Result = c if c is not None else np.array(True)
        outs = import_graph(node.scope, body, [i, given, *values], node.opset)
        return outs[0], outs[1 : 1 + carried], outs[1 + carried :]

    initial = [node.input(k) for k in range(2, 2 + carried)]
    final, stacked = cfg_loop(e, node.scope.names, count, cond, initial, trips, step)
    return [*final, *stacked]


def _scalar(node: Node, i: int, dt: str) -> SSAValue:
    value = node.input(i)
    if tensor_type(value).dt != dt or int(np.prod(shape_of(value))) != 1:
        raise ImportProblem(f"input {i} is {describe(value)}, expected one {dt}")
    return node.emit.reshape(value, ())


def _trips(node: Node, body: GraphProto) -> int:
    """The exact iteration count scan outputs need: a constant trip count, and a
    condition that starts and stays true (the body passes it through)."""
    if not node.names[0]:
        raise ImportProblem("scan outputs of a Loop without a trip count are not supported")
    count = node.constant(0, "the trip count, for scan outputs,")
    assert count is not None
    if not node.names[1]:
        return int(count.reshape(-1)[0])
    cond = node.constant(1, "the condition, for scan outputs,")
    assert cond is not None
    if not bool(cond.reshape(-1)[0]) or not _passes_condition(body):
        raise ImportProblem(
            "scan outputs need a fixed number of iterations: the body's condition must "
            "pass the incoming one through"
        )
    return int(count.reshape(-1)[0])


def _passes_condition(body: GraphProto) -> bool:
    """Whether the body's condition output is its condition input (through Identity)."""
    producers = {out: inner for inner in body.node for out in inner.output}
    name = body.output[0].name
    while name in producers and producers[name].op_type == "Identity":
        name = producers[name].input[0]
    return name == body.input[1].name


def stack(e: Emitter, values: Sequence[Result]) -> Result:
    """`values` stacked along a new axis 0 (a constant when all are)."""
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    if len(arrays) == len(values):
        return np.stack(arrays)
    tensors = [e.constant(v) if isinstance(v, np.ndarray) else v for v in values]
    return e.concatenate([e.reshape(t, (1, *shape_of(t))) for t in tensors], 0)


# ---- Scan -------------------------------------------------------------------------


def scan(node: Node) -> list[Result]:
    if node.opset < 9:
        return _scan8(node)
    body: GraphProto = node.attr("body")
    m = int(node.attr("num_scan_inputs"))
    n = len(node.names) - m
    k = len(body.output) - n
    if n < 0 or k < 0:
        raise ImportProblem(f"num_scan_inputs={m} does not fit {len(node.names)} inputs")
    states = [node.input(j) for j in range(n)]
    xs = [node.input(j) for j in range(n, n + m)]
    layout = (
        node.attr("scan_input_axes", [0] * m),
        node.attr("scan_input_directions", [0] * m),
        node.attr("scan_output_axes", [0] * k),
        node.attr("scan_output_directions", [0] * k),
    )
    return scan_loop(node, body, states, xs, *layout)


def scan_loop(
    node: Node,
    body: GraphProto,
    states: Sequence[SSAValue],
    xs: Sequence[SSAValue],
    axes: Sequence[int],
    directions: Sequence[int],
    out_axes: Sequence[int],
    out_directions: Sequence[int],
) -> list[Result]:
    """One CFG loop over the scan inputs' rows along `axes` (reversed where
    `directions` is 1)."""
    e = node.emit
    axes = [node.axis(a, len(shape_of(x))) for x, a in zip(xs, axes, strict=True)]
    lengths = sorted({shape_of(x)[a] for x, a in zip(xs, axes, strict=True)})
    if len(lengths) != 1 or lengths[0] == 0:
        raise ImportProblem(f"the scan inputs' lengths {lengths} must be one nonzero length")
    t = lengths[0]

    def step(
        i: SSAValue, _: SSAValue | None, values: list[SSAValue]
    ) -> tuple[Result | None, list[Result], list[Result]]:
        back = e.binary("subtract", e.scalar(t - 1, "i64"), i)
        rows = [
            e.op(GatherOp, [x, back if d else i], axis=IntAttr(a))
            for x, a, d in zip(xs, axes, directions, strict=True)
        ]
        outs = import_graph(node.scope, body, [*values, *rows], node.opset)
        return None, outs[: len(values)], outs[len(values) :]

    final, stacked = cfg_loop(e, node.scope.names, e.scalar(t, "i64"), None, states, t, step)
    outs: list[Result] = list(final)
    for y, a, d in zip(stacked, out_axes, out_directions, strict=True):
        if d:
            y = e.op(ReverseOp, [y], dims=ints_attr([0]))
        rank = len(shape_of(y))
        a = node.axis(a, rank)
        outs.append(e.transpose(y, [*range(1, a + 1), 0, *range(a + 1, rank)]))
    return outs


def _scan8(node: Node) -> list[Result]:
    """Opset 8: inputs and states have a batch axis 0; one loop per batch row."""
    body: GraphProto = node.attr("body")
    m = int(node.attr("num_scan_inputs"))
    n = len(node.names) - 1 - m
    directions = node.attr("directions", [0] * m)
    xs = [node.input(1 + n + j) for j in range(m)]
    batch, t = shape_of(xs[0])[:2]
    lens = node.constant(0, "sequence_lens")
    if lens is not None and np.any(lens != t):
        raise ImportProblem("sequence_lens shorter than the scan inputs are not supported")
    if batch > MAX_BATCH:
        raise ImportProblem(f"opset 8 Scan of more than {MAX_BATCH} batch rows")
    k = len(body.output) - n
    rows = []
    for b in range(batch):
        index = node.emit.constant(np.array(b, np.int64))
        row = [
            node.emit.op(GatherOp, [node.input(j), index], axis=IntAttr(0))
            for j in range(1, 1 + n + m)
        ]
        rows.append(scan_loop(node, body, row[:n], row[n:], [0] * m, directions, [0] * k, [0] * k))
    return [stack(node.emit, [r[j] for r in rows]) for j in range(n + k)]


CONVERTERS: dict[str, Converter] = {"If": if_, "Loop": loop, "Scan": scan}
