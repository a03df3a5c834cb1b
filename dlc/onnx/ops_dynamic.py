"""ONNX operators whose output shape depends on input values: NonZero, Unique,
NonMaxSuppression and Compress.

dlc compiles static shapes, so these import only when the values that decide the
shape are known at import time: on constant inputs (initializers, `Constant`s and
what is folded from them) the node is evaluated by onnx's reference implementation
(`fold.py`) and its outputs become constants; Compress with a constant `condition`
is a `gather` of the selected positions, whatever its data input. Otherwise the node
is refused, naming the input whose values decide the shape. Such an input is data,
not a shape parameter, so it is not listed in `OnnxImportError.wanted_constants`:
the ONNX backend does not compile a model per value of it.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntAttr

from dlc.dialects import graph_gather as gg
from dlc.onnx import fold
from dlc.onnx.emitter import ImportProblem, shape_of
from dlc.onnx.node import Converter, Node, Result

SHAPE_INPUTS = {
    "NonZero": ((0,), "the number of nonzero elements"),
    "Unique": ((0,), "the number of distinct values"),
    "NonMaxSuppression": ((0, 1, 2, 3, 4), "the number of selected boxes"),
    "Compress": ((1,), "the number of selected positions"),
}
"""The inputs whose values decide the output shape, and what they decide."""


def _refusal(node: Node) -> ImportProblem:
    indices, what = SHAPE_INPUTS[node.op_type]
    given = [i for i in indices if i < len(node.names) and node.names[i]]
    name = next((node.names[i] for i in given if node.constants[i] is None), node.names[0])
    return ImportProblem(
        f"the output shape depends on the values of input '{name}' ({what}), known only "
        "at run time: dlc compiles static shapes (a constant input is folded at import)"
    )


def folded(node: Node) -> list[Result]:
    """The node evaluated at import time when all its inputs are constants."""
    if any(c is None for c, name in zip(node.constants, node.names, strict=True) if name):
        raise _refusal(node)
    node.used.update(a.name for a in node.proto.attribute)
    try:
        outputs = fold.fold(node.proto, node.constants, node.opset)
    except ValueError as err:
        raise ImportProblem(str(err)) from None
    return list(outputs)


def compress(node: Node) -> list[Result]:
    """input's positions along `axis` (of the flattened input without one) where the
    constant condition holds, as a `gather` with constant indices."""
    condition = node.constants[1]
    if condition is None or node.constants[0] is not None:
        return folded(node)
    e, x = node.emit, node.input(0)
    axis_attr = node.attr("axis")
    if axis_attr is None:
        x, axis = e.reshape(x, (int(np.prod(shape_of(x))),)), 0
    else:
        axis = node.axis(int(axis_attr), len(shape_of(x)))
    if condition.ndim != 1:
        raise ImportProblem(f"condition must be 1-D, got shape {list(condition.shape)}")
    picked = np.flatnonzero(condition)
    if picked.size == 0:
        raise ImportProblem("the condition selects nothing (an empty output is not supported)")
    if picked[-1] >= shape_of(x)[axis]:
        raise ImportProblem(
            f"condition selects position {picked[-1]} of an axis of {shape_of(x)[axis]}"
        )
    index = e.constant(picked.astype(np.int64))
    return [e.op(gg.GatherOp, [x, index], axis=IntAttr(axis))]


CONVERTERS: dict[str, Converter] = {
    "NonZero": folded,
    "Unique": folded,
    "NonMaxSuppression": folded,
    "Compress": compress,
}
