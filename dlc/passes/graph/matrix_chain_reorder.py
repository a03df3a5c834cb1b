"""`matrix-chain-reorder`: optimal parenthesization of chains of matrix products."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dlc.analysis.levels import require_level
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


def build(leaves: list[SSAValue], split: list[list[int]], before: Operation) -> SSAValue:
    """Insert the dots of the optimal tree before `before`; return the top value."""
    block = before.parent_block()
    assert block is not None
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
        block.insert_op_before(dot, before)
        done[(i, j)] = dot.results[0]
    return done[(0, len(leaves) - 1)]


def reorder(root: DotOp) -> int:
    """Rebuild `root`'s chain in the optimal order when it is cheaper; FLOPs saved."""
    leaves, dots, current = collect(root)
    if len(leaves) < 3 or not all(is_matrix(v) for v in leaves):
        return 0
    dims = [tensor_of(leaves[0]).dims[0]] + [tensor_of(v).dims[1] for v in leaves]
    best, split = optimal_order(dims)
    if best >= current:
        return 0  # already optimal: leave the chain alone
    top = build(leaves, split, root)
    top._name = root.result._name
    root.result.replace_all_uses_with(top)
    for dot in dots:  # root first: each later dot's only user is already gone
        Rewriter.erase_op(dot)
    return 2 * (current - best)


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
        for func in functions(op):
            roots = [d for d in func.body.walk() if isinstance(d, DotOp) and is_matrix(d.result)]
            for root in reversed(roots):
                users = [u.operation for u in root.result.uses]
                if (
                    root.parent is None
                    or len(users) == 1
                    and isinstance(users[0], DotOp)
                    and chain_dot(root.result, users[0])
                ):
                    continue  # an inner link: handled with its chain's root
                saved = reorder(root)
                if saved:
                    self.count("chains reordered")
                    self.count("FLOPs saved", saved)
                    if self.remarks:
                        print(
                            f"dlc-opt: remark: matrix-chain-reorder: @{func.sym_name.data}: "
                            f"saved {saved} FLOPs",
                            file=sys.stderr,
                        )
