"""The results of a function with symbolic dimensions (`lower-graph-to-loop`): one
tensor, or a tuple of tensors returned as a tuple literal of their values (`literal
(%logits, %keys, %values)`: an ONNX graph's outputs). Each result is an output buffer
of the `loop.func`, in order, after the sizes."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from dlc.diagnostics import error_at
from dlc.dialects import graph
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType, format_type


def result_types(func: graph.FuncOp) -> list[TensorType]:
    """The tensor type of each result of `func` (a located error for any other type)."""
    output = func.function_type.output
    outputs = output.types if isinstance(output, TupleType) else (output,)
    tensors = [t for t in outputs if isinstance(t, TensorType)]
    if len(tensors) != len(outputs):
        raise error_at(
            func,
            f"@{func.sym_name.data}: a result of type "
            f"{format_type(output)} is not supported yet with symbolic dimensions",
        )
    return tensors


def returned_values(
    ftype: FunctionType, returned: Operation | None
) -> tuple[list[SSAValue], SSAValue | None]:
    """The graph value of each result, and the returned tuple literal (None for one
    tensor): its operands, in order, are the values (a located error otherwise)."""
    assert isinstance(returned, graph.ReturnOp) and returned.value is not None
    value = returned.value
    if not isinstance(ftype.output, TupleType):
        return [value], None
    owner = value.owner
    tree = owner.value.data if isinstance(owner, graph.LiteralOp) else None
    slots = tuple(("operand", k) for k in range(len(ftype.output.types)))
    if not isinstance(owner, graph.LiteralOp) or tree != ("tuple", slots):
        raise error_at(returned, "a tuple result: return a tuple literal of its elements' values")
    return list(owner.elements), value
