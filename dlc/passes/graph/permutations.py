"""Axis permutations from DLVM's `transpose` (which reverses all axes) and reshapes.

Reversing blocks of adjacent axes is a reshape that merges each block, a transpose, and
a reshape that splits the blocks again; `block_reversals` finds the fewest such steps
for a permutation (breadth-first over the block splits), `permute` emits them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import cache

import numpy as np
from xdsl.ir import SSAValue

from dlc.passes.graph.autodiff.adjoint_emitter import Emitter, tensor_of


def permute(e: Emitter, x: SSAValue, perm: Sequence[int]) -> SSAValue:
    """Axes permuted as NumPy's `transpose(x, perm)`."""
    for blocks in block_reversals(tuple(perm)):
        dims = tensor_of(x).dims
        sizes = [int(np.prod([dims[i] for i in block])) for block in blocks]
        flipped = e.transpose(e.reshape(x, sizes))
        x = e.reshape(flipped, [dims[i] for block in reversed(blocks) for i in block])
    return x


@cache
def block_reversals(perm: tuple[int, ...]) -> list[tuple[tuple[int, ...], ...]]:
    """The shortest list of block reversals that turns axis order 0..n-1 into `perm`.

    A step splits the current axes into blocks of adjacent axes and reverses the order
    of the blocks. Each entry lists the blocks as positions of the current axes."""
    n = len(perm)
    start = tuple(range(n))
    seen: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[tuple[int, ...], ...]] | None] = {
        start: None
    }
    queue = deque([start])
    while queue:
        order = queue.popleft()
        if order == perm:
            break
        for blocks in _splits(n):
            new = tuple(order[i] for block in reversed(blocks) for i in block)
            if new not in seen:
                seen[new] = (order, blocks)
                queue.append(new)
    steps: list[tuple[tuple[int, ...], ...]] = []
    order = perm
    while (prev := seen[order]) is not None:
        order, blocks = prev
        steps.append(blocks)
    return steps[::-1]


@cache
def _splits(n: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every split of positions 0..n-1 into at least two blocks of adjacent positions."""
    out = []
    for mask in range(1, 1 << (n - 1)):
        blocks, current = [], [0]
        for i in range(1, n):
            if mask >> (i - 1) & 1:
                blocks.append(tuple(current))
                current = []
            current.append(i)
        blocks.append(tuple(current))
        out.append(tuple(blocks))
    return out
