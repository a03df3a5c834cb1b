"""Functions with symbolic dimensions, compiled once and run at many sizes: results
against NumPy and against a static compile of each size, the compile count, and the
errors of calls whose sizes disagree."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.runtime import jit
from dlc.runtime.symbolic import ShapeError

MLP = """\
module "mlp"
stage raw

func @mlp: (<%batch x 8 x f32>, <8 x 16 x f32>, <1 x 16 x f32>, <16 x 4 x f32>) -> <%batch x f32> {
'entry(%x: <%batch x 8 x f32>, %w1: <8 x 16 x f32>, %b1: <1 x 16 x f32>, %w2: <16 x 4 x f32>):
    %h = dot %x: <%batch x 8 x f32>, %w1: <8 x 16 x f32>
    %a = add %h: <%batch x 16 x f32>, %b1: <1 x 16 x f32>
    %r = max %a: <%batch x 16 x f32>, 0: f32
    %o = dot %r: <%batch x 16 x f32>, %w2: <16 x 4 x f32>
    %t = tanh %o: <%batch x 4 x f32>
    %s = reduce %t: <%batch x 4 x f32> by add init 0: f32 along 1
    return %s: <%batch x f32>
}
"""

SIZES = (1, 3, 64, 129)


def _weights(rng: np.random.Generator) -> list[np.ndarray]:
    shapes = [(8, 16), (1, 16), (16, 4)]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _reference(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    return np.tanh(np.maximum(x @ w1 + b1, 0) @ w2).sum(axis=1)


def test_one_compile_serves_every_size():
    rng = np.random.default_rng(0)
    weights = _weights(rng)
    before = jit.NATIVE_COMPILES[0]
    module = dlc.compile(MLP, opt_level=2)
    compiled = jit.NATIVE_COMPILES[0]
    assert compiled == before + 1
    for n in SIZES:
        x = rng.standard_normal((n, 8)).astype(np.float32)
        y = module.mlp(x, *weights)
        assert y.shape == (n,) and y.dtype == np.float32
        np.testing.assert_allclose(y, _reference(x, *weights), rtol=1e-5, atol=1e-5)
    assert jit.NATIVE_COMPILES[0] == compiled  # no call compiled anything
    stats = module.stats("mlp")
    assert stats["compiles"] == 1 and stats["sizes_called"] == len(SIZES)
    # add into max, tanh into the reduction: 3 buffers (the dots' results and max's);
    assert stats["heap_buffers"] == 3


@pytest.mark.parametrize("n", [2, 17])
def test_matches_a_static_compile_bit_for_bit_at_opt_level_0(n: int):
    rng = np.random.default_rng(n)
    weights = _weights(rng)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    symbolic = dlc.compile(MLP, opt_level=0).mlp(x, *weights)
    static = dlc.compile(MLP.replace("%batch", str(n)), opt_level=0).mlp(x, *weights)
    np.testing.assert_array_equal(symbolic, static)


def test_empty_batch():
    weights = _weights(np.random.default_rng(1))
    y = dlc.compile(MLP).mlp(np.zeros((0, 8), np.float32), *weights)
    assert y.shape == (0,)


BROADCAST = """\
module "b"
stage raw

func @f: (<%n x 1 x i32>, <1 x %k x i32>, <%n x %k x f64>) -> <%n x %k x f64> {
'entry(%a: <%n x 1 x i32>, %b: <1 x %k x i32>, %v: <%n x %k x f64>):
    %s = add %a: <%n x 1 x i32>, %b: <1 x %k x i32>
    %big = greaterThan %s: <%n x %k x i32>, 3: i32
    %c = dataTypeCast %s: <%n x %k x i32> to f64
    %w = multiply %c: <%n x %k x f64>, %v: <%n x %k x f64>
    %y = select %w: <%n x %k x f64>, %v: <%n x %k x f64> by %big: <%n x %k x bool>
    return %y: <%n x %k x f64>
}
"""


@pytest.mark.parametrize(("n", "k"), [(1, 1), (4, 7), (9, 2)])
def test_broadcasting_two_symbols_ints_and_bools(n: int, k: int):
    rng = np.random.default_rng(n * k)
    a = rng.integers(-5, 5, (n, 1), dtype=np.int32)
    b = rng.integers(-5, 5, (1, k), dtype=np.int32)
    v = rng.standard_normal((n, k))
    y = dlc.compile(BROADCAST).f(a, b, v)
    s = a + b
    np.testing.assert_array_equal(y, np.where(s > 3, s * v, v))


INNER = """\
module "inner"
stage raw

func @f: (<%m x %k x f32>, <%k x 3 x f32>, <%m x 3 x f32>) -> <3 x %m x f32> {
'entry(%a: <%m x %k x f32>, %b: <%k x 3 x f32>, %c: <%m x 3 x f32>):
    %p = dot %a: <%m x %k x f32>, %b: <%k x 3 x f32>
    %q = subtract %p: <%m x 3 x f32>, %c: <%m x 3 x f32>
    %e = exp %q: <%m x 3 x f32>
    %r = reduce %e: <%m x 3 x f32> by max init -1000: f32 along 1
    %t = padShape %r: <%m x f32> at 0
    %k3 = literal <<1: f32>: <1 x f32>, <2: f32>: <1 x f32>, <3: f32>: <1 x f32>>: <3 x 1 x f32>
    %u = multiply %t: <1 x %m x f32>, %k3: <3 x 1 x f32>
    return %u: <3 x %m x f32>
}
"""


def test_symbolic_inner_dimension_reduce_and_constants():
    module = dlc.compile(INNER)
    rng = np.random.default_rng(5)
    for m, k in ((2, 5), (6, 1), (1, 33)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, 3)).astype(np.float32)
        c = rng.standard_normal((m, 3)).astype(np.float32)
        expected = np.exp(a @ b - c).max(axis=1)[None, :] * np.array([[1], [2], [3]], np.float32)
        np.testing.assert_allclose(module.f(a, b, c), expected, rtol=1e-5)


def test_inconsistent_sizes_are_a_located_error_naming_both():
    module = dlc.compile(BROADCAST, filename="bcast.dl")
    a = np.zeros((3, 1), np.int32)
    with pytest.raises(ShapeError) as info:
        module.f(a, np.zeros((1, 2), np.int32), np.zeros((4, 2)))
    first = str(info.value).splitlines()[0]
    assert first == (
        "bcast.dl:4:6: error: @f: symbolic dimension %n is 3 in %a (dimension 0) "
        "but 4 in %v (dimension 0)"
    )
    assert isinstance(info.value, ValueError)


def test_other_argument_errors_name_the_argument():
    f = dlc.compile(MLP).mlp
    w1, b1, w2 = _weights(np.random.default_rng(2))
    with pytest.raises(ValueError, match=r"argument %x: dimension 1 is 7, expected 8"):
        f(np.zeros((2, 7), np.float32), w1, b1, w2)
    with pytest.raises(ValueError, match=r"argument %x: expected rank 2"):
        f(np.zeros(8, np.float32), w1, b1, w2)
    with pytest.raises(TypeError, match=r"argument %x: expected f32, got complex64"):
        f(np.zeros((2, 8), np.complex64), w1, b1, w2)
    with pytest.raises(TypeError, match=r"takes 4 arguments"):
        f(np.zeros((2, 8), np.float32))


def test_non_contiguous_and_converted_arguments():
    f = dlc.compile(MLP).mlp
    w1, b1, w2 = _weights(np.random.default_rng(3))
    x = np.asfortranarray(np.random.default_rng(4).standard_normal((5, 8)))  # f64, F order
    np.testing.assert_allclose(
        f(x, w1, b1, w2), _reference(x.astype(np.float32), w1, b1, w2), rtol=1e-5
    )


def test_static_op_outside_the_subset_is_a_located_compile_error():
    src = MLP.replace(
        "    return %s: <%batch x f32>",
        "    %z = reverse %w1: <8 x 16 x f32> along 0\n    return %s: <%batch x f32>",
    )
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(src, filename="t.dl")
    assert str(info.value).startswith(
        "t.dl:12:10: error: reverse: not supported yet in a function with symbolic "
        "dimensions (@mlp)"
    )


def test_levels_of_a_symbolic_module():
    module = dlc.compile(MLP)
    assert "loop.alloc_sized" in module.ir("loop")
    assert "<%batch x 8 x f32>" in module.ir("graph")
    with pytest.raises(ValueError, match="no tensor level"):
        module.ir("tensor")
