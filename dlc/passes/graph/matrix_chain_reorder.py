"""`matrix-chain-reorder`: optimal parenthesization of chains of matrix products."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dlc.analysis.levels import require_level
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_tensor import DotOp
from dlc.dialects.graph_types import TensorType
from dlc.passes.graph.pass_support import functions, tensor_of
from dlc.passes.statistics import PassStatistics

Tree = SSAValue | tuple["Tree", "Tree"]


def is_matrix(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and v.type.rank == 2


def chain_dot(v: SSAValue, root: Operation) -> DotOp | None:
    """The dot defining `v` when it is an inner link of `root`'s chain (single use,
    same block, rank 2), else None (then `v` is a leaf)."""
    op = v.owner
    if not isinstance(op, DotOp) or not is_matrix(v) or v.uses.get_length() != 1:
        return None
    return op if op.parent_block() is root.parent_block() else None


def collect(root: DotOp) -> tuple[list[SSAValue], list[DotOp], int]:
    """Leaves left to right, the chain's dots, and the multiply-adds of its current order."""
    leaves: list[SSAValue] = []
    dots: list[DotOp] = [root]
    cost = 0
    stack: list[SSAValue] = [root.rhs, root.lhs]
    while stack:
        v = stack.pop()
        dot = chain_dot(v, root)
        if dot is None:
            leaves.append(v)
            continue
        dots.append(dot)
        stack += [dot.rhs, dot.lhs]
    for dot in dots:
        (m, k), n = tensor_of(dot.lhs).dims, tensor_of(dot.rhs).dims[1]
        cost += m * k * n
    return leaves, dots, cost


def optimal_order(dims: list[int]) -> tuple[int, list[list[int]]]:
    """Classic DP: cost[i][j] = min_k cost[i][k] + cost[k+1][j] + p[i]·p[k+1]·p[j+1]."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j)
            )
    return cost[0][n - 1], split


def build(leaves: list[SSAValue], split: list[list[int]], rewriter: PatternRewriter) -> SSAValue:
    """Insert the dots of the optimal tree at the rewriter's insertion point; return
    the top value."""
    done: dict[tuple[int, int], SSAValue] = {(i, i): v for i, v in enumerate(leaves)}
    stack = [(0, len(leaves) - 1)]
    while stack:
        i, j = stack[-1]
        k = split[i][j]
        todo = [r for r in ((i, k), (k + 1, j)) if r not in done]
        if todo:
            stack += todo
            continue
        stack.pop()
        dot = DotOp.create(
            operands=[done[(i, k)], done[(k + 1, j)]],
            result_types=[
                TensorType(
                    (tensor_of(leaves[i]).dims[0], tensor_of(leaves[j]).dims[1]),
                    tensor_of(leaves[i]).dt,
                )
            ],
        )
        rewriter.insert(dot)
        done[(i, j)] = dot.results[0]
    return done[(0, len(leaves) - 1)]


def is_chain_root(op: DotOp) -> bool:
    """A rank-2 `dot` that is not an inner link of a chain (its chain's top)."""
    if not is_matrix(op.result):
        return False
    users = [u.operation for u in op.result.uses]
    return not (len(users) == 1 and isinstance(users[0], DotOp) and chain_dot(op.result, users[0]))


def cheaper_order(root: DotOp) -> tuple[list[SSAValue], list[DotOp], list[list[int]], int] | None:
    """`root`'s chain (leaves, dots), its optimal splits and the multiply-adds they
    save, when that order is cheaper than the current one; else None."""
    leaves, dots, current = collect(root)
    if len(leaves) < 3 or not all(is_matrix(v) for v in leaves):
        return None
    dims = [tensor_of(leaves[0]).dims[0]] + [tensor_of(v).dims[1] for v in leaves]
    best, split = optimal_order(dims)
    if best >= current:
        return None  # already optimal: leave the chain alone
    return leaves, dots, split, current - best


@dataclass
class ReorderChainPattern(RewritePattern):
    """((A·B)·C) -> (A·(B·C)) when cheaper, for chains of any length (matrix-chain DP)."""

    remarks: bool = False
    saved: list[int] = field(default_factory=list)  # FLOPs saved by each chain rebuilt

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: DotOp, rewriter: PatternRewriter) -> None:
        if not is_chain_root(op):
            return  # an inner link: handled with its chain's root
        found = cheaper_order(op)
        if found is None:
            return
        leaves, dots, split, fewer = found
        top = build(leaves, split, rewriter)
        self.saved.append(2 * fewer)
        if self.remarks:
            print(
                f"dlc-opt: remark: matrix-chain-reorder: @{function_name(op)}: "
                f"saved {2 * fewer} FLOPs",
                file=sys.stderr,
            )
        rewriter.replace(op, (), [top])  # the top value keeps the root's name
        for dot in dots[1:]:  # root first: each inner link's only user is already gone
            rewriter.erase(dot)


def function_name(op: Operation) -> str:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FuncOp):
        parent = parent.parent_op()
    assert parent is not None
    return parent.sym_name.data


@dataclass(frozen=True)
class MatrixChainReorderPass(PassStatistics, ModulePass):
    """Re-parenthesize chains of `dot`s by the matrix-chain dynamic program.

    Input: a graph-level module. A chain is a tree of rank-2 `dot`s in one block whose
    inner dots each have exactly one use, whatever its nesting; its leaves, in left-to-
    right order, are the matrices M1…Mn. When the optimal parenthesization needs fewer
    multiply-adds than the current one, the chain is rebuilt (the top value keeps its
    name) and the old dots are erased; an already optimal chain is left alone.
    Reports the FLOPs saved (2 per multiply-add) as a statistic, and with
    `remarks=true` as a `dlc-opt: remark:` line on stderr (off by default: the pass
    runs inside `dlc.compile`, which must not write to stderr).
    """

    name = "matrix-chain-reorder"

    remarks: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        pattern = ReorderChainPattern(self.remarks)
        for func in functions(op):  # roots last to first: a remark per chain, in that order
            walker = PatternRewriteWalker(pattern, apply_recursively=False, walk_reverse=True)
            walker.rewrite_region(func.body)
        for saved in pattern.saved:
            self.count("chains reordered")
            self.count("FLOPs saved", saved)
