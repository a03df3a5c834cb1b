"""`fold-constants`: evaluate pure ops on literal operands at compile time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import Pure

from dlc.analysis.levels import require_level
from dlc.dialects.graph import GlobalRefOp, LiteralOp
from dlc.dialects.graph_literal import LiteralAttr, array_tree
from dlc.dialects.graph_symbolic import require_static
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.pass_support import erase_dead_ops, pure_functions, rewrite_once
from dlc.passes.statistics import PassStatistics

if TYPE_CHECKING:
    from dlc.semantics.handlers import Handler
    from dlc.semantics.interpreter import Interpreter


def literal_of(value: np.ndarray, t: TensorType) -> LiteralOp:
    """`value` as a literal op (`array_tree`: a splat when all elements have the same
    bits, inline for scalars; a dense literal when large; else a `<…>` tree)."""
    tree = array_tree(value, t.dt)
    return LiteralOp(LiteralAttr(tree), t, inline=t.rank == 0)


DEFAULT_LIMIT = 1 << 16
"""`fold-constants`' default `max-elements`."""

WEIGHT_LIMIT = 1 << 22
"""The `max-elements` of the folding that follows the superoptimizer (opt_level 3):
large enough for what it builds over constant weights (four 1024 × 1024 weights
concatenated, the product of two 1024 × 1024 weights), 16 MiB of f32 at most."""


def folds_to(result: int, operands: list[int], limit: int) -> bool:
    """Whether a result of `result` elements over operands of `operands` elements is
    folded under `limit`: none larger than the limit, and a result above the default
    limit no larger than its operands together (a folded broadcast would store data
    that the program computes from far less)."""
    if result > limit or any(n > limit for n in operands):
        return False
    return result <= DEFAULT_LIMIT or result <= sum(operands)


def foldable(op: Operation, limit: int) -> bool:
    """A pure op of literal operands that `folds_to` allows under `limit`."""
    if isinstance(op, LiteralOp | GlobalRefOp) or not op.has_trait(Pure) or len(op.results) != 1:
        return False
    types = [op.results[0].type, *(v.type for v in op.operands)]
    tensors = [t for t in types if isinstance(t, TensorType)]
    if len(tensors) != len(types):
        return False
    counts = [t.num_elements for t in tensors]
    if not folds_to(counts[0], counts[1:], limit):
        return False
    return all(isinstance(v.owner, LiteralOp) and not v.owner.elements for v in op.operands)


def folded(
    op: Operation, limit: int, interp: Interpreter, handlers: dict[type[Operation], Handler]
) -> LiteralOp | None:
    """The literal of `op`'s value when it is `foldable` under `limit` and has a
    handler in the reference interpreter (`handlers`), else None (so is an op whose
    evaluation raises IndexError, a gather out of range: the error belongs to run time)."""
    handler = handlers.get(type(op))
    if handler is None or not foldable(op, limit):
        return None
    args = [handlers[LiteralOp](interp, v.owner, []) for v in op.operands]
    try:
        with np.errstate(all="ignore"):
            value = np.asarray(handler(interp, op, args))
    except IndexError:
        return None
    result = op.results[0]
    assert isinstance(result.type, TensorType)
    return literal_of(value, result.type)


@dataclass
class FoldPattern(RewritePattern):
    """op(literal a, literal b, ...) -> literal op(a, b, ...)"""

    limit: int
    interp: Interpreter
    handlers: dict[type[Operation], Handler]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        new = folded(op, self.limit, self.interp, self.handlers)
        if new is None:
            return
        rewriter.replace(op, new)  # the literal keeps the op's name


def fold_all(module: ModuleOp, limit: int) -> int:
    """Fold every foldable op (in order, so chains fold in one sweep); return how many."""
    from dlc.semantics.handlers import HANDLERS  # the interpreter, loaded when used
    from dlc.semantics.interpreter import Interpreter

    return rewrite_once(module, FoldPattern(limit, Interpreter(module), HANDLERS))


@dataclass(frozen=True)
class FoldConstantsPass(PassStatistics, ModulePass):
    """Replace pure ops whose operands are all literals by the literal of their value.

    Input: a graph-level module. Values come from the NumPy reference interpreter's
    per-op handlers (so folding agrees with dlc's semantics). Ops whose result or an
    operand has more than `max-elements` elements (default 2^16) are left alone, so a
    huge literal is never materialized, and so is a result of more than 2^16 elements
    larger than its operands together (a broadcast). The result is a splat literal when all
    elements are equal (inline for scalars), otherwise a `<…>` literal, dense (bytes) from
    17 elements. Unused
    literals are erased afterwards. An op whose evaluation raises IndexError (a gather
    of a constant index out of range) stays, to raise it at run time. Statistics: "ops
    folded".
    """

    name = "fold-constants"

    max_elements: int = DEFAULT_LIMIT

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        require_static(op, self.name)
        folded = fold_all(op, self.max_elements)
        erase_dead_ops(op, pure_functions(op))
        self.count("ops folded", folded)
