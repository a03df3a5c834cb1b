"""Collapse repeated blocks: a run of structurally identical copies is drawn once, "×N".

A node's key is its op, result types (and schedule) plus, per operand, how many nodes
back in program order its producer is (or the argument's type). Copies of a block,
such as the layers of a transformer or the blocks of a ResNet stage, then have equal
key sequences: the edges inside a copy, and from one copy to the next, have the same
lengths in every copy. A run of k copies of period L is a stretch where key[i] ==
key[i + L] for (k - 1)·L positions in a row: a tandem repeat, found with NumPy per
period in O(n) (O(n²) for all periods, a few milliseconds for thousands of nodes).

The largest run (most nodes covered, then the shortest period) is collapsed first: its
first copy is kept inside a "×k" cluster, the other copies are hidden and their edges
to the rest of the graph are drawn from the first copy's matching node. Then the next
largest run among the nodes not yet covered, and so on.
"""

from __future__ import annotations

import numpy as np

from dlc.viewer.picture import Cluster, Picture

MIN_COVER = 8
"""Runs covering fewer nodes are left as they are: a small graph stays whole."""


def _best_run(keys: np.ndarray) -> tuple[int, int, int] | None:
    """(start, period, copies) of the tandem repeat covering the most positions."""
    n = len(keys)
    best: tuple[int, int, int] | None = None
    best_cover = 0
    for period in range(1, n // 2 + 1):
        equal = np.concatenate(([False], keys[:-period] == keys[period:], [False]))
        edges = np.flatnonzero(np.diff(equal.astype(np.int8)))
        starts, ends = edges[::2], edges[1::2]  # runs of equal keys: [start, end)
        if not len(starts):
            continue
        copies = (ends - starts + period) // period
        cover = copies * period
        i = int(np.argmax(cover))
        if copies[i] >= 2 and cover[i] > best_cover:
            best, best_cover = (int(starts[i]), period, int(copies[i])), int(cover[i])
    return best


def collapse(picture: Picture, min_cover: int = MIN_COVER) -> Picture:
    """`picture` with its repeated blocks collapsed (in place; also returned)."""
    for sequence in picture.order:
        ids = {key: i for i, key in enumerate({picture.nodes[n].key for n in sequence})}
        keys = np.array([ids[picture.nodes[n].key] for n in sequence], dtype=np.int64)
        while len(sequence) >= 2:
            run = _best_run(keys)
            if run is None or run[1] * run[2] < min_cover:
                break
            start, period, copies = run
            _fold(picture, sequence, start, period, copies)
            keys[start : start + period * copies] = -1 - np.arange(period * copies) - start
    return picture


def _fold(picture: Picture, sequence: list[int], start: int, period: int, copies: int) -> None:
    """Keep the first copy in a "×copies" cluster, hide the others, move their edges."""
    first = sequence[start : start + period]
    parent = picture.nodes[first[0]].cluster
    while picture.clusters[parent].kind == "group":  # the repeat frames whole groups
        outer = picture.clusters[parent].parent
        assert outer is not None  # a group sits in its function
        parent = outer
    frame = picture.add_cluster(Cluster(f"×{copies}", parent, "repeat"))
    for n in first:
        node = picture.nodes[n]
        if node.cluster == parent:
            node.cluster = frame
        elif picture.clusters[node.cluster].kind == "group":
            picture.clusters[node.cluster].parent = frame
    stand_in = {
        sequence[start + c * period + j]: first[j] for c in range(1, copies) for j in range(period)
    }
    picture.hidden.update(stand_in)
    covered = set(first) | set(stand_in)
    edges: list[tuple[int, int]] = []
    for source, target in picture.edges:
        if source in covered and target in covered:
            if source in stand_in or target in stand_in:
                continue  # inside a hidden copy, or from one copy to the next
        edges.append((stand_in.get(source, source), stand_in.get(target, target)))
    picture.edges = list(dict.fromkeys(edges))
