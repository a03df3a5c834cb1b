"""schedule: the default schedule policy, written as `#schedule.nest` attributes.

For every `tensor.compute` without a schedule (a user's or a tuner's schedule is kept
as written), in three steps, from a `Target` (dlc/target.py):

1. **Loop order.** A `dot`-like reduction whose last output axis walks an operand
   row contiguously while a reduction axis strides that operand (`x[i, k] * w[k, j]`,
   a convolution's `x[n, c, h + kh, w + kw]`) runs its reduction loops outside the
   last output loop (i-k-j order): the inner loop is contiguous and vectorizes. With
   several reduction axes (a convolution's channels and short tap loops) more output
   loops move inside too, while the accumulator block they cover fits in half of L1
   (the 56 x 56 plane of W5), so the tap loops' overhead is spread over a 2-D block.
   The fold order per element is unchanged, so results are bit-identical. A product
   with a splat matrix (ONNX fill weights, folded into the body) reads nothing along
   its columns and takes this order too, so step 3 tiles it as a real product (it
   summed each row again for every column: MatMul 128 x 768 x 3072, 17.7 -> 8.8 ms).
2. **Fusion groups** (with `group=true`, the default). A maximal run of consecutive
   computes becomes one group, lowered to ONE loop nest (`tensor_groups.py`): its
   base is the shortest member domain (counting a reduction-outer member by the
   output loops it keeps outside its reduction loops), which must prefix every
   member's domain. Inner members (longer domain) either feed the next reduction
   member (`feeds`: same extra axes as its reduction axes, read by it only at the
   current point), evaluated and stored inside that reduction's loop, or get their
   own inner loops. A member whose every use is a register read needs no buffer
   (`internal`); a reduction-outer member read only by the next same-shape
   element-wise member accumulates in that member's buffer (`relu(dot + b)` needs no
   extra buffer). For the softmax chain of W2 the whole function is one group with an
   empty base; a row-wise softmax (W3) or LayerNorm + GELU (W7) is one nest over the
   rows.
   A product that gets register tiles (step 3) joins no group: in a group it would
   run one untiled row at a time, streaming its whole B operand once per row (W3 at
   B = 64 took 220 µs that way, 93 µs tiled with its epilogue as a nest of its own).
3. **Register and cache tiles** for large `add` reductions in the reduction-outer
   order with more than one row (`dot_tiles`; a vector x matrix product streams B
   row by row in i-k-j order, which beats a column panel's strided walk over B): an
   `MR x NR` register tile (NR two of the target's vectors: 32 f32 with AVX-512, 16
   with AVX2; MR rows so the 2·MR accumulators fill most of the vector registers: 12
   of 32, 6 of 16; on Zen 4, whose 512-bit arithmetic runs on 256-bit halves, 6 rows
   of four vectors when a row holds them: `tile_shape`), unrolled and carried in
   registers through the K loop, which is blocked by `K_BLOCK` so the B block stays in L2 across row blocks (not when B
   fits in L2 or there is one row block: `k_block`); then GOTO's column blocks of
   `n_block` columns go around the K blocks and are the parallel loop, so each thread
   keeps its own block of B in its own L2 (W4 on 2 threads: 406 -> 462 GFLOP/s, 1
   thread 237 -> 245). Row blocks run outside column
   panels, or inside when there are more panels (the outer loop is the parallel one:
   more blocks split more evenly, with no serial remainder). The tile's columns are vectors of the target's width
   (`vectorize`) when the body allows (`dlc.dialects.tensor_lanes`); with `fma`
   (float sums) each step is one fused multiply-add per vector. B is packed into
   zero-padded NR-wide panels (`pack`, `pack_pays`) when it is a literal (at compile
   time, free at run time) or when K and columns are blocked, there are at least
   `PACK_ROWS` rows to reuse each packed block and N is not a multiple of NR: the
   zero-padded panels leave the microkernel no column tail (1023^3 on one thread:
   227 -> 249 GFLOP/s); without a tail (W4) packing measured 2-4% slower.

   **Convolutions** (`schedule_conv.py`): a float `add` reduction of products over
   several reduction axes (ci, kh, kw) whose last output axis `w` is read at unit
   stride gets a register tile of MR output channels x a row of columns, unrolled:
   each tap loads the row of x once as vectors and multiplies it by MR broadcast
   kernel values (the channel axis is the one a broadcast read depends on and the
   vector reads do not). The row is the whole of `w` when it fits in 4 vectors (56
   with AVX-512: 16 + 16 + 16 + 8 lanes, no column tail), else two vectors; a row
   shorter than two vectors takes several rows of the axis before it. MR fills the
   accumulator budget (24 vectors of 32 registers, 12 of 16) and prefers a divisor
   of the channel count (no channel tail: W5 gets 4 x 56). The loops run batch,
   channel blocks, spatial rows, column panels, then the reduction loops in their
   order around the tile, so each element is folded in the reference order (without
   `fma` the bits of the plain nest). A splat kernel (folded into the body: ONNX
   `ConstantOfShape` weights) leaves no read depending on the channels: then the
   channel axis is one no read depends on (W8 with filled weights ran its convolutions
   untiled, 16.6 ms for W5's shape). A tiled convolution joins no fusion group. Why: the reduction-outer order of step 1
   streams the 56 x 56 accumulator plane through L1 for each of the 576 taps, a load
   and a store per multiply-add (W5: 6.1 ms on one core); in registers the tile is
   FMA-bound, 1.1 ms (210 GFLOP/s of a ~230 peak per core, zmm; 2.3 ms with AVX2
   ymm), with a first compile of ~0.35 s. A strided or gathered row (stride 2) is
   not a vector load: it gets a scalar tile of 4 columns x as many channels as the
   registers hold (8 x 4 scalars with 32 registers), which still shares each load
   across the tile (a 64 -> 128 channel, 56 -> 28 stride-2 3x3 convolution: 35 ms ->
   3.7 ms on one core).

   **Epilogues** (`schedule_epilogue.py`): the element-wise computes right after a
   tiled product or convolution that read it at the current point only (its bias, a
   batch norm's scale and shift, relu or clip, a residual add; after `fuse` usually
   one compute, literals between them aside) and vectorize along its columns are
   computed at its register tile (`epilogue n`), on the final accumulators, before
   the store: no second nest reading the whole result back (one pass over the
   output saved; on the loaded AVX2 host, on/off per layer measured within noise,
   0.91-1.09 of the time without). They join no group.

   **Transposes** (`transpose_schedule`): an element-wise nest in no group that reads
   an operand across its axes (the read's contiguous index follows another output
   axis than the last, and the read depends on the last axis at all) runs in 16 x 16
   blocks of that axis and the last one, so each cache line read is used whole.

   **Gathered rows** (`schedule_gather.py`): an element-wise float nest in no group
   that reads rows at indices read from another tensor (`gather`) is vectorized along
   its last axis, a vector of the target's width per step, and stays on one thread
   when it writes less than 4 MiB (a memory-bound copy).

4. **Threads.** A nest (or a group) whose work is at least `PARALLEL_WORK` gets one
   `parallel` loop: its first output loop with two or more iterations (a group's:
   one of its shared loops), which the code generator runs on the OpenMP runtime,
   unless more than `MAX_FORKS` reduction iterations enclose that loop (each would
   fork and join the threads again).

5. **Split rows** (`schedule_split.py`): an element-wise nest in no group whose body
   compares its last index against constants (a padding's range checks) runs its
   last loop in pieces at the points where the comparisons change (`split`): the
   middle piece of a padding is a plain copy that LLVM vectorizes (a depthwise 3 x 3
   convolution's padding over 28 x 28 took as long as the convolution, scalar).

Input: verified tensor level (after `fuse`). Output: the same computes, each with a
schedule; `lower-tensor-to-loop` carries the schedules out and decides nothing.
Without this pass every compute is one plain nest (output loops, then reduction
loops) with the same results.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dlc.dialects import tensor
from dlc.dialects.levels import require_level
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.statistics import PassStatistics
from dlc.passes.tensor.schedule_conv import conv_schedule, conv_tiles
from dlc.passes.tensor.schedule_epilogue import epilogue_run
from dlc.passes.tensor.schedule_gather import gathered_rows_schedule, serial_gathered_rows
from dlc.passes.tensor.schedule_groups import group_computes, mark_parallel
from dlc.passes.tensor.schedule_policy import (
    default_order,
    dot_tiles,
    float_sum,
    plain_schedule,
    tiled_schedule,
    transpose_schedule,
)
from dlc.passes.tensor.schedule_records import TuningDatabase
from dlc.passes.tensor.schedule_split import split_points
from dlc.passes.tensor.schedule_tuned import tuned_schedules
from dlc.passes.tensor.schedule_tuned_groups import group_records
from dlc.target import Target


@dataclass(frozen=True)
class SchedulePass(ModulePass, PassStatistics):
    """Write the default schedule of every `tensor.compute` that has none (module doc).

    Input: verified tensor level. Afterwards every compute has a schedule; computes
    that had one keep it. `target` names the CPU model (`host`, or an LLVM name such as
    `haswell`) of the architecture of `triple` ("": this machine's, else e.g.
    `aarch64-linux-gnu`, see `dlc.target.FOREIGN_ARCHES`); `group=false` forms no fusion
    groups and no epilogues; `fma=true` lets float sums fuse
    their multiply-adds where the target has FMA (the pipeline's default at
    opt_level >= 2). `tuning_db` names a tuning database (`schedule_records.py`): a
    compute whose workload has a record for the target takes the record's schedule
    and joins no group (`schedule_tuned.py`), then each fused group and lone
    element-wise or reduction nest takes its group record's member schedules
    (`schedule_tuned_groups.py`); a contraction, group or lone nest without a usable
    record is a `TuningWarning` saying why; all are counted in the pass statistics.
    """

    name = "schedule"

    target: str = "host"
    triple: str = ""
    group: bool = True
    fma: bool = False
    tuning_db: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "tensor", self.name)
        target = Target.from_cpu(self.target, self.triple)
        db = TuningDatabase.load(self.tuning_db) if self.tuning_db else None
        next_id = 1 + max(_group_ids(op), default=-1)
        for func in op.body.block.ops:
            if not isinstance(func, tensor.FuncOp):
                continue
            for block in func.body.blocks:
                runs = _runs_to_schedule(list(block.ops))
                for run in runs:
                    gathered: list[tensor.ComputeOp] = []
                    tuned = tuned_schedules(run, db, target.cpu, self) if db else {}
                    for c in run:
                        c.schedule = plain_schedule(c, default_order(c, target))
                    convs = {c: conv_tiles(c, target) for c in run}  # before groups (step 3)
                    tiled = {c for c in run if convs[c] or dot_tiles(c, target)}
                    epilogues = {c: epilogue_run(c) for c in tiled - set(tuned) if self.group}
                    epilogues |= {c: epilogue_run(c)[: s.epilogue] for c, s in tuned.items()}
                    members = {m for ms in epilogues.values() for m in ms}
                    if self.group:
                        alone = tiled | set(tuned) | members
                        next_id = group_computes(run, next_id, alone.__contains__)
                    for c in run:
                        tiles = dot_tiles(c, target)
                        if tiles is not None:
                            c.schedule = tiled_schedule(c, tiles)
                        conv = convs[c]
                        if conv is not None:
                            c.schedule = conv_schedule(c, conv)
                        rows = gathered_rows_schedule(c, target)
                        if rows is not None:
                            gathered.append(c)
                        blocks = transpose_schedule(c) or rows
                        if blocks is not None:
                            c.schedule = blocks
                        if self.fma and target.fma and float_sum(c):
                            c.schedule = c.schedule.replaced(fma=True)  # type: ignore[union-attr]
                    for c, ms in epilogues.items():
                        c.schedule = c.schedule.replaced(epilogue=len(ms))  # type: ignore[union-attr]
                    mark_parallel([c for c in run if c not in members])
                    for c in run:
                        points = split_points(c) if c not in members else []
                        if points:
                            last = f"d{len(c.domain) - 1}"
                            c.schedule = c.schedule.replaced(split={last: points})  # type: ignore[union-attr]
                    for m in members:
                        m.schedule = ScheduleAttr()
                    for c in gathered:
                        serial_gathered_rows(c)
                    for c, schedule in tuned.items():
                        c.schedule = schedule
                    if db is not None:
                        group_records(run, db, target.cpu, self, frozenset(tuned))


def _runs_to_schedule(ops: list[Operation]) -> list[list[tensor.ComputeOp]]:
    """Maximal runs of consecutive computes without a schedule."""
    runs: list[list[tensor.ComputeOp]] = []
    current: list[tensor.ComputeOp] = []
    for op in ops:
        if isinstance(op, tensor.ComputeOp) and op.schedule is None:
            current.append(op)
            continue
        if current:
            runs.append(current)
        current = []
    if current:
        runs.append(current)
    return runs


def _group_ids(module: ModuleOp) -> list[int]:
    return [
        c.schedule.fusion[0]
        for c in module.walk()
        if isinstance(c, tensor.ComputeOp) and c.schedule is not None and c.schedule.fusion
    ]
