"""Register tiles of convolution-like computes for the `schedule` pass (step 3 of
`schedule.py`'s docstring): an `add` reduction of products over several reduction
axes (a convolution's channels and taps) whose last output axis is read at unit
stride (`lane_plan`) gets an unrolled tile of output channels x vectors of columns,
its accumulators carried in registers through all the reduction loops; a strided row
(no vector loads) gets a tile of scalars instead."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dlc.analysis.tensor_lanes import VECTOR_READS, lane_plan, vector_pieces
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.tensor.schedule_blocks import rows_first
from dlc.passes.tensor.schedule_policy import depends_on, float_sum
from dlc.target import Target

MAX_BODY_OPS = 16  # larger bodies keep the reduction-outer order (code size)
MIN_WORK = 1 << 16  # output points x reduction points below this: not tiled
ACCUMULATORS = 24  # vector accumulators of a 32-register target (12 x 2, as for dot)
ACCUMULATORS_16 = 12  # of a 16-register target (6 x 2)
SCALAR_COLUMNS = 4  # columns of a scalar tile (a strided row); channels fill the registers
SCALAR_SPARE = 4
"""Registers a scalar tile leaves free of accumulators (the loaded x value, the kernel
value and temporaries): 16 accumulators in 16 registers spill. Depthwise 3 x 3
stride-2 convolutions with AVX2 (4 -> 3 channels x 4 columns), CPU time per call at
one thread against onnxruntime's on the loaded Zen 3 host: 96 channels 112 -> 56
1.38x -> 1.31x, 144 channels 56 -> 28 1.49x -> 1.21x."""
MIN_ACCUMULATORS = 10
"""Vector accumulators below which a tile leaves the FMA units waiting (two pipes of 4
cycles' latency want 8 chains in flight, plus the loads between them): a channel
count's divisor that gives fewer (4 x 2 of 64 channels with AVX2) gives way to the
whole budget and a channel tail where the registers hold it (`_channels`)."""


@dataclass(frozen=True)
class ConvTiles:
    """The register tile of a convolution-like compute: `mr` values of output axis
    `channel` (each sharing the tile's vector loads; its own operand values are
    broadcast), `rows` values of output axis `row` (the one before the last; 1: not
    tiled) and `nr` columns of the last output axis in vectors of `lanes`."""

    channel: int
    mr: int
    row: int
    rows: int
    nr: int
    lanes: int


def _channel_axis(op: tensor.ComputeOp) -> int | None:
    """The output axis (before the last) that a broadcast read (one not depending on
    the last axis) depends on, preferring one the row reads do not depend on: its tile
    values share those loads (a convolution's output channels). An axis no read
    depends on at all (a kernel that is one repeated value, folded into the body) is
    the last resort: its tile values share every load too."""
    args = op.body.block.args
    reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp)]
    last = args[len(op.domain) - 1]
    rows = {r for r in reads if any(depends_on(i, {last}) for i in r.indices)}
    found: list[tuple[bool, bool, bool, int]] = []
    for axis in range(len(op.domain) - 1):
        uses = [r for r in reads if any(depends_on(i, {args[axis]}) for i in r.indices)]
        if not uses and rows:
            found.append((True, op.domain[axis] > 1, False, axis))
        elif any(r not in rows for r in uses):
            shared = not any(r in rows for r in uses)
            found.append((shared, op.domain[axis] > 1, True, axis))
    return max(found)[3] if found else None


def _sum_of_products(op: tensor.ComputeOp) -> bool:
    """A float `add` reduction of products (or a `max` / `min` window: pooling) over
    several axes, in no group, small body."""
    t = op.result.type
    if not isinstance(t, TensorType) or t.dt not in ("f32", "f64"):
        return False
    if not float_sum(op) and not max_window(op):
        return False  # a plain sum (average pooling) has no broadcast operand to share
    if op.init is not None or len(op.reduction_extents) < 2 or len(op.domain) < 2:
        return False
    if op.schedule is None or op.schedule.fusion is not None:
        return False
    return len(op.body.block.ops) <= MAX_BODY_OPS and not walks_rows(op)


def max_window(op: tensor.ComputeOp) -> bool:
    """A `max` or `min` reduction (max pooling): each output folds its window in the
    same order in a tile as in the plain nest (bit for bit), and a tile of channels x
    vectors of columns keeps independent chains where the plain nest folded one point
    at a time over a 3 x 3 window (ResNet-50's 3 x 3 / 2 max pooling of 64 x 112 x
    112: 0.40 -> 0.13 ms per call, CPU time on one Zen 5 core; onnxruntime 0.11)."""
    return op.combinator is not None and op.combinator.data in ("max", "min")


def walks_rows(op: tensor.ComputeOp) -> bool:
    """The innermost reduction index is the last index of every read that uses it and
    has no other use: the reduction walks rows of memory (a spatial mean of products,
    such as a squeeze-and-excitation's pooling of `x * sigmoid(x)`). Its one
    accumulator becomes partial vector sums in the lowering (`mark_reassociable`),
    where a tile of 4 channels was 4 scalar chains (a 32-channel 112 x 112 depthwise
    convolution + SiLU + squeeze-and-excitation: 0.74 -> 0.37 ms per call, CPU time
    on one Zen 5 core)."""
    iv = op.body.block.args[-1]
    uses = [u.operation for u in iv.uses]
    return bool(uses) and all(
        isinstance(r, tensor.ReadOp) and r.indices[-1] is iv and list(r.indices).count(iv) == 1
        for r in uses
    )


def _block(extent: int, cap: int) -> int:
    """At most `cap` (at least 1), a divisor of `extent` when one is close (no tail)."""
    cap = min(extent, max(1, cap))
    even = [d for d in range(cap, cap // 2, -1) if extent % d == 0]
    return even[0] if even else cap


def conv_tiles(op: tensor.ComputeOp, target: Target) -> ConvTiles | None:
    """The register tile of `op`, or None to keep its schedule (module docstring)."""
    if not _sum_of_products(op):
        return None
    points = 1
    for n in (*op.domain, *op.reduction_extents):
        points *= n
    channel = _channel_axis(op)
    if channel is None and max_window(op) and len(op.domain) >= 3:
        channel = len(op.domain) - 3  # a pooling's channels: independent chains
    if channel is None or points < MIN_WORK:
        return None
    width, row = op.domain[-1], len(op.domain) - 2
    plan = lane_plan(op, len(op.domain) - 1)
    if isinstance(plan, str) or not VECTOR_READS & set(plan.values()):  # scalars
        nr = min(width, SCALAR_COLUMNS)
        cap = min(op.domain[channel], (target.vector_registers - SCALAR_SPARE) // nr)
        mr = _block(op.domain[channel], cap)
        return ConvTiles(channel, mr if mr * nr >= MIN_ACCUMULATORS else cap, row, 1, nr, 1)
    lanes = target.vector_bytes // dtype_bytes(op.result.type.dt)
    nr = row_columns(width, lanes)
    rows = 1
    if nr < 2 * lanes and row != channel:  # short rows: rows of the axis before too
        rows = min(op.domain[row], max(1, 2 * lanes // nr))
    mr = _channels(op.domain[channel], rows * len(vector_pieces(nr, lanes)), target)
    return ConvTiles(channel, mr, row, rows, nr, lanes)


def row_columns(width: int, lanes: int) -> int:
    """The tile's columns for rows of `width`: the whole row when it fits in 4 vectors
    of `lanes` (no column tail), else two vectors."""
    return width if width <= 4 * lanes else 2 * lanes


def row_tile(channels: int, width: int, lanes: int, target: Target) -> tuple[int, int]:
    """(MR, vectors per channel) of the tile of a convolution over `channels` output
    channels and rows of `width` (at least two vectors of `lanes`) on `target`."""
    vectors = len(vector_pieces(row_columns(width, lanes), lanes))
    return _channels(channels, vectors, target), vectors


def _channels(extent: int, vectors: int, target: Target) -> int:
    """MR for a tile of `vectors` accumulators per channel: the accumulator budget,
    a divisor of `extent` when one is close (no channel tail), unless that divisor
    leaves fewer than `MIN_ACCUMULATORS` and the whole budget fits in the registers
    beside a row of loads and a broadcast (ResNet-50's 1 x 1 convolutions of 64 and
    256 channels with AVX2: 4 -> 6 channels, 1.29x -> 1.07x of onnxruntime's CPU
    time for 256 -> 64 over 56 x 56; 4 vectors of 3 channels spill: not taken)."""
    budget = ACCUMULATORS if target.vector_registers >= 32 else ACCUMULATORS_16
    cap = min(extent, max(1, budget // vectors))
    mr = _block(extent, cap)
    if mr * vectors >= MIN_ACCUMULATORS or cap * vectors + vectors + 1 > target.vector_registers:
        return mr
    return cap


def _blocks(op: tensor.ComputeOp, tiles: ConvTiles) -> tuple[int, int, int]:
    """Iterations of the loops outside the channel blocks, of the channel blocks and
    of the row loop."""
    outside = math.prod(op.domain[: tiles.channel])
    channels = -(-op.domain[tiles.channel] // tiles.mr)
    return outside, channels, -(-op.domain[tiles.row] // tiles.rows)


def conv_schedule(op: tensor.ComputeOp, tiles: ConvTiles) -> ScheduleAttr:
    """Batch and spatial loops, the channel blocks, the rows (before the channel
    blocks when those are few: `rows_first`), the column panels, then the reduction
    loops in their order around the unrolled channels x rows x columns tile, its
    columns in vectors."""
    rank = len(op.domain)
    j, c, h = f"d{rank - 1}", f"d{tiles.channel}", f"d{tiles.row}"
    sizes: dict[str, list[int]] = {c: [tiles.mr], j: [tiles.nr]}
    if tiles.rows > 1:
        sizes[h] = [tiles.rows]
    outer: list[str] = []
    for axis in range(rank - 1):
        name = f"d{axis}"
        if name != c:
            outer.append(f"{name}.0" if name in sizes else name)
    outer.insert(tiles.channel, f"{c}.0")  # channel blocks stay in axis order
    if tiles.row > tiles.channel and rows_first(*_blocks(op, tiles)):  # `rows_first`
        row_loop = outer.pop(tiles.row)
        outer.insert(tiles.channel, row_loop)
    inner = [f"{c}.1", *([f"{h}.1"] if tiles.rows > 1 else []), f"{j}.1"]
    reductions = [f"r{i}" for i in range(len(op.reduction_extents))]
    order = [*outer, f"{j}.0", *reductions, *inner]
    vector = (f"{j}.1", tiles.lanes) if tiles.lanes > 1 else None
    return ScheduleAttr(tiles=sizes, order=order, unroll=inner, vectorize=vector)
