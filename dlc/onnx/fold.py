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


def foldable(proto: NodeProto, constants: list[np.ndarray | None]) -> bool:
    """Whether `proto` is a small shape computation on constants only."""
    if proto.op_type not in FOLDABLE or proto.domain not in ("", "ai.onnx"):
        return False
    given = [c for name, c in zip(proto.input, constants, strict=True) if name]
    if any(c is None for c in given):
        return False
    return all(c.size <= MAX_ELEMENTS for c in given if c is not None)


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
