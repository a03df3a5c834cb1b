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
    if ow >= vectors2 and (conv.strides == (1, 1) or _strided_direct(conv)):
        return False
    if oh * ow < vectors2:
        return False
    kernel = conv.kernel
    literal = kernel is None or isinstance(kernel.owner, tensor.ConstantOp)
    if not literal and conv.taps != (1, 1):
        return False
    depth = conv.channels * conv.taps[0] * conv.taps[1]
    return batch * depth * oh * ow * dtype_bytes(t.dt) <= MAX_COLS_BYTES


STRIDED_DIRECT_CHANNELS = 16
"""Input channels below which a convolution with long rows two elements apart (stride
2 along the row) keeps the register-tiled nest, its row read as every second element
(`vload2`, dlc/analysis/tensor_lanes.py): its columns would be a long, thin product.
CPU time at one thread against onnxruntime's, unfolded -> tiled (loaded Zen 3): 3 x 3
stride 2 of 3 -> 32 channels at 224 x 224 1.72x -> 0.94x, 7 x 7 3 -> 64 1.44x -> 1.20x;
but 64 -> 64 at 112 x 112 1.68x -> 2.09x, 128 -> 128 at 56 1.32x -> 2.04x and 1 x 1
256 -> 512 at 56 0.70x -> 2.43x: the unfolded product reuses each row read across
many channels."""


def _strided_direct(conv: Conv2d) -> bool:
    """Rows two elements apart and few input channels (`STRIDED_DIRECT_CHANNELS`)."""
    return conv.strides[1] == 2 and conv.channels < STRIDED_DIRECT_CHANNELS


def pixel_rows(conv: Conv2d) -> bool:
    """Whether the product's rows are the pixels and its columns the output channels
    (module docstring): fewer pixels than output channels, a literal or splat kernel."""
    _, channels, oh, ow = conv.domain
    kernel = conv.kernel
    literal = kernel is None or isinstance(kernel.owner, tensor.ConstantOp)
    return literal and oh * ow < channels
