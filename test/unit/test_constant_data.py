"""Literal tensors as read-only data (`loop.const_buffer` / `loop.const_copy`,
dlc/dialects/loop_buffer.py; an internal constant global, read in place or copied into
a result): values of every dtype survive exactly, small literals stay element stores,
and an imported weight is data."""

from __future__ import annotations

import numpy as np
import pytest

import dlc


def _literal_source(values: np.ndarray, dt: str) -> str:
    shape = " x ".join(map(str, values.shape))
    elements = ", ".join(f"{v!r}: {dt}" for v in values.ravel().tolist())
    return (
        'module "c"\nstage raw\n'
        f"func @f: () -> <{shape} x {dt}> {{\n'entry():\n"
        f"    %w = literal <{elements}>: <{shape} x {dt}>\n"
        f"    return %w: <{shape} x {dt}>\n}}\n"
    )


@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "i64", "i8"])
def test_large_literals_are_data_with_exact_values(dt: str) -> None:
    rng = np.random.default_rng(3)
    dtype = np.dtype(dt.replace("f", "float").replace("i", "int"))
    values = (
        rng.standard_normal(40).astype(dtype)
        if dt.startswith("f")
        else rng.integers(-100, 100, 40).astype(dtype)
    )
    mod = dlc.compile(_literal_source(values, dt), bounds_check=True)
    assert "loop.const_copy" in mod.ir("loop")
    np.testing.assert_array_equal(mod.f(), values)


@pytest.mark.parametrize("options", [{}, {"bounds_check": True}, {"opt_level": 0}])
def test_a_literal_only_read_is_a_read_only_buffer(options: dict[str, object]) -> None:
    """Not a result: the literal's data is read where it lies (`loop.const_buffer`)."""
    w = np.random.default_rng(5).standard_normal((6, 5)).astype(np.float32)
    rows = ", ".join("<" + ", ".join(f"{v!r}: f32" for v in r.tolist()) + ">: <5 x f32>" for r in w)
    text = (
        'module "c"\nstage raw\nfunc @f: (<2 x 6 x f32>) -> <2 x 5 x f32> {\n'
        "'entry(%x: <2 x 6 x f32>):\n"
        f"    %w = literal <{rows}>: <6 x 5 x f32>\n"
        "    %y = dot %x: <2 x 6 x f32>, %w: <6 x 5 x f32>\n"
        "    return %y: <2 x 5 x f32>\n}\n"
    )
    mod = dlc.compile(text, **options)  # type: ignore[arg-type]
    assert "loop.const_buffer" in mod.ir("loop") and "loop.const_copy" not in mod.ir("loop")
    x = np.random.default_rng(6).standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(mod.f(x), x @ w, rtol=1e-5, atol=1e-5)


def test_small_literals_stay_stores() -> None:
    mod = dlc.compile(_literal_source(np.arange(8, dtype=np.float32), "f32"))
    assert "loop.const_copy" not in mod.ir("loop")
    np.testing.assert_array_equal(mod.f(), np.arange(8, dtype=np.float32))


def test_an_imported_weight_is_data() -> None:
    """A 128 x 128 ONNX weight (it took ~27 s to compile with one store per element,
    ~0.6 s as data; speed is measured outside the tests)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 128])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert onnx is not None
    mod = dlc.compile_onnx(model)
    assert mod.ir("loop").count("loop.const_buffer") == 1  # read in place, never copied
    x = np.random.default_rng(1).standard_normal((4, 128)).astype(np.float32)
    np.testing.assert_allclose(mod.g(x), x @ w, rtol=1e-5, atol=1e-4)
