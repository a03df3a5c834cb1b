"""The search's cost model: an analytical per-node estimate in nanoseconds.

Analytical, with constants fitted by hand to timings of dlc's own compiled `dot`s on
the development machine (2 cores, shared; a 64×1024·1024×n product gets markedly more
FLOP/s as n grows from 1024 to 4096), not measured per shape at compile time — a
measured, per-shape cache is future work. Per node:

- `matmul` (m×k)·(k×n): 2mkn / (PEAK · n / (n + N_HALF)) — narrow products leave
  vector lanes, register tiles and cores idle, which is why merging products that
  share an operand pays — plus packing both operands and one kernel launch;
- element-wise ops (`ewadd`, `ewmul`, `smul`, `relu`): one pass over the result at
  FUSED_NS per element (dlc fuses them into their consumers) plus a launch;
- data movement (`transpose`, `concat`, splits): MOVE_NS per element — dlc's fusion
  turns them into index expressions of their readers, so they cost little;
- leaves cost nothing.
"""

from __future__ import annotations

from dlc.passes.graph.superopt.graphs import Node

PEAK_FLOPS_PER_NS = 100.0  # 100 GFLOP/s
N_HALF = 512  # the width at which a product reaches half the peak
PACK_NS_PER_ELEMENT = 0.1  # operand packing
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
        efficiency = n / (n + N_HALF)
        flops = 2.0 * m * k * n
        return flops / (PEAK_FLOPS_PER_NS * efficiency) + PACK_NS_PER_ELEMENT * packed + LAUNCH_NS
    if node.kind in ("ewadd", "ewmul", "smul", "relu"):
        return FUSED_NS * out + LAUNCH_NS / 4
    return MOVE_NS * out
