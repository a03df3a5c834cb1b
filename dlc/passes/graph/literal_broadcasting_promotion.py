"""`literal-broadcasting-promotion`: splat literal operands -> inline scalar literals."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dlc.analysis.levels import require_level
from dlc.dialects.graph import LiteralOp
from dlc.dialects.graph_elementwise import BinaryOp
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.pass_support import (
    erase_dead_ops,
    functions,
    pure_functions,
    splat,
    splat_value,
)
from dlc.passes.statistics import PassStatistics


def promote(op: Operation, index: int) -> bool:
    """`op %x, literal c: T` -> `op %x, c: dt` when the result type stays the same."""
    value = op.operands[index]
    other = op.operands[1 - index]
    lit = value.owner
    c = splat_value(value)
    if not isinstance(lit, LiteralOp) or lit.inline is not None or c is None:
        return False
    t, result = value.type, op.results[0].type
    if not isinstance(t, TensorType) or not isinstance(other.type, TensorType):
        return False
    if not isinstance(result, TensorType) or other.type.dims != result.dims:
        return False  # the splat's shape is what gives the result its shape
    scalar = splat(c, t.with_shape(()))
    Rewriter.insert_op(scalar, InsertPoint.before(op))
    op.operands[index] = scalar.result
    return True


@dataclass(frozen=True)
class LiteralBroadcastingPromotionPass(PassStatistics, ModulePass):
    """Replace splat literal operands of binary and compare ops by inline scalars.

    Input: a graph-level module. `add %x: <2 x 3 x f32>, %c` with `%c = literal 1.0:
    <2 x 3 x f32>` becomes `add %x: <2 x 3 x f32>, 1.0: f32` when broadcasting the
    scalar gives the same result type (the other operand already has the result's
    shape). Dense (non-splat) literals and inline literals are left alone, so the
    module changes only when an operand was promoted. Literals left unused are erased.
    Statistics: "operands promoted".
    """

    name = "literal-broadcasting-promotion"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        promoted = 0
        for func in functions(op):
            for inst in list(func.body.walk()):
                if isinstance(inst, BinaryOp):
                    promoted += sum(promote(inst, i) for i in (0, 1))
        if promoted:
            erase_dead_ops(op, pure_functions(op))
        self.count("operands promoted", promoted)
