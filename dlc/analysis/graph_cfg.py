"""The control-flow facts of one graph function that `cfg-canonicalize` reshapes it by:
`CFG` (reachable blocks, predecessors, dominators and post-dominators), the `region` a
block dominates up to a stop, and its `natural_loops` (innermost first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Block

from dlc.dialects.cfg import dominates, immediate_dominators, predecessors, successors
from dlc.dialects.graph import FuncOp


class _Exit:
    """The virtual exit node after every block without successors (post-dominance root)."""


_EXIT = _Exit()


@dataclass
class CFG:
    """Reachable blocks of one function with predecessors, dominators, post-dominators."""

    entry: Block
    preds: dict[Block, list[Block]]
    idom: dict[Block, Block]
    ipdom: dict[Block | _Exit, Block | _Exit]

    @staticmethod
    def of(func: FuncOp) -> CFG:
        entry = func.entry
        assert entry is not None
        idom = immediate_dominators(entry, successors)
        preds = predecessors(list(idom))
        exits = [b for b in preds if not successors(b)]

        def backwards(n: Block | _Exit) -> Sequence[Block | _Exit]:
            return exits if isinstance(n, _Exit) else preds[n]

        root: Block | _Exit = _EXIT
        ipdom = immediate_dominators(root, backwards)
        return CFG(entry, preds, idom, ipdom)

    def dominates(self, a: Block, b: Block) -> bool:
        return dominates(a, b, self.idom)

    def post_dominator(self, block: Block) -> Block | None:
        """The immediate post-dominator; None when it is the virtual exit or unknown
        (the block cannot reach a return)."""
        p = self.ipdom.get(block)
        return p if isinstance(p, Block) else None


def region(cfg: CFG, head: Block, stop: Block) -> set[Block]:
    """Blocks reachable from `head` without passing `stop` that `head` dominates."""
    seen = {head}
    stack = [head]
    while stack:
        for s in successors(stack.pop()):
            if s is not stop and s not in seen and cfg.dominates(head, s):
                seen.add(s)
                stack.append(s)
    return seen


@dataclass
class Loop:
    header: Block
    body: set[Block]
    latches: list[Block]


def natural_loops(cfg: CFG) -> list[Loop]:
    """Loops by header (back edges t -> h with h dominating t), innermost (smallest) first."""
    latches: dict[Block, list[Block]] = {}
    for block, preds in cfg.preds.items():
        for p in preds:
            if cfg.dominates(block, p):
                latches.setdefault(block, []).append(p)
    loops = []
    for header, tails in latches.items():
        body = {header}
        stack = [t for t in tails if t is not header]
        body.update(stack)
        while stack:
            for p in cfg.preds[stack.pop()]:
                if p not in body:
                    body.add(p)
                    stack.append(p)
        loops.append(Loop(header, body, tails))
    return sorted(loops, key=lambda loop: len(loop.body))
