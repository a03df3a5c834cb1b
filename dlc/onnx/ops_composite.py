"""ONNX Einsum and TopK as the graph dialect's `einsum`, `topK` and `topKIndices`.

Einsum: spaces dropped; an implicit result is the letters that appear once, in
alphabetical order (NumPy's rule); an ellipsis becomes fresh letters for the
dimensions it covers, aligned from the right and broadcast between operands (a 1
stretched by an explicit broadcast, as NumPy does), the result's ellipsis first when
implicit. f16 operands are summed in f32 and rounded once (like MatMul); bf16 ones
through f32 (the emitter's rule for storage types). TopK: `k` constant (an attribute
before opset 10), `largest`, `sorted` (unsorted order is unspecified: dlc sorts).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, SSAValue

from dlc.dialects.graph_composite import EinsumOp, TopKIndicesOp, TopKOp
from dlc.dialects.graph_elementwise import DataTypeCastOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result


def _split(equation: str, count: int) -> tuple[list[str], str | None]:
    text = equation.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != count:
        raise ImportProblem(f"equation '{equation}' has {len(terms)} terms for {count} inputs")
    return terms, output if arrow else None


def _spell_ellipses(
    terms: list[str], output: str | None, ranks: Sequence[int]
) -> tuple[list[str], str]:
    """Terms and result with every '...' replaced by fresh letters (right-aligned)."""
    used = set("".join(terms) + (output or ""))
    fresh = [c for c in string.ascii_letters if c not in used]
    pairs = zip(terms, ranks, strict=True)
    widths = [r - len(t.replace("...", "")) if "..." in t else 0 for t, r in pairs]
    if min(widths, default=0) < 0 or max(widths, default=0) > len(fresh):
        raise ImportProblem("the equation's terms do not fit the inputs' ranks")
    width = max(widths, default=0)
    letters = "".join(fresh[:width])
    spelled = [t.replace("...", letters[width - w :]) for t, w in zip(terms, widths, strict=True)]
    if output is None:
        once = sorted(c for c in set("".join(spelled)) if "".join(spelled).count(c) == 1)
        output = letters + "".join(c for c in once if c not in letters)
    elif "..." in output:
        output = output.replace("...", letters)
    return spelled, output


def _stretched(e: Emitter, terms: list[str], values: list[SSAValue]) -> list[SSAValue]:
    """Operands whose size-1 dimensions meet a larger size of the same letter elsewhere,
    broadcast to it (NumPy's broadcasting of ellipsis dimensions)."""
    size: dict[str, int] = {}
    for term, v in zip(terms, values, strict=True):
        for c, d in zip(term, shape_of(v), strict=True):
            size[c] = max(size.get(c, 1), d)
    out = []
    for term, v in zip(terms, values, strict=True):
        dims = shape_of(v)
        want = [size[c] if d == 1 else d for c, d in zip(term, dims, strict=True)]
        out.append(e.broadcast_to(v, want) if tuple(want) != dims else v)
    return out


def einsum(node: Node) -> list[Result]:
    e = node.emit
    values = [node.input(i) for i in range(len(node.names))]
    equation = node.attr("equation")
    if not isinstance(equation, str):
        raise ImportProblem("the equation attribute is missing")
    terms, output = _split(equation, len(values))
    terms, output = _spell_ellipses(terms, output, [len(shape_of(v)) for v in values])
    if any(len(t) != len(shape_of(v)) for t, v in zip(terms, values, strict=True)):
        raise ImportProblem(f"equation '{equation}' does not fit the inputs' ranks")
    values = _stretched(e, terms, values)
    narrow = tensor_type(values[0]).dt == "f16"
    if narrow:
        values = [e.op(DataTypeCastOp, [v], dtype=StringAttr("f32")) for v in values]
    y = e.op(EinsumOp, values, equation=StringAttr(",".join(terms) + "->" + output))
    return [e.op(DataTypeCastOp, [y], dtype=StringAttr("f16")) if narrow else y]


def _count(node: Node) -> int:
    if node.opset < 10:
        k = node.attr("k")
    else:
        value = node.constant(1, "k")
        if value is None or value.size != 1:
            raise ImportProblem("k must be one integer")
        k = int(value.reshape(-1)[0])
    if not isinstance(k, int):
        raise ImportProblem("k must be given")
    return k


def top_k(node: Node) -> list[Result]:
    e, x = node.emit, node.input(0)
    axis = node.axis(node.attr("axis", -1), len(shape_of(x)))
    props: dict[str, Attribute] = {"count": IntAttr(_count(node)), "axis": IntAttr(axis)}
    if not node.attr("largest", 1):
        props["smallest"] = UnitAttr()
    node.attr("sorted")  # an unsorted result's order is unspecified: sorted is one
    outputs = list(node.proto.output) + ["", ""]
    values = e.op(TopKOp, [x], **props) if outputs[0] else None
    indices = e.op(TopKIndicesOp, [x], **props) if outputs[1] else None
    return [values or indices, indices or values]  # type: ignore[list-item]  # "" outputs unread


CONVERTERS: dict[str, Converter] = {"Einsum": einsum, "TopK": top_k}
