"""Buffers sized at run time take the call context's arena when they fit, the heap
otherwise; the arena grows after a call to what the call wanted (`dlc.runtime.symbolic`,
`lower-loop-to-llvm`'s `sized_alloc`)."""

from __future__ import annotations

import numpy as np

import dlc
from dlc.dialects.abi import CTX_ARENA_TOP

PROGRAM = """\
module "a"
stage raw

func @f: (<%n x 8 x f32>, <8 x 8 x f32>) -> <%n x 8 x f32> {
'entry(%x: <%n x 8 x f32>, %w: <8 x 8 x f32>):
    %h = dot %x: <%n x 8 x f32>, %w: <8 x 8 x f32>
    %e = exp %h: <%n x 8 x f32>
    %s = reduce %e: <%n x 8 x f32> by add init 0: f32 along 1
    %s2 = padShape %s: <%n x f32> at 1
    %y = divide %e: <%n x 8 x f32>, %s2: <%n x 1 x f32>
    return %y: <%n x 8 x f32>
}
"""


def _reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    e = np.exp(x @ w)
    return e / e.sum(axis=1, keepdims=True)


def test_heap_then_arena_at_growing_and_shrinking_sizes():
    f = dlc.compile(PROGRAM).f
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((8, 8)) / 4).astype(np.float32)
    for n in [3, 3, 500, 500, 40, 1, 2000, 7]:  # each new maximum first from the heap
        x = rng.standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(f(x, w), _reference(x, w), rtol=1e-5, atol=1e-6)
        ctx = f._contexts.current
        # grown for the next call to the dot's result, exp's and the sums: n x 8,
        # n x 8 and n floats, each rounded up past a multiple of 64 bytes
        assert len(ctx.arena) >= (2 * n * 8 + n) * 4


def test_a_call_that_fits_leaves_its_high_water_mark_at_the_top():
    f = dlc.compile(PROGRAM).f
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 8)).astype(np.float32) / 4
    x = rng.standard_normal((100, 8)).astype(np.float32)
    f(x, w)  # from the heap; the arena grows
    f(x, w)  # in the arena
    ctx = f._contexts.current
    wanted = int(ctx.words[CTX_ARENA_TOP]) - ctx.arena_base
    assert (2 * 100 * 8 + 100) * 4 <= wanted <= len(ctx.arena)


def test_the_arena_of_one_size_serves_a_smaller_one():
    f = dlc.compile(PROGRAM).f
    rng = np.random.default_rng(4)
    w = rng.standard_normal((8, 8)).astype(np.float32) / 4
    big = rng.standard_normal((300, 8)).astype(np.float32)
    f(big, w)
    size = len(f._contexts.current.arena)
    small = rng.standard_normal((10, 8)).astype(np.float32)
    np.testing.assert_allclose(f(small, w), _reference(small, w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(big, w), _reference(big, w), rtol=1e-5, atol=1e-6)
    assert len(f._contexts.current.arena) == size  # nothing grew: both fit
