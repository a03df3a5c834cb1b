"""A pass plugin for the lit and unit tests: `multiply %x, 2` -> `add %x, %x` (graph level)."""

from dataclasses import dataclass

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dlc.dialects.graph_elementwise import AddOp, MultiplyOp
from dlc.passes.statistics import PassStatistics


class TimesTwo(RewritePattern):
    def __init__(self, owner):
        self.owner = owner

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MultiplyOp, rewriter: PatternRewriter) -> None:
        lhs, rhs = op.operands
        literal = rhs.owner
        if getattr(literal, "name", "") != "graph.literal" or lhs.type != op.results[0].type:
            return
        value = literal.value.data
        if value not in (("int", 2), ("float", 2.0)):
            return
        add = AddOp.create(operands=[lhs, lhs], result_types=[op.results[0].type])
        rewriter.replace(op, [add])
        self.owner.count("doublings")


@dataclass(frozen=True)
class DoubleToAdd(PassStatistics, ModulePass):
    name = "double-to-add"

    def apply(self, ctx, op) -> None:
        PatternRewriteWalker(TimesTwo(self)).rewrite_module(op)


Marker = Dialect("plugin_marker", [], [])
"""A dialect of the plugin (dlc-opt registers it)."""
