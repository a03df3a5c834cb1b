"""Import-time folding of the small constant computations ONNX graphs make of shapes.

Exported models compute the shape inputs of Reshape, Expand, Slice and friends with
`Shape -> Gather -> Unsqueeze -> Concat` chains. `Shape` of a value dlc knows the
shape of is a constant (ops_shape.shape); a node of `FOLDABLE` whose inputs are all
constants is evaluated here, by onnx's reference implementation of that op (so its
semantics are ONNX's by definition), and its outputs stay NumPy constants, which later
nodes read as shape inputs or, when they read them as tensors, as literals.

Folding is limited to these ops and to `MAX_ELEMENTS` elements per input and output:
it folds shape arithmetic, not a model's numerical work. The list holds what
exporters write in shape computations: timm's TF-"same" padding through the
TorchScript exporter is `Shape -> Gather -> Sub/Mul/Add/Ceil -> Clip (max(p, 0)) ->
Div -> Cast -> Concat -> Reshape/Slice/Transpose -> Pad`.

When such a computation reads a graph input (CenterCropPad's `shape`), it cannot
fold, and a node that needs its result as a constant names the graph inputs it is
computed from as wanted (`subgraph.inputs_behind`): the ONNX backend then compiles
the model for their values, as it does for a graph input read as a shape directly.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from onnx import NodeProto

FOLDABLE = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Concat", "ConstantOfShape",
        "CumSum", "Div", "Equal", "Expand", "Flatten", "Floor", "Gather", "GatherElements",
        "GatherND", "Greater", "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min",
        "Mod", "Mul", "Neg", "NonZero", "Not", "Or", "Pow", "Range", "Reciprocal", "ReduceMax",
        "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "Relu", "Reshape", "Round",
        "ScatterElements", "ScatterND", "Shape", "Sign", "Size", "Slice", "Split", "Sqrt",
        "Squeeze", "Sub", "Sum", "Tile", "Transpose", "Trilu", "Unsqueeze", "Where", "Xor",
    }
)  # fmt: skip
MAX_ELEMENTS = 1 << 16


def foldable(
    proto: NodeProto, constants: list[np.ndarray | None], limit: int = MAX_ELEMENTS
) -> bool:
    """Whether `proto` is a small shape computation on constants only: each input and
    (estimated before anything runs: `output_bound`) each output within `limit`."""
    if proto.op_type not in FOLDABLE or proto.domain not in ("", "ai.onnx"):
        return False
    given = [c for name, c in zip(proto.input, constants, strict=True) if name]
    if any(c is None for c in given):
        return False
    if not all(c.size <= limit for c in given if c is not None):
        return False
    return output_bound(proto, [c for c in given if c is not None]) <= limit


def _values(array: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


def output_bound(proto: NodeProto, inputs: list[np.ndarray]) -> int:
    """An upper bound of the elements of any output of `proto` on these inputs, from
    their shapes and the few values that set output sizes (shape inputs, repeats, a
    range's bounds, Split's number of outputs); unbounded is 2^63. Folding checks it
    before onnx's reference evaluator allocates anything."""
    huge = 1 << 63
    op = proto.op_type
    try:
        if op == "ConstantOfShape":
            dims = _values(inputs[0])
            return huge if min(dims, default=0) < 0 else math.prod(dims)
        if op == "Expand":
            shape = np.broadcast_shapes(inputs[0].shape, tuple(_values(inputs[1])))
            return math.prod(shape)
        if op == "Tile":
            return math.prod(
                d * r for d, r in zip(inputs[0].shape, _values(inputs[1]), strict=True)
            )
        if op == "Range":
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in inputs)
            return huge if delta == 0 else max(0, math.ceil((limit - start) / delta))
        if op == "Split":
            wanted = [a.i for a in proto.attribute if a.name == "num_outputs"]
            if wanted and wanted[0] != len(proto.output):
                return huge
        if op == "Gather":
            return max((a.size for a in inputs), default=0) * max(inputs[1].size, 1)
    except (ValueError, OverflowError, IndexError, TypeError):  # malformed: the converter reports
        return huge
    total = sum(a.size for a in inputs)  # Concat; every op that moves or drops elements
    try:  # element-wise ops broadcast their inputs
        return max(total, math.prod(np.broadcast_shapes(*(a.shape for a in inputs))))
    except ValueError:
        return total


def fold(
    proto: NodeProto, constants: list[np.ndarray | None], opset: int, limit: int = MAX_ELEMENTS
) -> list[np.ndarray]:
    """The outputs of `proto` on its constant inputs; ValueError when one has more than
    `limit` elements or the reference implementation rejects the node."""
    from onnx import ValueInfoProto, helper
    from onnx.reference import ReferenceEvaluator

    # a model, not the bare node: the reference ignores `opsets` for a node and runs the
    # newest form of the op (opset 11's Unsqueeze with an `axes` attribute failed)
    graph = helper.make_graph(
        [proto],
        "fold",
        [ValueInfoProto(name=n) for n in dict.fromkeys(proto.input) if n],
        [ValueInfoProto(name=n) for n in proto.output if n],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {
        name: value
        for name, value in zip(proto.input, constants, strict=True)
        if name and value is not None
    }
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outputs = ReferenceEvaluator(model).run(None, feeds)
    except Exception as err:  # the reference implementation's own checks
        raise ValueError(f"cannot fold constant inputs: {err}") from None
    produced = iter(outputs)
    arrays = [np.asarray(next(produced)) if n else np.empty(0) for n in proto.output]
    if any(a.size > limit for a in arrays):
        raise ValueError(f"folded output exceeds {limit} elements")
    return arrays
