"""Which convolutions `unfold-convolutions` unfolds on a target (`unfolds`: short or
strided rows, long rows the tiled nest serves badly, a `cols` buffer of at most
`MAX_COLS_BYTES`) and how its product is laid
out (`pixel_rows`). Why: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from xdsl.ir import Operation

from dlc.analysis.tensor_lanes import vector_pieces
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.passes.tensor.conv2d import Conv2d
from dlc.passes.tensor.schedule_conv import MIN_ACCUMULATORS, row_tile
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
    if ow >= vectors2 and conv.strides == (1, 1) and not _long_rows_pay(conv, target):
        return False
    if ow >= vectors2 and _strided_direct(conv):
        return False
    if oh * ow < vectors2:
        return False
    kernel = conv.kernel
    literal = kernel is None or isinstance(kernel.owner, tensor.ConstantOp)
    if not literal and conv.taps != (1, 1):
        return False
    depth = conv.channels * conv.taps[0] * conv.taps[1]
    return batch * depth * oh * ow * dtype_bytes(t.dt) <= MAX_COLS_BYTES


POINTWISE_DEPTH = 64
"""Input and output channels from which a 1 x 1 convolution of stride 1 over the image
itself (`pointwise`: its columns are the image, nothing is copied) is a product
whatever its rows. The tiled nest walks the whole input once per block of output
channels; the product's K and column blocks keep a block of it in cache for every
channel block.
CPU time per call at one thread against onnxruntime's, tiled -> product, on the
loaded Zen 3 (AVX2) host, best of 30 calls: ResNet-50's 512 -> 128 over 28 x 28
2.04x -> 0.98x, 128 -> 512 with batch norm and residual 1.36x -> 0.83x, 256 -> 64
over 56 x 56 1.33x -> 0.94x, 64 -> 256 with batch norm and residual 1.21x -> 0.80x;
but 16 -> 96 over 112 x 112 0.61x -> 1.07x, 32 -> 16 0.55x -> 0.92x (a short sum
per output: the tiled nest's loads are cheap) and 144 -> 24 over 56 x 56 with a
residual 0.74-0.87x -> 0.85-0.93x (4 channel blocks: the input walked 4 times)."""


def pointwise(conv: Conv2d) -> bool:
    """A 1 x 1 convolution of stride 1 reading the unpadded image: its columns are the
    image itself (no columns nest)."""
    batch, _, oh, ow = conv.domain
    x = conv.x.type
    image = isinstance(x, TensorType) and x.dims == (batch, conv.channels, oh, ow)
    return conv.taps == (1, 1) and conv.strides == (1, 1) and image


def _long_rows_pay(conv: Conv2d, target: Target) -> bool:
    """Whether a convolution of stride 1 whose rows fill two vectors or more unfolds:
    a deep pointwise one (`POINTWISE_DEPTH`), or one whose register tile
    (`schedule_conv.row_tile`) holds fewer than `MIN_ACCUMULATORS` or does not fit in
    the registers beside a row of loads and a broadcast. Rows of 28 with AVX2 are four
    vectors (8 + 8 + 8 + 4 lanes) of 2 channels (8 accumulators) or 3 (12, spilling).
    At one thread on the loaded Zen 3, CPU time against onnxruntime's, tiled ->
    unfolded: a 3 x 3 of 128 -> 128 over 28 x 28 1.33x -> 1.15x, a 1 x 1 of 40 -> 240
    with batch norm and sigmoid 1.65x -> 1.02x."""
    if pointwise(conv) and min(conv.channels, conv.domain[1]) >= POINTWISE_DEPTH:
        return True
    lanes = target.vector_bytes // dtype_bytes(conv.dtype)
    mr, vectors = row_tile(conv.domain[1], conv.domain[3], lanes, target)
    held = mr * vectors + vectors + 1  # accumulators, a row of loads, a broadcast
    return mr * vectors < MIN_ACCUMULATORS or held > target.vector_registers


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


PIXEL_ROWS_DEPTH = 256
"""Fewest products per output element (input channels x taps) at which pixel rows pay
whatever the pixel count. Their image is the product transposed by a nest of its own
(the element-wise chain after the convolution cannot ride on the product's stores as
an epilogue, as with channel rows), a pass over the output that costs as much as a
product of depth ~100. Kernel medians on one core (AMD EPYC Zen 5), pixel rows ->
channel rows: MobileNetV2's 1 x 1 expansion 96 -> 576 over 14 x 14 with its transposing
or padding nest 193 -> 170 µs; 160 -> 960 over 7 x 7 116 -> 181 µs (49 pixels: a
vector tail of 17 lanes, `COLUMN_USE`)."""

COLUMN_USE = 0.9
"""Below this share of the lanes of its column vectors in use (`column_use`), a product
with the pixels as columns wastes more than the transposing nest costs."""


def column_use(pixels: int, lanes: int) -> float:
    """The share of the lanes used by a row of `pixels` as vectors of `lanes`, its tail
    as narrower vectors of a power of two each (`tensor_lanes.vector_pieces`): 196
    pixels in vectors of 16 use 196 / 208, 49 use 49 / 64."""
    return pixels / (len(vector_pieces(pixels, lanes)) * lanes)


def pixel_rows(conv: Conv2d, target: Target) -> bool:
    """Whether the product's rows are the pixels and its columns the output channels
    (module docstring): fewer pixels than output channels, a literal or splat kernel,
    and either a deep sum (`PIXEL_ROWS_DEPTH`) or pixels that fill the target's vectors
    badly (`COLUMN_USE`)."""
    _, channels, oh, ow = conv.domain
    kernel = conv.kernel
    literal = kernel is None or isinstance(kernel.owner, tensor.ConstantOp)
    if not literal or oh * ow >= channels:
        return False
    depth = conv.channels * conv.taps[0] * conv.taps[1]
    lanes = target.vector_bytes // dtype_bytes(conv.dtype)
    calls, residual = _chain(conv.op)
    if depth >= PIXEL_ROWS_DEPTH and not residual:
        return True
    return column_use(oh * ow, lanes) < COLUMN_USE and not calls


CHAIN_LOOKAHEAD = 6
"""Element-wise computes after a convolution searched for a math function call (its
bias, a batch norm's computes, a residual add, the activation)."""


def _chain(op: tensor.ComputeOp) -> tuple[bool, bool]:
    """Whether an element-wise compute of `op`'s shape within `CHAIN_LOOKAHEAD` steps
    after it calls a math function, and whether one reads another tensor of that
    shape (a residual add). With pixel rows both run in the transposing nest: a
    function as a scalar call per element read across the product, where channel
    rows make it the product's vectorized epilogue (EfficientNet-B0's 1 x 1 expansion
    192 -> 1152 + SiLU over 7 x 7 with its depthwise 5 x 5 + SiLU, CPU time per call
    at one thread against onnxruntime's on the loaded Zen 3, pixel -> channel rows:
    1.62-1.71x -> 1.17-1.29x), and a residual as a third pass over the image (ResNet-50's
    1 x 1 256 -> 1024 over 14 x 14 with batch norm, residual and relu, depth 256:
    1.04-1.22x -> 0.82-0.90x; without the residual, 1024 -> 256 keeps pixel rows,
    0.95x against 1.02x)."""
    frontier, seen = [op], {op}
    calls = residual = False
    for _ in range(CHAIN_LOOKAHEAD):
        users = {u.operation for f in frontier for u in f.result.uses} - seen
        frontier = [
            c
            for c in users
            if isinstance(c, tensor.ComputeOp) and c.combinator is None and c.domain == op.domain
        ]
        seen |= set(frontier)
        for c in frontier:
            calls = calls or any(_calls(inner) for inner in c.body.walk())
            others = [v for v in c.inputs if v.owner not in seen]
            residual = residual or any(v.type == op.result.type for v in others)
    return calls, residual


def _calls(op: Operation) -> bool:
    return op.dialect_name() == "math" and op.name not in ("math.fma", "math.absf")
