"""The search's cost model: an analytical per-node estimate in nanoseconds.

Analytical, with constants fitted by hand to single-thread timings of dlc's own
compiled kernels on the development machine (AVX-512, opt_level=2), not measured per
shape at compile time (`superoptimize{costs=measured}` prices products by measured
kernels instead, `measure.py`):

| measured (1 thread)                                   | time    | constant           |
|-------------------------------------------------------|---------|--------------------|
| 4 × dot 64×1024·1024×1024, separate                   | 3.5 ms  | PEAK ≈ 150 GFLOP/s |
| 1 × dot 64×1024·1024×4096 (weights pre-concatenated)  | 3.6 ms  | (no width effect)  |
| concatenating four 1024×1024 weights along 1          | ≈ 7 ms  | COPY ≈ 1.7 ns/elem |

Per node:

- `matmul` (m×k)·(k×n): 2mkn / PEAK plus one kernel start (a parallel region, operand
  packing set-up) — the saving when two products become one; `conv` likewise, its
  FLOPs 2·|result|·c·r·s for c input channels and an r×s window;
- `maxpool`: FUSED_NS per input element plus a quarter start;
- `concat0/1`: a copy of its result (dlc materializes a concatenation that feeds a
  product; fused into an element-wise reader it would be cheaper, so this is an upper
  bound — the search stays conservative about merging products over large weights);
- element-wise ops (`ewadd`, `ewmul`, `smul`, `relu`): FUSED_NS per result element
  (dlc fuses them into their readers) plus a quarter start;
- `transpose` and splits: MOVE_NS per element (index expressions of their readers);
- leaves cost nothing, and so does a node over constants that fold-constants folds
  after the search (the search's own rule: a concatenation of literal weights is free).
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
