"""Enough blocks for the parallel loop (the `schedule` pass, steps 3 and 4 of
`schedule.py`'s docstring): the parallel loop of a tiled nest is its outermost loop
of two or more iterations, and its iterations are what the threads share. A product
whose column blocks number 3 (BERT's 768 columns in blocks of 256) keeps one of 2
threads idle a third of the time; a convolution over 16 channels in blocks of 8 has 2
blocks for all its rows. These helpers cut such loops finer, or put a loop with more
iterations outside, without changing any result (each output is still folded by one
thread in the same order) and without depending on the thread count: the code is the
same for any (measured: docs/performance.md, "Measurements behind the defaults")."""

from __future__ import annotations

PARALLEL_BLOCKS = 8
"""Iterations the parallel loop of a tiled nest is given at least, where its extent
allows: 8 split evenly over 2, 4 and 8 threads and leave libgomp's dynamic chunks
room to even out a thread that starts late or is descheduled."""


def column_blocks(n: int, nc: int, nr: int) -> int:
    """NC, the columns of a K-blocked product's column blocks, for `n` columns in
    panels of `nr`: 0 (no column blocks: the row blocks inside the K blocks are the
    parallel loop) when `nc` (`schedule_policy.n_block`: a thread's block of B in its
    L2) holds them all; else at most `nc`, and small enough for at least
    `PARALLEL_BLOCKS` blocks when `n` holds that many panels (whole panels each)."""
    if nc >= n:
        return 0
    panels = -(-n // nr)
    blocks = max(-(-n // nc), min(PARALLEL_BLOCKS, panels))
    return max(1, panels // blocks) * nr


def rows_first(outside: int, channel_blocks: int, row_blocks: int) -> bool:
    """Whether a convolution's row loop goes outside its channel-block loop: when the
    loops outside both (`outside` iterations: the batch) and the channel blocks give
    fewer than `PARALLEL_BLOCKS` iterations and the rows give more. The input rows a
    tile reads are then reused by every channel block while they are in L1, instead
    of every channel block walking the whole input."""
    return outside * channel_blocks < PARALLEL_BLOCKS and row_blocks > channel_blocks
