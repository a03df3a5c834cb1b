"""Import-time folding of the small constant computations ONNX graphs make of shapes.

Exported models compute the shape inputs of Reshape, Expand, Slice and friends with
`Shape -> Gather -> Unsqueeze -> Concat` chains. `Shape` of a value dlc knows the
shape of is a constant (ops_shape.shape); a node of `FOLDABLE` whose inputs are all
constants is evaluated here, by onnx's reference implementation of that op (so its
semantics are ONNX's by definition), and its outputs stay NumPy constants, which later
nodes read as shape inputs or, when they read them as tensors, as literals.

Folding is limited to these ops and to `MAX_ELEMENTS` elements per input and output:
it folds shape arithmetic, not a model's numerical work.

When such a computation reads an integer graph input (CenterCropPad's `shape`), it
cannot fold, and a node that needs its result as a constant names that graph input
as wanted (`derived`): the ONNX backend then compiles the model for its value, as it
does for a graph input read as a shape directly.
"""

from __future__ import annotations

import warnings

import numpy as np
from onnx import NodeProto
from xdsl.ir import SSAValue

from dlc.dialects.graph_types import TensorType

FOLDABLE = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Concat", "ConstantOfShape", "Div",
        "Equal", "Expand", "Flatten", "Floor", "Gather", "Greater", "GreaterOrEqual",
        "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pow",
        "Range", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
        "Reshape", "Shape", "Sign", "Size", "Slice", "Sqrt", "Squeeze", "Sub", "Tile",
        "Transpose", "Trilu", "Unsqueeze", "Where", "Xor",
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


def fold(proto: NodeProto, constants: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """The outputs of `proto` on its constant inputs; ValueError when they are too
    large or the reference implementation rejects the node."""
    from onnx.reference import ReferenceEvaluator

    feeds = {
        name: value
        for name, value in zip(proto.input, constants, strict=True)
        if name and value is not None
    }
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outputs = ReferenceEvaluator(proto, opsets={"": opset}).run(None, feeds)
    except Exception as err:  # the reference implementation's own checks
        raise ValueError(f"cannot fold constant inputs: {err}") from None
    arrays = [np.asarray(o) for o in outputs]
    if any(a.size > MAX_ELEMENTS for a in arrays):
        raise ValueError(f"folded output exceeds {MAX_ELEMENTS} elements")
    return arrays


def is_index(t: TensorType) -> bool:
    """A small integer tensor: a shape, axes or sizes."""
    return t.dt in ("i32", "i64") and t.num_elements <= MAX_ELEMENTS


def derived(proto: NodeProto, value: SSAValue, sources: dict[str, set[str]]) -> set[str]:
    """The integer graph inputs (`sources` of proto's inputs) a small integer output
    of a FOLDABLE node is computed from: constants once those inputs are."""
    t = value.type
    if proto.op_type not in FOLDABLE or not isinstance(t, TensorType) or not is_index(t):
        return set()
    return set().union(*(sources.get(name, set()) for name in proto.input))
