"""CompiledModule / CompiledFunction: argument checking, conversions, results, IR levels."""

from __future__ import annotations

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.parser import parse_module

SOURCE = """module "m"
stage canonical

func @affine: (<4 x 3 x f32>, <1 x 3 x f32>) -> <4 x 3 x f32> {
'entry(%x: <4 x 3 x f32>, %w: <1 x 3 x f32>):
    %0.0 = multiply %x: <4 x 3 x f32>, %w: <1 x 3 x f32>
    %0.1 = add %0.0: <4 x 3 x f32>, 1: f32
    return %0.1: <4 x 3 x f32>
}

func @scale: (f64, <5 x f64>) -> <5 x f64> {
'entry(%s: f64, %v: <5 x f64>):
    %0.0 = multiply %s: f64, %v: <5 x f64>
    return %0.0: <5 x f64>
}

func @both: (<2 x i32>, i32) -> (<2 x i32>, <2 x bool>) {
'entry(%a: <2 x i32>, %k: i32):
    %0.0 = add %a: <2 x i32>, %k: i32
    %0.1 = greaterThan %a: <2 x i32>, %k: i32
    %0.2 = literal (%0.0: <2 x i32>, %0.1: <2 x bool>): (<2 x i32>, <2 x bool>)
    return %0.2: (<2 x i32>, <2 x bool>)
}

func @inc: (<1 x f32>) -> <1 x f32> {
'entry(%x: <1 x f32>):
    %0.0 = add %x: <1 x f32>, 1: f32
    return %0.0: <1 x f32>
}

func @negate: (f32) -> f32 {
'entry(%x: f32):
    %0.0 = negate %x: f32
    return %0.0: f32
}
"""


@pytest.fixture(scope="module")
def mod():
    return compile_graph_module(parse_module(SOURCE))


def test_functions_and_lookup(mod):
    assert set(mod.functions) >= {"affine", "scale", "both", "inc", "negate"}
    assert mod["affine"] is mod.affine
    with pytest.raises(AttributeError):
        mod.missing  # noqa: B018
    with pytest.raises(KeyError):
        mod["missing"]


def test_call_matches_numpy(mod):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = np.array([[1.0, -2.0, 0.5]], np.float32)
    out = mod.affine(x, w)
    assert out.dtype == np.float32 and out.shape == (4, 3)
    np.testing.assert_array_equal(out, x * w + 1)


def test_non_contiguous_arguments_are_copied(mod):
    big = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = big[:, ::2]
    assert not x.flags.c_contiguous
    w = np.ones((1, 6), np.float32)[:, ::2]
    np.testing.assert_array_equal(mod.affine(x, w), x * w + 1)


def test_argument_count_error(mod):
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"affine\(\) takes 2 arguments \(x, w\), got 3"):
        mod.affine(x, x, x)


def test_argument_dtype_and_shape_errors(mod):
    x = np.zeros((4, 3), np.float32)
    message = (
        r"argument 1 \(%w\) of @affine: expected <1 x 3 x f32>, got float64 array of shape \(1, 3\)"
    )
    with pytest.raises(TypeError, match=message):
        mod.affine(x, np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"argument 0 \(%x\) of @affine: expected <4 x 3 x f32>"):
        mod.affine(np.zeros((3, 4), np.float32), np.zeros((1, 3), np.float32))
    with pytest.raises(TypeError, match=r"argument 0 \(%x\).*got list"):
        mod.affine([[0.0] * 3] * 4, np.zeros((1, 3), np.float32))


def test_scalars_convert_exactly(mod):
    v = np.arange(5, dtype=np.float64)
    np.testing.assert_array_equal(mod.scale(2, v), 2 * v)
    np.testing.assert_array_equal(mod.scale(np.float32(0.5), v), 0.5 * v)
    np.testing.assert_array_equal(mod.scale(np.array(3.0), v), 3 * v)
    a = np.array([1, -5], np.int32)
    total, flags = mod.both(a, 2.0)  # an integral float is exact
    assert total.tolist() == [3, -3] and flags.tolist() == [False, False]
    with pytest.raises(TypeError, match=r"argument 1 \(%k\) of @both: expected i32"):
        mod.both(a, 1.5)
    with pytest.raises(TypeError, match=r"argument 1 \(%k\)"):
        mod.both(a, 2**40)
    with pytest.raises(TypeError, match=r"argument 1 \(%k\)"):
        mod.both(a, "2")


def test_tuple_result_and_bool_output(mod):
    a = np.array([1, 7], np.int32)
    total, flags = mod.both(a, np.int32(3))
    assert total.dtype == np.int32 and total.tolist() == [4, 10]
    assert flags.dtype == np.bool_ and flags.tolist() == [False, True]


def test_scalar_result_is_zero_dim_array(mod):
    out = mod.negate(1.5)
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32
    assert out == -1.5


def test_ir_levels(mod):
    assert "func @inc" in mod.ir("graph")
    assert "loop.func" in mod.ir("loop")
    assert "define void @dlc.fn.inc" in mod.ir("llvm")
    assert mod.ir("tensor")
    with pytest.raises(ValueError, match="unknown IR level"):
        mod.ir("bytecode")
