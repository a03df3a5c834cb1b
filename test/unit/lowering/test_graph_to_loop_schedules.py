"""`lower-graph-to-loop{optimize=true}` (the pipeline's at opt_level >= 1): tiled dots
with run-time remainders, fused element-wise chains, parallel loops over run-time trip
counts (on threads above a run-time amount of work), against NumPy and the unoptimized
lowering at sizes around the tile sizes and on both sides of that amount."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.lowering.graph_to_loop.nests import PARALLEL_WORK
from dlc.pipeline import make_pass

DOT = """\
module "d"
stage raw

func @f: (<%m x %k x DT>, <%k x %n x DT>) -> <%m x %n x DT> {
'entry(%a: <%m x %k x DT>, %b: <%k x %n x DT>):
    %c = dot %a: <%m x %k x DT>, %b: <%k x %n x DT>
    return %c: <%m x %n x DT>
}
"""

# rows around the 6-row (vector) and 4-row (scalar) blocks, columns around 8/16-wide
# tiles, inner extents 0 and up
SHAPES = [(1, 1, 1), (0, 3, 5), (4, 0, 3), (5, 3, 17), (6, 16, 16), (13, 7, 33), (25, 64, 40)]
SHAPES += [(37, 40, 50)]  # 74,000 multiply-adds: above PARALLEL_WORK
SHAPES += [(8, 5, 33), (15, 9, 17), (10, 3, 32)]  # rows left 2, 3, 4 (6-row blocks), 0, 3, 2


@pytest.mark.parametrize("dt", ["f32", "f64", "i32"])
def test_dot_at_every_remainder(dt: str):
    module = dlc.compile(DOT.replace("DT", dt), num_threads=2)
    rng = np.random.default_rng(7)
    for m, k, n in SHAPES:
        a = rng.integers(-4, 5, (m, k)).astype(dt.replace("f", "float").replace("i", "int"))
        b = rng.integers(-4, 5, (k, n)).astype(a.dtype)
        got = module.f(a, b)
        assert got.shape == (m, n)
        # small integers: every product and partial sum is exact in any order
        np.testing.assert_array_equal(got, a @ b)


@pytest.mark.parametrize("dt", ["f32", "f64", "i32"])
def test_dot_rows_left_at_every_count(dt: str):
    """Rows 0 to 23 (every count left after 6-row and 4-row blocks, with and without
    packed panels: 16 rows and up), symbolic, and static (`<R x %k x f32>`: the rows left
    are a tile of their known count whatever the type), against NumPy."""
    symbolic = dlc.compile(DOT.replace("DT", dt), num_threads=2, target_cpu="haswell")
    rng = np.random.default_rng(13)
    for m in range(24):
        a = rng.integers(-4, 5, (m, 9)).astype(dt.replace("f", "float").replace("i", "int"))
        b = rng.integers(-4, 5, (9, 33)).astype(a.dtype)
        np.testing.assert_array_equal(symbolic.f(a, b), a @ b)  # exact: small integers
        if dt == "f32" and m in (7, 8, 9, 10, 11, 17):  # left after 6 rows: 1 to 5
            static = dlc.compile(DOT.replace("DT", dt).replace("%m", str(m)))
            np.testing.assert_array_equal(static.f(a, b), a @ b)


def test_dot_rows_left_in_one_tile():
    """A symbolic row count: the rows left after the 6-row blocks in a tile of 5, 4, 3
    or 2 rows (10, 8, 6, 4 accumulators of 8 lanes), one row in a loop (2)."""
    text = dlc.compile(DOT.replace("DT", "f32"), target_cpu="haswell").ir("loop")
    carried = {line.count("vector<8xf32>") for line in text.splitlines() if "iter_args" in line}
    assert {12, 10, 8, 6, 4, 2} <= carried


def test_the_sizes_fall_on_both_sides_of_the_threads_threshold():
    assert 37 * 40 * 50 >= PARALLEL_WORK > 13 * 7 * 33
    assert 300 * 129 >= PARALLEL_WORK > 40 * 17


def test_f32_dot_within_tolerance():
    module = dlc.compile(DOT.replace("DT", "f32"))
    rng = np.random.default_rng(3)
    for m, k, n in [(7, 300, 19), (64, 256, 48)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(module.f(a, b), want, rtol=1e-4, atol=1e-4)


CHAIN = """\
module "c"
stage raw

func @f: (<%n x %k x f32>, <1 x %k x f32>, <%n x 1 x f32>) -> <%n x f32> {
'entry(%x: <%n x %k x f32>, %b: <1 x %k x f32>, %s: <%n x 1 x f32>):
    %e = exp %x: <%n x %k x f32>
    %y = multiply %e: <%n x %k x f32>, 0.5: f32
    %z = add %y: <%n x %k x f32>, %b: <1 x %k x f32>
    %w = multiply %z: <%n x %k x f32>, %s: <%n x 1 x f32>
    %r = reduce %w: <%n x %k x f32> by add init 0: f32 along 1
    return %r: <%n x f32>
}
"""


def _chain(x: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    return ((np.exp(x) * np.float32(0.5) + b) * s).sum(axis=1)


@pytest.mark.parametrize("n,k", [(1, 1), (3, 5), (40, 17), (0, 4), (300, 129)])
def test_fused_chain_into_a_reduction(n: int, k: int):
    rng = np.random.default_rng(n + k)
    args = [rng.standard_normal(shape).astype(np.float32) for shape in [(n, k), (1, k), (n, 1)]]
    got = dlc.compile(CHAIN).f(*args)
    np.testing.assert_allclose(got, _chain(*args), rtol=1e-5, atol=1e-5)


def test_optimized_and_plain_lowerings_agree_bit_for_bit():
    """Fusion, hoisted broadcasts and threads change no value (the plain lowering is
    opt_level 0's); only a float reduction's order may change (`reassoc`)."""
    elementwise = CHAIN.replace("<%n x f32>", "<%n x %k x f32>").replace(
        "%r = reduce %w: <%n x %k x f32> by add init 0: f32 along 1\n    return %r",
        "return %w",
    )
    rng = np.random.default_rng(11)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(37, 9), (1, 9), (37, 1)]]
    fast = dlc.compile(elementwise, opt_level=2, num_threads=2).f(*args)
    plain = dlc.compile(elementwise, opt_level=0).f(*args)
    assert fast.shape == (37, 9)
    np.testing.assert_array_equal(fast, plain)


def test_fusion_leaves_one_buffer_per_materialized_value():
    """exp, both multiplies and the add read through to the reduction: no buffer, one
    store (the result's) in each of the nest's two versions (on threads or not)."""
    module = dlc.compile(CHAIN)
    assert module.stats("f")["heap_buffers"] == 0
    text = module.ir("loop")
    assert text.count("loop.store") == 2 and text.count("loop.if") == 1


def test_pass_options_default_to_the_plain_lowering():
    assert make_pass("lower-graph-to-loop").optimize is False
    assert make_pass("lower-graph-to-loop", optimize=True).optimize is True


TRANSPOSE = """\
module "t"
stage raw

func @f: (<%n x 3 x %m x f32>) -> <%m x 3 x %n x f32> {
'entry(%x: <%n x 3 x %m x f32>):
    %t = transpose %x: <%n x 3 x %m x f32>
    return %t: <%m x 3 x %n x f32>
}
"""


@pytest.mark.parametrize("opt_level", [0, 2])
def test_transpose_at_several_sizes(opt_level: int):
    module = dlc.compile(TRANSPOSE, opt_level=opt_level, num_threads=2)
    rng = np.random.default_rng(5)
    for n, m in [(1, 1), (2, 5), (0, 3), (70, 200)]:  # the last above PARALLEL_WORK
        x = rng.standard_normal((n, 3, m)).astype(np.float32)
        np.testing.assert_array_equal(module.f(x), x.transpose())


BATCHED_DOT = """\
module "b"
stage raw

func @f: (<%h x %s x 8 x DT>, <%h x 8 x %t x DT>) -> <%h x %s x %t x DT> {
'entry(%a: <%h x %s x 8 x DT>, %b: <%h x 8 x %t x DT>):
    %c = dot %a: <%h x %s x 8 x DT>, %b: <%h x 8 x %t x DT>
    return %c: <%h x %s x %t x DT>
}
"""


@pytest.mark.parametrize(("dt", "opt_level"), [("f64", 2), ("i32", 2), ("f64", 0)])
def test_batched_dot_at_several_sizes(dt: str, opt_level: int):
    module = dlc.compile(BATCHED_DOT.replace("DT", dt), opt_level=opt_level, num_threads=2)
    rng = np.random.default_rng(9)
    numpy_dt = {"f64": np.float64, "i32": np.int32}[dt]
    for h, s, t in [(1, 1, 1), (3, 7, 17), (2, 0, 4), (12, 40, 64)]:
        a = rng.integers(-4, 5, (h, s, 8)).astype(numpy_dt)
        b = rng.integers(-4, 5, (h, 8, t)).astype(numpy_dt)
        got = module.f(a, b)
        assert got.shape == (h, s, t)
        np.testing.assert_array_equal(got, a @ b)  # small integers: exact in any order


BLOCKED = """\
module "t"
stage raw

func @f: (<%a x 1 x 3 x %b x i32>) -> <%b x 3 x 1 x %a x i32> {
'entry(%x: <%a x 1 x 3 x %b x i32>):
    %t = transpose %x: <%a x 1 x 3 x %b x i32>
    return %t: <%b x 3 x 1 x %a x i32>
}

func @g: (<20 x %n x i16>) -> <%n x 20 x i16> {
'entry(%y: <20 x %n x i16>):
    %u = transpose %y: <20 x %n x i16>
    return %u: <%n x 20 x i16>
}
"""


@pytest.mark.parametrize("opt_level", [0, 2])
def test_transposes_in_blocks_with_remainders(opt_level: int):
    """Blocks of 16 x 16 elements (a symbolic axis on both sides, the extent-1 axis
    left out) and a plain nest (rows of 20: 20 lines of `y` at a time), at sizes around a block, the
    largest on threads; the same as a static compile of each size at opt_level=0."""
    module = dlc.compile(BLOCKED, opt_level=opt_level, num_threads=2)
    rng = np.random.default_rng(5)
    for a, b, n in [(1, 1, 1), (0, 4, 0), (16, 16, 16), (17, 33, 5), (300, 129, 40)]:
        x = rng.integers(-9, 9, (a, 1, 3, b)).astype(np.int32)
        y = rng.integers(-9, 9, (20, n)).astype(np.int16)
        t, u = module.f(x), module.g(y)
        np.testing.assert_array_equal(t, x.transpose())
        np.testing.assert_array_equal(u, y.transpose())
        if opt_level == 0 and a * b * n:
            static = BLOCKED.replace("%a", str(a)).replace("%b", str(b)).replace("%n", str(n))
            fixed = dlc.compile(static, opt_level=0)
            np.testing.assert_array_equal(t, fixed.f(x))
            np.testing.assert_array_equal(u, fixed.g(y))
