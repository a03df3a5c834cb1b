"""Property readers and dimension checks shared by the `graph` op families
(`graph_tensor.py`, `graph_reduction.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute

from dlc.dialects.graph_module import InferenceError, Props
from dlc.dialects.graph_types import TensorType, format_type


def ints(attr: Attribute | None) -> list[int]:
    """The Python ints of an `ArrayAttr[IntAttr]` property (empty when absent)."""
    if attr is None:
        return []
    assert isinstance(attr, ArrayAttr)
    return [x.data for x in attr.data]


def int_prop(props: Props, key: str) -> int:
    attr = props[key]
    assert isinstance(attr, IntAttr)
    return attr.data


def int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(v) for v in values])


def check_dims(opcode: str, x: TensorType, dims: Sequence[int], allow_empty: bool = False) -> None:
    if not dims and not allow_empty:
        raise InferenceError(f"{opcode}: needs at least one dimension")
    for d in dims:
        if not 0 <= d < x.rank:
            raise InferenceError(f"{opcode}: dimension {d} out of range for {format_type(x)}")
    if len(set(dims)) != len(dims):
        raise InferenceError(f"{opcode}: duplicate dimensions {list(dims)}")
