"""Register and cache tiling of `dot`-like reductions (used by `lower-tensor-to-loop`).

A compute marked `dlc.reduction_outer = rank - 1` (see `dlc/passes/tensor/fuse.py`) with one
`add` reduction axis over a float type, `out[*b, i, j] = sum_k body(*b, i, j, k)`,
becomes, per batch point:

```
for kc in 0..K step KC:                    # cache block of K (serial)
  for i0 in 0..M step MR:                  # row blocks (parallel)
    for j0 in 0..N step NR:                # column panels (parallel)
      acc[MR][NR] = kc == 0 ? init : out[i0.., j0..]
      for k in kc..min(kc + KC, K):        # accumulators are loop-carried scalars
        acc[ii][jj] = acc[ii][jj] + body(i0 + ii, j0 + jj, k)
      out[i0.., j0..] = acc
```

with the last (partial) row block and column panel emitted as kernels of their own,
smaller constant sizes. The accumulators are `MR * NR` loop-carried scalars, fully
unrolled: LLVM's SLP vectorizer turns each row of `NR` of them into vector registers,
the `body` reads of `B[k, j0 + jj]` into vector loads and those of `A[i, k]` into
broadcasts, so the inner loop is `MR * NR / lanes` vector multiply-adds.

Summation order: every output element is still `init + body(k=0) + body(k=1) + ...`
in increasing `k`, one rounding per step (no reassociation, no FMA contraction), and
the partial sums of a K block go through the output buffer exactly, so results are
bit-identical to the untiled schedule and to the reference interpreter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects import loop, tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.lowering.scalar_ops import ScalarBuilder

if TYPE_CHECKING:
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import FunctionLowering

VECTOR_BYTES = 64  # NR: 64 bytes of columns (two 256-bit registers: LLVM prefers ymm)
ROWS = 6  # MR: rows of a register tile
MAX_BODY_OPS = 16  # larger bodies keep the plain i-k-j schedule
MIN_WORK = 1 << 16  # M * N * K below this: the plain schedule is as good
K_BLOCK = 256  # KC: the B block K_BLOCK x N stays in L2 across the row blocks


@dataclass(frozen=True)
class DotTiling:
    """The tile sizes of one dot-like compute: rows `mr`, columns `nr`, K block `kc`."""

    mr: int
    nr: int
    kc: int


def plan_tiling(op: tensor.ComputeOp, keep: int) -> DotTiling | None:
    """The tiling of a reduction-outer compute, or None to keep the plain schedule."""
    t = op.result.type
    if not isinstance(t, TensorType) or t.dt not in ("f32", "f64") or op.combinator is None:
        return None
    if op.combinator.data != "add" or op.init is not None:
        return None
    dims, extents = op.domain, op.reduction_extents
    if len(extents) != 1 or not dims or keep != len(dims) - 1:
        return None
    if len(op.body.block.ops) > MAX_BODY_OPS:
        return None
    n, k = dims[-1], extents[0]
    m = dims[-2] if len(dims) >= 2 else 1
    nr = VECTOR_BYTES // dtype_bytes(t.dt)
    if n < nr or m * n * k < MIN_WORK:
        return None
    mr = min(ROWS, m) if len(dims) >= 2 else 1
    return DotTiling(mr, nr, K_BLOCK)


class _TiledDot:
    """Emits the tiled nest of one compute into `lowering`'s function (module doc)."""

    def __init__(
        self, lowering: FunctionLowering, op: tensor.ComputeOp, buffer: SSAValue, plan: DotTiling
    ) -> None:
        self.lowering, self.op, self.buffer, self.plan = lowering, op, buffer, plan
        t = op.result.type
        assert isinstance(t, TensorType)
        self.dt = t.dt
        self.matrix = len(op.domain) >= 2
        self.k = op.reduction_extents[0]
        self.single_block = self.k <= plan.kc

    def index(self, b: Builder, value: int) -> SSAValue:
        return b.insert(arith.ConstantOp.from_int_and_width(value, 64)).result

    def for_(
        self, b: Builder, lb: SSAValue, ub: SSAValue, step: int, parallel: bool
    ) -> tuple[Builder, SSAValue]:
        """A `loop.for` (ended by its yield) and a builder before that yield."""
        nest = b.insert(loop.ForOp(lb, ub, self.index(b, step), parallel=parallel))
        copy_loc(self.op, nest)
        nest.body.block.add_op(loop.YieldOp())
        return Builder(InsertPoint.before(nest.body.block.last_op)), nest.iv  # type: ignore[arg-type]

    def emit(self, b: Builder) -> None:
        """Batch loops, the init pass (several K blocks), then the K-blocked kernels."""
        dims = self.op.domain
        batch_dims = dims[:-2] if self.matrix else ()
        batch: list[SSAValue] = []
        for n in batch_dims:
            b, iv = self.for_(b, self.index(b, 0), self.index(b, n), 1, True)
            batch.append(iv)
        if not self.single_block:
            self._init(b, batch)
        kc = self.index(b, 0)
        if not self.single_block:
            b, kc = self.for_(b, kc, self.index(b, self.k), self.plan.kc, False)
        kend = self.index(b, self.k)
        if not self.single_block:
            limit = b.insert(arith.AddiOp(kc, self.index(b, self.plan.kc))).result
            kend = b.insert(arith.MinSIOp(limit, kend)).result
        self._rows(b, batch, kc, kend)

    def _init(self, b: Builder, batch: list[SSAValue]) -> None:
        """out[batch, ...] = init (the K blocks then accumulate through the buffer)."""
        from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import store

        ivs = list(batch)
        for n in self.op.domain[len(batch) :]:
            b, iv = self.for_(b, self.index(b, 0), self.index(b, n), 1, True)
            ivs.append(iv)
        init = b.insert(arith.ConstantOp(self.op.init_value)).result  # type: ignore[arg-type]
        store(b, init, self.buffer, ivs, self.dt)

    def _rows(self, b: Builder, batch: list[SSAValue], kc: SSAValue, kend: SSAValue) -> None:
        """Full row blocks, then the partial one, each over all column panels."""
        if not self.matrix:
            self._panels(b, batch, None, 1, kc, kend)
            return
        m, mr = self.op.domain[-2], self.plan.mr
        full = m - m % mr
        if full:
            inner, i0 = self.for_(b, self.index(b, 0), self.index(b, full), mr, True)
            self._panels(inner, batch, i0, mr, kc, kend)
        if m % mr:
            self._panels(b, batch, self.index(b, full), m % mr, kc, kend)

    def _panels(
        self,
        b: Builder,
        batch: list[SSAValue],
        i0: SSAValue | None,
        mr: int,
        kc: SSAValue,
        kend: SSAValue,
    ) -> None:
        """Full column panels of one row block, then the partial one: the A block
        (mr x KC) stays in L1 while the B block (KC x N, contiguous rows) streams
        from L2."""
        n = self.op.domain[-1]
        nr = self.plan.nr
        full = n - n % nr
        if full:
            inner, j0 = self.for_(b, self.index(b, 0), self.index(b, full), nr, True)
            self._kernel(inner, batch, i0, mr, j0, nr, kc, kend)
        if n % nr:
            self._kernel(b, batch, i0, mr, self.index(b, full), n % nr, kc, kend)

    def _kernel(
        self,
        b: Builder,
        batch: list[SSAValue],
        i0: SSAValue | None,
        mr: int,
        j0: SSAValue,
        nr: int,
        kc: SSAValue,
        kend: SSAValue,
    ) -> None:
        """The mr x nr register tile over k in [kc, kend) (module doc)."""
        from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import load, store

        points = [self._point(b, batch, i0, ii, j0, jj) for ii in range(mr) for jj in range(nr)]
        if self.single_block:
            init = b.insert(arith.ConstantOp(self.op.init_value)).result  # type: ignore[arg-type]
            accs = [init] * len(points)
        else:
            accs = [load(b, self.buffer, p, self.dt) for p in points]
        nest = b.insert(loop.ForOp(kc, kend, self.index(b, 1), accs))
        copy_loc(self.op, nest)
        inner = Builder(InsertPoint.at_end(nest.body.block))
        scalars = ScalarBuilder(inner)
        sums = []
        for point, acc in zip(points, nest.iter_args, strict=True):
            element = self.lowering._body(inner, self.op, [*point, nest.iv])
            sums.append(scalars.binary("add", self.dt, acc, element))
        inner.insert(loop.YieldOp(*sums))
        for point, value in zip(points, nest.res, strict=True):
            store(b, value, self.buffer, point, self.dt)

    def _point(
        self,
        b: Builder,
        batch: list[SSAValue],
        i0: SSAValue | None,
        ii: int,
        j0: SSAValue,
        jj: int,
    ) -> list[SSAValue]:
        """The output index [*batch, i0 + ii, j0 + jj] (no row index for a vector)."""
        j = b.insert(arith.AddiOp(j0, self.index(b, jj))).result if jj else j0
        if i0 is None:
            return [*batch, j]
        i = b.insert(arith.AddiOp(i0, self.index(b, ii))).result if ii else i0
        return [*batch, i, j]


def emit_tiled_dot(
    lowering: FunctionLowering, op: tensor.ComputeOp, buffer: SSAValue, keep: int
) -> bool:
    """Emit `op` tiled (module doc) at `lowering.b`; False (nothing emitted) when the
    plain reduction-outer schedule should be used instead."""
    plan = plan_tiling(op, keep)
    if plan is None:
        return False
    _TiledDot(lowering, op, buffer, plan).emit(lowering.b)
    return True


__all__: Sequence[str] = ("DotTiling", "emit_tiled_dot", "plan_tiling")
