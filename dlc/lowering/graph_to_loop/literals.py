"""Static tensor literals in functions with symbolic dimensions (`lower-graph-to-loop`):
read-only flat buffers of their data (`loop.const_buffer`)."""

from __future__ import annotations

from typing import cast

import numpy as np
from xdsl.dialects.builtin import AnyDenseElement, BytesAttr, DenseIntOrFPElementsAttr
from xdsl.dialects.builtin import TensorType as BuiltinTensorType
from xdsl.ir import Block

from dlc.dialects import loop
from dlc.dialects.graph_literal import LitTree, dense_dtype, is_scalar_lit
from dlc.dialects.graph_types import TensorType
from dlc.lowering.tensor_to_loop.body import storage_type


def literal_bytes(tree: LitTree, t: TensorType) -> bytes | None:
    """The row-major bytes of a static literal of type `t`: a dense node's payload, or
    the leaves of a `<...>` tree in order (iteratively); None when an element is not a
    scalar literal (a value, a nested aggregate)."""
    if tree[0] == "dense":
        return tree[1]
    leaves: list[int | float | bool] = []
    stack: list[LitTree] = [tree]
    while stack:
        node = stack.pop()
        if is_scalar_lit(node):
            leaves.append(node[1])
        elif node[0] == "tensor":
            stack.extend(reversed(node[1]))
        else:
            return None
    if len(leaves) != t.num_elements:
        return None
    return np.array(leaves, dense_dtype(t.dt)).tobytes()


def dense_data(t: TensorType, raw: bytes) -> DenseIntOrFPElementsAttr:
    """`raw` as the data of a flat buffer of `t` (bool bytes 0 and 1, as its i8 storage)."""
    element = cast(AnyDenseElement, storage_type(t.dt))  # an integer or float type
    data_type = BuiltinTensorType(element, [t.num_elements])
    return DenseIntOrFPElementsAttr(data_type, BytesAttr(raw))


def drop_unused_literals(block: Block) -> None:
    """Erase the `loop.const_buffer`s of `block` nothing reads: a product's weights
    once it reads their copy packed at compile time (`dot.py`), which would otherwise
    be emitted, cached and loaded twice."""
    for op in [op for op in block.ops if isinstance(op, loop.ConstBufferOp)]:
        if not op.res.uses:
            op.detach()
            op.erase()
