"""Passes that stay within one level, grouped by level, one pass per file (file name =
pass name in snake_case):

- `graph/`: verification helpers, differentiation, algebraic simplification, constant
  folding, CSE, DCE, inlining, CFG passes, matrix-chain reordering;
- `tensor/`: fusion and scheduling of `tensor.compute` nests;
- `loop/`: memory planning and polynomial math functions;
- `verify.py`: the verifier of every level.

Lowerings between levels live in `dlc.lowering`; the registry of every pass and the
pipelines that combine them live in `dlc.pipeline`.
"""
