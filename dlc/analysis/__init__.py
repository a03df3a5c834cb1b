"""Facts about IR that passes, lowerings, the tuner and the drivers share, one question per
module:

- `levels.py`: which level a module is at (`level_of`, `require_level`);
- `walk.py`: every op nested in an op, without xDSL's nested generators;
- `graph_cfg.py`: a graph function's dominators, post-dominators and natural loops;
- `loop_callgraph.py`: the call graph of a loop-level module (recursion, arena bytes);
- `tensor_lanes.py`: which ops of a `tensor.compute` body vary along a vector axis;
- `tensor_epilogue.py`: which computes a reduction's `epilogue n` takes, and whether it may.

Analyses read the dialects and never change IR; the dialects never import them. What a
dialect's verifier needs stays with the dialect, as in xDSL (`xdsl/irdl/dominance.py`)
and MLIR (`mlir/IR/Dominance.h`): the graph verifier's dominance (`dialects/cfg.py`),
the types' layout it checks sizes with (`dialects/layout.py`) and the fusion-group legality
`tensor.func`'s verifier runs (`dialects/tensor_groups.py`).
"""
