"""Which convolutions `unfold-convolutions` unfolds on a target (`unfolds`: short or
strided rows, a `cols` buffer of at most `MAX_COLS_BYTES`) and how its product is laid
out (`pixel_rows`). Why: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.passes.tensor.conv2d import Conv2d
from dlc.target import Target

MAX_COLS_BYTES = 32 << 20
"""Largest `cols` buffer; larger convolutions keep the tiled nest."""


def unfolds(conv: Conv2d, target: Target) -> bool:
    """Whether `conv` becomes cols + a product on `target` (module docstring)."""
    t = conv.op.result.type
    assert isinstance(t, TensorType)
    if t.dt not in ("f32", "f64"):
        return False
    vectors2 = 2 * target.vector_bytes // dtype_bytes(t.dt)  # two vectors, in elements
    batch, _, oh, ow = t.dims
    if ow >= vectors2 and conv.strides == (1, 1):
        return False
    if oh * ow < vectors2:
        return False
    kernel = conv.kernel
    literal = kernel is None or isinstance(kernel.owner, tensor.ConstantOp)
    if not literal and conv.taps != (1, 1):
        return False
    depth = conv.channels * conv.taps[0] * conv.taps[1]
    return batch * depth * oh * ow * dtype_bytes(t.dt) <= MAX_COLS_BYTES


def pixel_rows(conv: Conv2d) -> bool:
    """Whether the product's rows are the pixels and its columns the output channels
    (module docstring): fewer pixels than output channels, a literal or splat kernel."""
    _, channels, oh, ow = conv.domain
    kernel = conv.kernel
    literal = kernel is None or isinstance(kernel.owner, tensor.ConstantOp)
    return literal and oh * ow < channels
