"""Control-flow graph utilities for graph-level functions (blocks ending in terminators).

- block graph: `successors(block)`, `predecessors(blocks)`, `reachable(entry)`;
- generic graph (any hashable node, any successor function, e.g. predecessors for
  post-dominance): `reverse_postorder(root, succ)`, `immediate_dominators(root, succ)`
  (Cooper, Harvey & Kennedy, "A Simple, Fast Dominance Algorithm"),
  `dominates(a, b, idom)` and `dominator_tree(root, succ)`.

Only nodes reachable from the root take part. All walks are iterative.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from xdsl.ir import Block

Node = TypeVar("Node", bound=Hashable)

Successors = Callable[[Node], Sequence[Node]]


def successors(block: Block) -> list[Block]:
    """The successors of `block`'s terminator, in operand order (with repetitions)."""
    last = block.last_op
    return list(last.successors) if last is not None else []


def predecessors(blocks: Sequence[Block]) -> dict[Block, list[Block]]:
    """Each block's predecessors among `blocks` (with repetition for multiple edges);
    successors outside `blocks` get an entry too."""
    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    for b in blocks:
        for s in successors(b):
            preds.setdefault(s, []).append(b)
    return preds


def reachable(entry: Block) -> list[Block]:
    """Blocks reachable from `entry`, in depth-first preorder."""
    seen: set[Block] = {entry}
    order: list[Block] = []
    stack = [entry]
    while stack:
        b = stack.pop()
        order.append(b)
        for s in reversed(successors(b)):
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return order


def reverse_postorder(root: Node, succ: Successors[Node]) -> list[Node]:
    """The nodes reachable from `root` in reverse postorder of a depth-first walk that
    visits successors in the order `succ` lists them."""
    post: list[Node] = []
    seen = {root}
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:
        node, i = stack.pop()
        nexts = succ(node)
        if i >= len(nexts):
            post.append(node)
            continue
        stack.append((node, i + 1))
        if nexts[i] not in seen:
            seen.add(nexts[i])
            stack.append((nexts[i], 0))
    post.reverse()
    return post


def immediate_dominators(root: Node, succ: Successors[Node]) -> dict[Node, Node]:
    """Immediate dominator of every node reachable from `root` (`root` maps to itself),
    by Cooper, Harvey & Kennedy's iterative algorithm over the reverse postorder."""
    order = reverse_postorder(root, succ)
    rank = {n: i for i, n in enumerate(order)}
    preds: dict[Node, list[Node]] = {n: [] for n in order}
    for n in order:
        for s in succ(n):
            preds[s].append(n)
    idom: dict[Node, Node] = {root: root}
    changed = True
    while changed:
        changed = False
        for n in order[1:]:
            new: Node | None = None
            for p in preds[n]:
                if p in idom:
                    new = p if new is None else _intersect(p, new, idom, rank)
            if new is not None and idom.get(n) is not new:
                idom[n] = new
                changed = True
    return idom


def _intersect(a: Node, b: Node, idom: dict[Node, Node], rank: dict[Node, int]) -> Node:
    """The nearest common dominator of `a` and `b` (climb the deeper one by rank)."""
    while a is not b:
        while rank[a] > rank[b]:
            a = idom[a]
        while rank[b] > rank[a]:
            b = idom[b]
    return a


def dominates(a: Node, b: Node, idom: dict[Node, Node]) -> bool:
    """Whether `a` dominates `b` (walks b's dominator chain; False for unreachable `b`
    unless `a is b`)."""
    while True:
        if a is b:
            return True
        parent = idom.get(b)
        if parent is None or parent is b:
            return False
        b = parent


def dominator_tree(root: Node, succ: Successors[Node]) -> dict[Node, list[Node]]:
    """Children of each reachable node in the dominator tree, in reverse postorder."""
    idom = immediate_dominators(root, succ)
    order = reverse_postorder(root, succ)
    children: dict[Node, list[Node]] = {n: [] for n in order}
    for n in order[1:]:
        children[idom[n]].append(n)
    return children
