"""`literal-broadcasting-promotion`: splat literal operands -> inline scalar literals."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dlc.analysis.levels import require_level
from dlc.dialects.graph import LiteralOp
from dlc.dialects.graph_elementwise import BinaryOp
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.pass_support import (
    erase_dead_ops,
    pure_functions,
    rewrite_once,
    splat,
    splat_value,
)
from dlc.passes.statistics import PassStatistics


def promoted(op: BinaryOp, index: int) -> LiteralOp | None:
    """The inline scalar `c: dt` for operand `index` of `op` when it is a splat literal
    `literal c: T` and the result type stays the same with the scalar, else None."""
    value = op.operands[index]
    other = op.operands[1 - index]
    lit = value.owner
    c = splat_value(value)
    if not isinstance(lit, LiteralOp) or lit.inline is not None or c is None:
        return None
    t, result = value.type, op.results[0].type
    if not isinstance(t, TensorType) or not isinstance(other.type, TensorType):
        return None
    if not isinstance(result, TensorType) or other.type.dims != result.dims:
        return None  # the splat's shape is what gives the result its shape
    return splat(c, t.with_shape(()))


class PromoteSplatOperandPattern(RewritePattern):
    """op(x, literal c: T) -> op(x, c: dt), for either operand, when the type holds."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BinaryOp, rewriter: PatternRewriter) -> None:
        for index in (0, 1):
            scalar = promoted(op, index)
            if scalar is None:
                continue
            rewriter.insert(scalar)
            op.operands[index] = scalar.result
            rewriter.notify_op_modified(op)


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
        # one sweep: a promoted operand is an inline literal, which nothing promotes; one
        # modification per promoted operand
        promoted = rewrite_once(op, PromoteSplatOperandPattern(), "modified")
        if promoted:
            erase_dead_ops(op, pure_functions(op))
        self.count("operands promoted", promoted)
