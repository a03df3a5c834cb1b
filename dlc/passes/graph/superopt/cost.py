"""The search's cost model: an analytical per-node estimate in nanoseconds.

Analytical, calibrated against dlc's own compiled kernels on the development machine
(2 cores; a 64×1024·1024×1024 `dot` runs in about 6–8 ms at opt_level=2), not measured
per shape at compile time. Per node:

- `matmul` (m×k)·(k×n): 2mkn / PEAK, plus packing both operands (the lhs is packed
  again by every product that reads it — the cost merging products saves), plus one
  kernel launch;
- element-wise ops (`ewadd`, `ewmul`, `smul`, `relu`): one pass over the result at
  FUSED_NS per element (dlc fuses them into their consumers) plus a launch;
- data movement (`transpose`, `concat`, splits): MOVE_NS per element — dlc's fusion
  turns them into index expressions of their readers, so they cost little;
- leaves cost nothing.
"""

from __future__ import annotations

from dlc.passes.graph.superopt.graphs import Node

PEAK_FLOPS_PER_NS = 50.0  # 50 GFLOP/s
PACK_NS_PER_ELEMENT = 0.8  # operand packing (≈ 5 GB/s of f32)
FUSED_NS = 0.25
MOVE_NS = 0.05
LAUNCH_NS = 2000.0


def elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def node_cost(node: Node, operand_shapes: tuple[tuple[int, ...], ...] = ()) -> float:
    """Estimated nanoseconds to compute `node` (`operand_shapes` only for `matmul`)."""
    if node.kind == "leaf":
        return 0.0
    out = elements(node.shape)
    if node.kind == "matmul":
        (m, k), (_, n) = operand_shapes
        packed = m * k + k * n
        return 2.0 * m * k * n / PEAK_FLOPS_PER_NS + PACK_NS_PER_ELEMENT * packed + LAUNCH_NS
    if node.kind in ("ewadd", "ewmul", "smul", "relu"):
        return FUSED_NS * out + LAUNCH_NS / 4
    return MOVE_NS * out
