"""lower-graph-to-loop: graph functions with symbolic dimensions -> `loop.func`s whose
loops run to sizes known only at run time."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.diagnostics import copy_loc, error_at
from dlc.dialects import graph
from dlc.lowering.graph_to_loop.function import FunctionLowering
from dlc.target import Target


@dataclass(frozen=True)
class LowerGraphToLoopPass(ModulePass):
    """Lower a graph module with symbolic dimensions straight to the loop level.

    Input: a verified graph module whose functions use only the symbolic subset
    (`dlc.dialects.graph_symbolic`): element-wise ops with broadcasting, `dataTypeCast`,
    `reduce` with a built-in combinator, `dot` (batched too), `transpose`, literals,
    shape-only ops. Output: one `loop.func @f(%params..., %sizes: memref<Kxi64>, %out)`
    per function: tensors are flat row-major buffers (`memref<?xT>` when a dimension is
    symbolic), every op one loop nest whose trip counts are constants or the sizes in
    `%sizes`, intermediates `loop.alloc_sized` and freed before `loop.return`. Anything
    else is a located "not supported yet" error. The tensor level is not used yet: one
    compile serves every size.

    With `optimize` (the pipeline's at opt_level >= 1): element-wise chains fused into
    their user's nest (one flat loop where nothing broadcasts), outer loops parallel over
    run-time trip counts (each nest twice under a `loop.if`: on threads from
    `PARALLEL_WORK` elements), broadcast operands loaded before the innermost loop,
    float sums over the last axis reassociable, `dot` in register tiles with run-time
    remainders, vectors of the width of `target` (an LLVM CPU model, `host` by default;
    `triple` for another architecture) for f32 and f64 (`graph_to_loop/fusion.py`,
    `dot.py`). Values are the plain lowering's except for reassociated sums and, with
    `fma`, fused multiply-adds in a `dot`.
    """

    name = "lower-graph-to-loop"
    optimize: bool = False
    fma: bool = False
    target: str = "host"
    triple: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        target = Target.from_cpu(self.target, self.triple)
        lowered: list[Operation] = []
        for child in list(op.body.block.ops):
            if isinstance(child, graph.FuncOp) and not child.is_declaration:
                func = FunctionLowering(child, self.optimize, self.fma, target).lower()
                copy_loc(child, func)
                lowered.append(func)
            elif isinstance(child, graph.FuncOp):
                raise error_at(
                    child, "a declaration: not supported yet in a module with symbolic dimensions"
                )
            else:
                raise error_at(
                    child, f"{child.name}: not supported yet in a module with symbolic dimensions"
                )
        for child in list(op.body.block.ops):
            child.detach()
            child.erase()
        op.body.block.add_ops(lowered)
