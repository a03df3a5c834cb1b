"""Which ops of a `tensor.compute` body vary along one index (vector lanes).

A schedule may vectorize a register tile along an output axis `j`: W consecutive
values of `j` become the W lanes of one vector. `lane_plan(op, j)` classifies the body
for that: reads that do not depend on `j` stay scalar loads (broadcast when a vector
op needs them); reads whose last index is `j + e` (`e` independent of `j`: unit
stride) become vector loads, reads whose last index is `2·j + e` (a stride-2
convolution's row) loads of every second element ("vload2": two vector loads and a
shuffle); float arithmetic on lane values becomes vector arithmetic; index arithmetic
`j + e` and `j·c` stays scalar, computing the first lane's index. Anything else that
depends on `j` (a read of another stride or gathered, a compare, a select, a cast, a
math function) makes the body not vectorizable: the plan is the reason why.
With `functions` (a register tile's epilogue) float compares ("compare": a lane mask,
`loop.vcmpf`), selects ("select": by a mask, `loop.vselect`, or by one i1) and the
math functions `math-approx` expands on vectors (`LANE_FUNCTIONS`) are lane ops too.

The schedule policy asks before it writes `vectorize`; the nest builder follows the
same plan, so what the policy accepts is what the code generator emits.
"""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, i64
from xdsl.ir import Operation, SSAValue

from dlc.dialects import tensor

LANE_ARITH = (
    arith.AddfOp,
    arith.SubfOp,
    arith.MulfOp,
    arith.DivfOp,
    arith.NegfOp,
    arith.MaximumfOp,
    arith.MinimumfOp,
)
"""Float ops carried out on whole vectors."""

LANE_FUNCTIONS = (math.ExpOp, math.TanhOp, math.ErfOp, math.AbsFOp, math.CopySignOp)
"""Math functions on whole vectors with `functions` (expanded by `math-approx`)."""

_NO_LANE_PREDICATES = (0, 15)  # cmpf false / true: not a comparison of the lanes


def lane_plan(
    op: tensor.ComputeOp, axis: int, functions: bool = False
) -> dict[Operation, str] | str:
    """op -> "scalar" | "vload" | "vload2" | "vector" | "lane-index" (and with
    `functions` "compare" | "select") for every body op of `op` vectorized along index
    argument `axis`, or the reason it cannot be."""
    lane = op.body.block.args[axis]
    varying: dict[SSAValue, int] = {lane: 1}  # lane values: an index's step per lane
    plan: dict[Operation, str] = {}
    for inner in op.body.block.ops:
        touched = [v for v in inner.operands if v in varying]
        if isinstance(inner, tensor.YieldOp) or not touched:
            plan[inner] = "scalar"
            continue
        kind = _kind(inner, varying) or (_function_kind(inner) if functions else None)
        if kind is None:
            return f"{inner.name} depends on the vectorized index"
        plan[inner] = kind
        varying.update((r, _step(inner, varying)) for r in inner.results)
    return plan


READ_KINDS = {1: "vload", 2: "vload2"}
"""The vector read of an index that steps 1 or 2 elements per lane."""
VECTOR_READS = frozenset(READ_KINDS.values())


def _kind(inner: Operation, varying: dict[SSAValue, int]) -> str | None:
    if isinstance(inner, tensor.ReadOp):
        *outer, last = inner.indices
        if any(i in varying for i in outer) or last not in varying:
            return None  # a gathered access
        return READ_KINDS.get(varying[last])
    if isinstance(inner, (arith.AddiOp, arith.MuliOp)) and inner.result.type == i64:
        lhs, rhs = inner.operands
        if (lhs in varying) == (rhs in varying):
            return None
        return "lane-index" if _step(inner, varying) else None
    if isinstance(inner, LANE_ARITH):
        return "vector"
    return None


def _step(inner: Operation, varying: dict[SSAValue, int]) -> int:
    """How far a lane-index result steps per lane (0: not an index, or unknown)."""
    steps = [varying[v] for v in inner.operands if v in varying]
    if isinstance(inner, arith.AddiOp) and len(steps) == 1:
        return steps[0]
    if isinstance(inner, arith.MuliOp) and len(steps) == 1:
        other = next(v for v in inner.operands if v not in varying)
        owner = other.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return steps[0] * owner.value.value.data
    return 0


def _function_kind(inner: Operation) -> str | None:
    if isinstance(inner, LANE_FUNCTIONS):
        return "vector"
    if isinstance(inner, arith.CmpfOp):
        return None if inner.predicate.value.data in _NO_LANE_PREDICATES else "compare"
    if isinstance(inner, arith.SelectOp) and isinstance(inner.result.type, AnyFloat):
        return "select"  # of floats only: picked indices would read as if consecutive
    return None


def vector_pieces(extent: int, width: int) -> list[tuple[int, int, int]]:
    """(start, size, lanes) covering [0, extent): vectors of `width` lanes, then the
    remainder in narrower vectors of halving power-of-two widths (a 12-column rest of
    16-lane vectors is 8 + 4 lanes), then a last scalar."""
    pieces = [(x, width, width) for x in range(0, extent - extent % width, width)]
    x, w = extent - extent % width, width // 2
    while x < extent:
        while w > 1 and extent - x < w:
            w //= 2
        pieces.append((x, w, w))
        x += w
    return pieces
