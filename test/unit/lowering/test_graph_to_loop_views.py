"""Transposes read through (`dlc/lowering/graph_to_loop/views.py`): a transpose of a
reshaped transpose copies rows once from the first one's operand; at sizes around the
blocks and the threads threshold, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.lowering.graph_to_loop.views import split_axes

HEADS = """\
module "v"
stage raw

func @heads: (<%s x 12 x 64 x f32>) -> <12 x %s x 64 x f32> {
'entry(%x: <%s x 12 x 64 x f32>):
    %a = shapeCast %x: <%s x 12 x 64 x f32> to %s*12 x 64
    %b = transpose %a: <%s*12 x 64 x f32>
    %c = shapeCast %b: <64 x %s*12 x f32> to 64 x %s x 12
    %d = transpose %c: <64 x %s x 12 x f32>
    return %d: <12 x %s x 64 x f32>
}

func @keys: (<12 x %s x 64 x f32>) -> <12 x 64 x %s x f32> {
'entry(%x: <12 x %s x 64 x f32>):
    %a = shapeCast %x: <12 x %s x 64 x f32> to 12 x %s*64
    %b = transpose %a: <12 x %s*64 x f32>
    %c = shapeCast %b: <%s*64 x 12 x f32> to %s x 64 x 12
    %d = transpose %c: <%s x 64 x 12 x f32>
    return %d: <12 x 64 x %s x f32>
}

func @shared: (<%s x 12 x 64 x f32>) -> (<64 x %s*12 x f32>, <12 x %s x 64 x f32>) {
'entry(%x: <%s x 12 x 64 x f32>):
    %a = shapeCast %x: <%s x 12 x 64 x f32> to %s*12 x 64
    %b = transpose %a: <%s*12 x 64 x f32>
    %c = shapeCast %b: <64 x %s*12 x f32> to 64 x %s x 12
    %d = transpose %c: <64 x %s x 12 x f32>
    %t = literal (%b: <64 x %s*12 x f32>, %d: <12 x %s x 64 x f32>): (<64 x %s*12 x f32>, <12 x %s x 64 x f32>)
    return %t: (<64 x %s*12 x f32>, <12 x %s x 64 x f32>)
}
"""


@pytest.mark.parametrize("opt_level", [0, 2])
def test_transposes_of_transposes_at_several_sizes(opt_level: int):
    module = dlc.compile(HEADS, opt_level=opt_level, num_threads=2)
    rng = np.random.default_rng(3)
    for s in (0, 1, 5, 17, 300):  # 300: above the threads threshold
        x = rng.standard_normal((s, 12, 64)).astype(np.float32)
        np.testing.assert_array_equal(module.heads(x), x.transpose(1, 0, 2))
        np.testing.assert_array_equal(module.keys(x.transpose(1, 0, 2)), x.transpose(1, 2, 0))
        first, second = module.shared(x)
        np.testing.assert_array_equal(first, x.reshape(s * 12, 64).T)
        np.testing.assert_array_equal(second, x.transpose(1, 0, 2))


def test_the_first_transpose_is_not_materialized():
    """`heads`: one copy of rows and no buffer (the unoptimized lowering: two copies, a
    buffer between); `keys` would read strided, and keeps its two copies; `shared`
    returns the first transpose too (tested above: it is computed)."""
    module, plain = dlc.compile(HEADS), dlc.compile(HEADS, opt_level=0)
    assert module.stats("heads")["heap_buffers"] == 0
    assert plain.stats("heads")["heap_buffers"] == 1
    assert module.stats("keys")["heap_buffers"] == plain.stats("keys")["heap_buffers"] == 1


def test_split_axes():
    assert split_axes((64, "s*12", 1), (64, "s", 12, 1)) == ((0,), (1, 2), ())
    assert split_axes((6, 4), (1, 2, 3, 4)) == ((0, 1, 2), (3,))
    assert split_axes((1, "s"), ("s",)) == ((), (0,))
    assert split_axes((6, 4), (4, 6)) is None  # not a split of each axis
    assert split_axes(("s*2",), ("s", 3)) is None
