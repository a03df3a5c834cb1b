"""The default schedule policy of the `schedule` pass: loop orders, register and cache
tiles, parallel loops and fused multiply-adds for one `tensor.compute` at a time
(`schedule.py` has the pass and the fusion groups; its docstring states the policy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from dlc.analysis.tensor_lanes import lane_plan
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.tensor.schedule_blocks import column_blocks
from dlc.target import Target

MAX_BODY_OPS = 16  # larger bodies keep the plain i-k-j schedule
MIN_WORK = 1 << 16  # M * N * K below this: the plain schedule is as good
K_BLOCK = 256  # KC: the B block K_BLOCK x N stays in L2 across the row blocks
ROWS = 6  # MR of a 16-register target (12 accumulators + A broadcasts + B loads)
ROWS_32 = 12  # MR of a 32-register (AVX-512) target: 24 accumulators, 12x2 vectors


def depends_on(value: SSAValue, targets: AbstractSet[SSAValue]) -> bool:
    """Whether `value` is computed from one of `targets` (each value visited once: index
    expressions share subexpressions, and a walk of every path is exponential)."""
    stack, seen = [value], {value}
    while stack:
        v = stack.pop()
        if v in targets:
            return True
        if isinstance(v.owner, Operation):
            for operand in v.owner.operands:
                if operand not in seen:
                    seen.add(operand)
                    stack.append(operand)
    return False


def _walks(index: SSAValue, iv: SSAValue) -> bool:
    """`index` is `iv` or `iv + e` with `e` independent of `iv` (a unit stride)."""
    if index is iv:
        return True
    owner = index.owner
    if not isinstance(owner, Operation) or owner.name != "arith.addi":
        return False
    lhs, rhs = owner.operands
    return (lhs is iv and not depends_on(rhs, {iv})) or (rhs is iv and not depends_on(lhs, {iv}))


def _last(dims: Sequence[int]) -> int:
    """The last axis longer than 1 (the last when none is): axes of 1 after it (a
    global pooling's kept H and W) do not change which axis walks memory."""
    return max((a for a, n in enumerate(dims) if n > 1), default=len(dims) - 1)


def reduction_outer_pays(op: tensor.ComputeOp) -> bool:
    """Step 1 of the module docstring for `op`."""
    if op.combinator is None or op.init is not None:
        return False
    if not op.domain or not op.reduction_extents or op.domain[_last(op.domain)] < 8:
        return False
    args = op.body.block.args
    last = args[_last(op.domain)]
    reduction_args = set(args[len(op.domain) :])
    if float_sum(op) and len(op.domain) >= 2 and not _reads_along(op, last):
        return True  # a product with a splat matrix (fill weights): tiled as a real one
    strided_row = False
    for read in op.body.block.ops:
        if not isinstance(read, tensor.ReadOp) or not read.indices:
            continue
        dims = read.tensor.type.dims if isinstance(read.tensor.type, TensorType) else ()
        *outer, inner = read.indices[: _last(dims) + 1] if dims else read.indices
        if any(depends_on(i, {last}) for i in outer):
            return False  # the last output axis would stride this operand
        if _walks(inner, last) and any(depends_on(i, reduction_args) for i in outer):
            strided_row = True
    return strided_row


def _reads_along(op: tensor.ComputeOp, iv: SSAValue) -> bool:
    """Some read of `op`'s body has an index depending on `iv`."""
    reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp)]
    return any(depends_on(i, {iv}) for r in reads for i in r.indices)


def default_order(op: tensor.ComputeOp, target: Target) -> list[str]:
    """Output loops then reduction loops, or the reduction-outer order (step 1)."""
    outputs = [f"d{i}" for i in range(len(op.domain))]
    reductions = [f"r{i}" for i in range(len(op.reduction_extents))]
    if not reduction_outer_pays(op):
        return [*outputs, *reductions]
    keep = _last(op.domain)
    if len(reductions) > 1:  # short tap loops: amortize them over a 2-D accumulator block
        block = dtype_bytes(op.result.type.dt) * math.prod(op.domain[keep:])
        while keep > 0 and block * op.domain[keep - 1] <= target.l1_bytes // 2:
            if _strides(op, keep - 1):
                break
            keep -= 1
            block *= op.domain[keep]
    return [*outputs[:keep], *reductions, *outputs[keep:]]


def _strides(op: tensor.ComputeOp, axis: int) -> bool:
    """Some read uses output axis `axis` in its last (contiguous) index."""
    iv = op.body.block.args[axis]
    reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp) and r.indices]
    return any(depends_on(r.indices[-1], {iv}) for r in reads)


def plain_schedule(op: tensor.ComputeOp, order: list[str]) -> ScheduleAttr:
    """Loops in `order` (left out when it is the default)."""
    outputs = [f"d{i}" for i in range(len(op.domain))]
    default = [*outputs, *(f"r{i}" for i in range(len(op.reduction_extents)))]
    return ScheduleAttr(order=[] if order == default else order)


def kept_outside(op: tensor.ComputeOp) -> int:
    """Output loops before the first reduction loop (all of them for element-wise)."""
    assert op.schedule is not None
    n = 0
    for loop in op.schedule.loops(op.domain, op.reduction_extents):
        if loop.is_reduction or loop.name != f"d{n}":
            break
        n += 1
    return n


@dataclass(frozen=True)
class DotTiles:
    """Register and cache tiles of a dot-like compute: rows `mr`, columns `nr`, `kc`;
    `lanes` per vector when the columns are vectorized (0: left to LLVM); column blocks
    of `nc` (0: none) around the K blocks; `pack`: B copied into NR-wide panels
    (`pack_pays`)."""

    mr: int
    nr: int
    kc: int
    lanes: int
    nc: int = 0
    pack: bool = False


def dot_tiles(op: tensor.ComputeOp, target: Target) -> DotTiles | None:
    """Step 3 of the module docstring, or None to keep the reduction-outer order."""
    t = op.result.type
    if not isinstance(t, TensorType) or t.dt not in ("f32", "f64") or op.combinator is None:
        return None
    if op.combinator.data != "add" or op.init is not None:
        return None
    dims, extents = op.domain, op.reduction_extents
    if len(extents) != 1 or not dims or op.schedule is None or op.schedule.fusion is not None:
        return None
    if kept_outside(op) != len(dims) - 1 or len(op.body.block.ops) > MAX_BODY_OPS:
        return None
    n, k = dims[-1], extents[0]
    m = dims[-2] if len(dims) >= 2 else 1
    width = target.vector_bytes // dtype_bytes(t.dt)
    if n < 2 * width or m * n * k < MIN_WORK or m == 1:
        return None  # a vector x matrix product streams B row by row (i-k-j) best
    nr, rows = tile_shape(target, n, t.dt)
    mr = min(rows, m)
    lanes = width if isinstance(lane_plan(op, len(dims) - 1), dict) else 0
    kc = k_block(k, n * dtype_bytes(t.dt), target)
    nc = column_blocks(n, n_block(kc, dtype_bytes(t.dt), nr, target), nr) if kc < k else 0
    b = packed_operand(op)
    constant = b is not None and isinstance(op.inputs[b].owner, tensor.ConstantOp)
    pack = pack_pays(m, n % nr, nc, lanes, constant, target.vector_registers, target.split_vectors)
    return DotTiles(mr, nr, kc, lanes, nc, pack)


def tile_shape(target: Target, n: int, dt: str) -> tuple[int, int]:
    """(NR, MR): the columns and rows of the register tile of a product with `n`
    columns of `dt` on `target` (NR is also the width of B's packed panels).

    Two vectors of 12 rows with 32 registers (6 rows with 16): 24 (12) accumulators,
    12 (6) broadcasts of A and 2 loads of B per K step. Where 512-bit operations run
    as two 256-bit halves (`Target.split_vectors`: Zen 4) and a row of the output
    holds four whole vectors, four vectors of 6 rows instead: the same 24
    accumulators with half the broadcasts, and only 6 rows of A in flight, which an
    8-way L1 keeps even when A's rows are 4 KiB apart (12 rows at a power-of-two
    stride fall into one set and evict each other every K step). Measured on the
    2-core Zen 4 EPYC, one thread, GFLOP/s, 12 x 32 -> 6 x 64, both unpacked
    (alternating in one process; 1024^3 quiet, the others while a tuning run used the
    other core): 1024^3 89 -> 100, 64 x 1024 x 1024 85 -> 106, 1000^3 94 -> 100,
    64 x 784 x 256 105 -> 101, 256 x 1000 x 48 (2 vectors: unchanged) 112. BLIS's
    Zen 4 sgemm kernel is 6 x 64 as well; its Skylake-X kernel is 12 x 32."""
    width = target.vector_bytes // dtype_bytes(dt)
    if target.split_vectors and n >= 4 * width:
        return 4 * width, 6
    return 2 * width, ROWS_32 if target.vector_registers >= 32 else ROWS


def pack_pays(
    m: int, tail: int, nc: int, lanes: int, constant: bool, registers: int, split: bool = False
) -> bool:
    """Whether B is packed into NR-wide panels (`pack`, carried out by
    dlc/lowering/tensor_to_loop/pack.py), for vectorized tiles: always for a
    constant B (packed at compile time, free at run time); else with column blocks
    (K blocked: B larger than L2), where each thread packs its own KC x NC block,
    reused by all M / MR row blocks (at least `PACK_ROWS` rows), and only when the
    columns leave a `tail` (N not a multiple of NR), which the zero-padded panels
    remove from the microkernel. On 16-register targets (AVX2) and on Zen 4 with
    enough rows (`split`, `PACK_ROWS_SPLIT`) packing pays without a tail too. The
    measurements behind each case: docs/performance.md, "Measurements behind the
    defaults"."""
    if not lanes:
        return False
    blocked = bool(nc) and m >= PACK_ROWS
    wide = split and m >= PACK_ROWS_SPLIT
    return constant or (blocked and (tail > 0 or registers < 32 or wide))


PACK_ROWS = 24
"""Rows below which packing a block of B costs more than its contiguous reads save."""

PACK_ROWS_SPLIT = 256
"""Rows from which packing B pays without a column tail on Zen 4 (`pack_pays`)."""


def packed_operand(op: tensor.ComputeOp) -> int | None:
    """The input of a matrix product read along the columns and the reduction, not
    the rows (B), when the body reads it once; else None."""
    if len(op.domain) != 2 or len(op.reduction_extents) != 1:
        return None
    rows, columns, k = op.body.block.args
    for n, value in enumerate(op.inputs):
        reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp) and r.tensor is value]
        if len(reads) != 1:
            continue
        (read,) = reads
        if any(depends_on(i, {rows}) for i in read.indices):
            continue
        if any(depends_on(i, {columns}) for i in read.indices) and any(
            depends_on(i, {k}) for i in read.indices
        ):
            return n
    return None


def k_block(k: int, row_bytes: int, target: Target) -> int:
    """KC for a K x N operand B of `row_bytes` per row: `K_BLOCK`, or all of K when B
    fits in L2. K blocks keep a block of B in L2 across the row blocks; a B that fits
    stays there anyway, and each K block outside the parallel row loop forks the
    threads again (measured: docs/performance.md, "Measurements behind the defaults")."""
    return K_BLOCK if k * row_bytes > target.l2_bytes else k


def n_block(kc: int, dt_bytes: int, nr: int, target: Target) -> int:
    """NC when K is blocked (GOTO's column blocks): a multiple of NR such that one
    thread's KC x NC block of B takes a quarter of L2 (256 columns of f32 with KC = 256
    and 1 MiB), so the threads, each on its own column blocks, keep theirs in their own
    L2 and fork once per call (measured: docs/performance.md, "Measurements behind
    the defaults")."""
    return max(nr, target.l2_bytes // 4 // (kc * dt_bytes) // nr * nr)


def tiled_schedule(op: tensor.ComputeOp, tiles: DotTiles) -> ScheduleAttr:
    """The tiled nest: batch loops, column blocks (`nc`), K blocks, row blocks and
    column panels, then the K loop over the unrolled MR x NR register tile, its
    columns in vectors."""
    rank = len(op.domain)
    matrix = rank >= 2
    j = f"d{rank - 1}"
    batch = [f"d{i}" for i in range(rank - 2 if matrix else 0)]
    blocks = [f"{j}.0"] if tiles.nc else []
    panel, lanes = (f"{j}.1", f"{j}.2") if tiles.nc else (f"{j}.0", f"{j}.1")
    sizes: dict[str, list[int]] = {j: [tiles.nc, tiles.nr] if tiles.nc else [tiles.nr]}
    outer, inner = [panel], [lanes]
    rows = op.domain[-2] if matrix else 1
    if matrix:
        i = f"d{rank - 2}"
        sizes[i] = [tiles.mr]
        inner = [f"{i}.1", *inner]
        # the outer of the two block loops is the parallel one (without column blocks):
        # the one with more blocks splits more evenly over the threads and leaves no
        # serial remainder (docs/performance.md, "Measurements behind the defaults")
        panels = -(-(tiles.nc or op.domain[-1]) // tiles.nr)
        outer = [panel, f"{i}.0"] if panels > -(-rows // tiles.mr) else [f"{i}.0", panel]
    # K blocks keep the B block in L2 across row blocks: with one row block (a
    # matrix x vector product) there is nothing to keep, only parallel regions to fork.
    k_blocks = op.reduction_extents[0] > tiles.kc and rows > tiles.mr
    if k_blocks:
        sizes["r0"] = [tiles.kc]
    k_outer, k_inner = (["r0.0"], "r0.1") if k_blocks else ([], "r0")
    order = [*batch, *blocks, *k_outer, *outer, k_inner, *inner]
    vector = (lanes, tiles.lanes) if tiles.lanes else None
    operand = packed_operand(op) if tiles.pack else None
    pack = [operand] if operand is not None else []
    return ScheduleAttr(tiles=sizes, order=order, unroll=inner, vectorize=vector, pack=pack)


TRANSPOSE_BLOCK = 16
"""Side of the square blocks of a transposing element-wise nest (16 f32: one 64-byte
cache line per row of the block; 16 measured better than 32 and 64)."""


def transpose_schedule(op: tensor.ComputeOp) -> ScheduleAttr | None:
    """Square blocks over the last axis and the axis `a` along which an operand is read
    contiguously (its last index follows `a`, not the last axis) of an element-wise
    nest (`transpose`, a transposed dot operand being materialized): the plain order
    walks that operand with a stride of a whole row per element, a cache line and often
    a page per element; in blocks each line read is used whole (measured:
    docs/performance.md). Loops: the other axes, then a.0, last.0, a.1, last.1; with a
    last axis shorter than two blocks, the other axes, a, last. None when nothing reads
    across, the nest is small or in a group."""
    rank = len(op.domain)
    if op.combinator is not None or rank < 2 or op.schedule is None:
        return None
    if op.schedule.fusion is not None or op.schedule.order:
        return None
    args = op.body.block.args
    last = args[rank - 1]
    # a read that does not depend on the last axis is loop-invariant there (an index
    # read by a gather, a broadcast), not a strided walk
    reads = [
        r
        for r in op.body.block.ops
        if isinstance(r, tensor.ReadOp) and any(depends_on(x, {last}) for x in r.indices)
    ]
    across = [
        a
        for a in range(rank - 1)
        for r in reads
        if depends_on(r.indices[-1], {args[a]}) and not depends_on(r.indices[-1], {last})
    ]
    t = TRANSPOSE_BLOCK
    if not across or op.domain[across[0]] < 2 * t:
        return None
    i, j = f"d{across[0]}", f"d{rank - 1}"
    others = [f"d{a}" for a in range(rank - 1) if a != across[0]]
    if op.domain[-1] < 2 * t:
        # short last axis: `a` just outside it uses the lines read across whole (an
        # unfolded convolution's image read from its pixel-rows product)
        return ScheduleAttr(order=[*others, i, j]) if across[0] < rank - 2 else None
    order = [*others, f"{i}.0", f"{j}.0", f"{i}.1", f"{j}.1"]
    return ScheduleAttr(tiles={i: [t], j: [t]}, order=order)


def float_sum(op: tensor.ComputeOp) -> bool:
    """A float `add` reduction of products (`dot`, `convolve`): its multiply-adds can
    fuse (a plain sum has nothing to fuse)."""
    t = op.result.type
    if op.combinator is None or op.combinator.data != "add":
        return False
    if not isinstance(t, TensorType) or t.dt not in ("f16", "f32", "f64"):
        return False
    last = op.body.block.last_op
    return isinstance(last, tensor.YieldOp) and isinstance(last.value.owner, arith.MulfOp)


PARALLEL_WORK = 1 << 18
"""Scalar operations (iteration points x body ops) below which a nest stays on one
thread: forking and joining a parallel region costs microseconds."""


def work(op: tensor.ComputeOp) -> int:
    """Iteration points times body ops: the nest's work, roughly."""
    points = 1
    for n in (*op.domain, *op.reduction_extents):
        points *= n
    return points * max(1, len(op.body.block.ops))


MAX_FORKS = 16
"""Reduction iterations outside a parallel loop above which it is not chosen: each
one forks and joins the threads again (K blocks outside a tiled product's row blocks
are a few; an i-k-j product's whole K loop is too many)."""


def parallel_loop(op: tensor.ComputeOp, limit: int | None = None) -> str | None:
    """The loop that runs on several threads: the first output loop of the schedule
    (among the first `limit` loops) with at least two iterations that is not
    unrolled and is inside at most `MAX_FORKS` reduction iterations. Its iterations
    write disjoint outputs, each folded on one thread, so results do not depend on the
    thread count."""
    assert op.schedule is not None
    loops = op.schedule.loops(op.domain, op.reduction_extents)[:limit]
    forks = 1
    for lp in loops:
        iterations = -(-lp.block // lp.step)
        if lp.is_reduction:
            forks *= iterations
            if forks > MAX_FORKS:
                return None
        elif iterations >= 2 and lp.name not in op.schedule.unrolled_loops:
            return lp.name
    return None
