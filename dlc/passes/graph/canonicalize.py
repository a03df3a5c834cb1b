"""`canonicalize`: algebraic simplification of graph functions to a fixpoint."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.transforms.canonicalize import CanonicalizationRewritePattern

from dlc.analysis.levels import require_level
from dlc.passes.graph import canonicalization_patterns
from dlc.passes.graph.pass_support import erase_dead_ops, pure_functions
from dlc.passes.statistics import PassStatistics


class FastMathPattern(RewritePattern):
    """The op's rules that hold only without IEEE exactness (see FAST_MATH_PATTERNS)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        for pattern in canonicalization_patterns.FAST_MATH_PATTERNS.get(type(op), ()):
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return


@dataclass(frozen=True)
class CanonicalizePass(PassStatistics, ModulePass):
    """Apply every op's canonicalization patterns until none applies, then drop dead ops.

    Input: a graph-level module. Rewrites: the rules attached to the ops
    (`dlc.passes.graph.canonicalization_patterns.PATTERNS`: neutral elements, x^2 -> x*x,
    x^-1 -> 1/x, sinh/cosh recognition, unary ops at 0, (A^T)^T -> A, reshape chains,
    ...), exact under IEEE arithmetic; with `fast-math=true` also the inexact ones
    (x*0 -> 0, x-x -> 0, x/x -> 1, e^x/e^y -> e^(x-y), quotient reassociation,
    log(e^x) -> x). Afterwards: no rule applies, no unused pure op remains, and every
    value keeps its type. Statistics: "rewrites applied", "dead ops erased".
    """

    name = "canonicalize"

    fast_math: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        # the op's rules, registered with the dialect by canonicalization_patterns
        patterns: list[RewritePattern] = [CanonicalizationRewritePattern()]
        if self.fast_math:
            patterns.append(FastMathPattern())
        listener = PatternRewriterListener()  # every rule ends in one replace
        listener.operation_replacement_handler.append(
            lambda _op, _new: self.count("rewrites applied")
        )
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns), apply_recursively=True, listener=listener
        )
        walker.rewrite_module(op)
        erased = erase_dead_ops(op, pure_functions(op))
        if erased:
            self.count("dead ops erased", erased)
