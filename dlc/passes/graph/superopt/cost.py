"""The search's cost model: an analytical per-node estimate in nanoseconds.

Products and convolutions cost their FLOPs at a fitted peak plus a kernel start,
concatenations a copy, element-wise ops a fused per-element cost, moves an index cost;
leaves and folded constants nothing. The constants and how they were fitted:
docs/design/superoptimizer.md, "Cost model".
"""

from __future__ import annotations

from dlc.passes.graph.superopt.graphs import Node, elements

PEAK_FLOPS_PER_NS = 150.0
START_NS = 10_000.0
COPY_NS = 1.7
FUSED_NS = 0.25
MOVE_NS = 0.05


def node_cost(node: Node, operand_shapes: tuple[tuple[int, ...], ...] = ()) -> float:
    """Estimated nanoseconds to compute `node` (`operand_shapes` only for `matmul`)."""
    if node.kind == "leaf":
        return 0.0
    out = elements(node.shape)
    if node.kind == "matmul":
        (m, k), (_, n) = operand_shapes
        return 2.0 * m * k * n / PEAK_FLOPS_PER_NS + START_NS
    if node.kind == "conv":
        (_, c, _, _), (_, _, r, s) = operand_shapes
        return 2.0 * out * c * r * s / PEAK_FLOPS_PER_NS + START_NS
    if node.kind == "maxpool":
        return FUSED_NS * elements(operand_shapes[0]) + START_NS / 4
    if node.kind in ("concat0", "concat1"):
        return COPY_NS * out
    if node.kind in ("ewadd", "ewmul", "smul", "relu"):
        return FUSED_NS * out + START_NS / 4
    return MOVE_NS * out
