"""dlc's pass registry: pass name -> factory of the pass class.

Passes within one level live in this package, one pass per file (file name = pass
name in snake_case); lowerings between levels live in `dlc.lowering`. Adding a pass is
one file plus one line in `get_all_passes`. Factories import lazily so that `dlc-opt`
starts fast and a broken pass cannot break the others.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Names -> factories of every pass `dlc-opt -p` accepts."""

    def lower_graph_to_tensor() -> type[ModulePass]:
        from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass

        return LowerGraphToTensorPass

    def lower_tensor_to_loop() -> type[ModulePass]:
        from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import LowerTensorToLoopPass

        return LowerTensorToLoopPass

    def lower_loop_to_llvm() -> type[ModulePass]:
        from dlc.lowering.loop_to_llvm.lower_loop_to_llvm import LowerLoopToLLVMPass

        return LowerLoopToLLVMPass

    def verify() -> type[ModulePass]:
        from dlc.passes.graph.verify import VerifyPass

        return VerifyPass

    return {
        "verify": verify,
        "lower-graph-to-tensor": lower_graph_to_tensor,
        "lower-tensor-to-loop": lower_tensor_to_loop,
        "lower-loop-to-llvm": lower_loop_to_llvm,
        "fuse": lambda: import_module("dlc.passes.tensor.fuse").FusePass,
        "plan-memory": lambda: import_module("dlc.passes.loop.plan_memory").PlanMemoryPass,
        "math-approx": lambda: import_module("dlc.passes.loop.math_approx").MathApproxPass,
        "canonicalize": lambda: import_module("dlc.passes.graph.canonicalize").CanonicalizePass,
        "fold-constants": lambda: (
            import_module("dlc.passes.graph.fold_constants").FoldConstantsPass
        ),
        "cse": lambda: import_module("dlc.passes.graph.cse").CSEPass,
        "dce": lambda: import_module("dlc.passes.graph.dce").DCEPass,
        "inline": lambda: import_module("dlc.passes.graph.inline").InlinePass,
        "cfg-simplify": lambda: import_module("dlc.passes.graph.cfg_simplify").CFGSimplifyPass,
        "cfg-canonicalize": lambda: (
            import_module("dlc.passes.graph.cfg_canonicalize").CFGCanonicalizePass
        ),
        "literal-broadcasting-promotion": lambda: (
            import_module(
                "dlc.passes.graph.literal_broadcasting_promotion"
            ).LiteralBroadcastingPromotionPass
        ),
        "matrix-chain-reorder": lambda: (
            import_module("dlc.passes.graph.matrix_chain_reorder").MatrixChainReorderPass
        ),
        "differentiate": lambda: import_module("dlc.passes.graph.differentiate").DifferentiatePass,
    }


LOWERING_PIPELINE = ("lower-graph-to-tensor", "lower-tensor-to-loop", "lower-loop-to-llvm")
"""The lowerings from the graph level down to the llvm level, in order."""
