"""Weights through a compile without copies: an imported weight is the bytes ONNX's raw
data was read as (`graph_literal.viewed_bytes`), a model dlc reads itself leaves its
proto before the import (`importer.detached`), the JIT reads constant data where the
compile left it instead of from object code (`constant_data.BoundData`), and the
compile cache stores that data after the object code. Memory is measured with
tracemalloc (the Python allocations, the same on every host), never time."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlc
from dlc.api import compile_graph_module
from dlc.dialects.graph import LiteralOp
from dlc.runtime import cache
from dlc.semantics.interpreter import run_function

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error::dlc.runtime.cache.UntrustedCacheWarning")

ROWS, WIDTH, OUT = 2, 1024, 512


def _model(seed: int) -> tuple[Any, int]:
    """x @ W (W 1024 x 1024, 4 MiB) then two Gemms with transB=1 sharing W2 (512 x
    1024, as torch's Linear layers export): the model and its weights' bytes."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
    w2 = rng.standard_normal((OUT, WIDTH)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Gemm", ["h", "w2"], ["y"], transB=1),
        helper.make_node("Gemm", ["h", "w2"], ["z"], transB=1),
    ]
    out = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [ROWS, OUT]) for n in "yz"]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, WIDTH])],
        out,
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, w.nbytes + w2.nbytes


def _peak(run: Callable[[], Any]) -> tuple[Any, int]:
    """`run()` and the peak of the Python memory it allocated beyond what was live."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = run()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _dense(module: Any) -> list[bytes]:
    return [
        op.value.data[1]
        for op in module.walk()
        if isinstance(op, LiteralOp) and op.value.data[0] == "dense"
    ]


X = np.random.default_rng(9).standard_normal((ROWS, WIDTH)).astype(np.float32)


def test_import_keeps_one_copy_of_each_weight() -> None:
    """The raw data read from the proto is the literal's bytes (copied before: array,
    then bytes, and the untransposed weight of a transB Gemm as well: 3x the weights);
    a weight two Gemms transpose is transposed and stored once."""
    model, nbytes = _model(1)
    dlc.onnx.load(model)  # dlc's modules imported before anything is measured
    module, peak = _peak(lambda: dlc.onnx.load(model))
    assert sorted(len(d) for d in _dense(module)) == [OUT * WIDTH * 4, WIDTH * WIDTH * 4]
    assert peak < 1.6 * nbytes  # the proto's raw data (1x) and W2 transposed (1/3 x)


def test_compile_reads_the_weights_where_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """At opt_level 0 the JIT's constant data is the graph literals' own bytes: the
    object code holds none of it, and the compile allocates a fraction of the weights
    (2.5x of them before: the object code, its copy in Python, the IR's copies).
    Results match the reference interpreter (NumPy's products: to rounding)."""
    monkeypatch.setenv("DLC_CACHE", "0")
    model, nbytes = _model(2)
    module = dlc.onnx.load(model)
    compile_graph_module(module, opt_level=0)  # the compile's modules imported first
    compiled, peak = _peak(lambda: compile_graph_module(module, opt_level=0))
    assert peak < 0.5 * nbytes
    jit = compiled._jit  # noqa: SLF001 - the test looks inside on purpose
    literals = _dense(module)
    assert sorted(map(len, jit.data.values())) == sorted(map(len, literals))
    assert all(any(d is lit for lit in literals) for d in jit.data.values())
    assert jit.object_code is not None and len(jit.object_code) < nbytes // 16
    name = compiled.functions[0]
    want = run_function(module, name, [X])
    for got, expected in zip(compiled[name](X), want, strict=True):  # type: ignore[arg-type]
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3 * np.abs(expected).max())


def _outputs(compiled: Any) -> list[np.ndarray]:
    return list(compiled[compiled.functions[0]](X))


def test_modules_keep_their_own_data() -> None:
    """Every module names its data `__dlc_const_<n>`: each resolves to its own."""
    first = dlc.compile_onnx(_model(3)[0], opt_level=0)
    second = dlc.compile_onnx(_model(4)[0], opt_level=0)
    again = dlc.compile_onnx(_model(3)[0], opt_level=0)
    for a, b in zip(_outputs(first), _outputs(again), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(_outputs(first)[0], _outputs(second)[0])


def test_cache_stores_the_data_after_the_object(cache_dir: Path, lowerings: list[int]) -> None:
    model, nbytes = _model(5)
    want = _outputs(dlc.compile_onnx(model))
    (obj,) = sorted((cache_dir / f"v{cache.FORMAT}").glob("*.o"))
    assert obj.stat().st_size >= nbytes
    cache.clear_memory()
    for a, b in zip(_outputs(dlc.compile_onnx(model)), want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(lowerings) == 1  # from disk, its data with it
    data = bytearray(obj.read_bytes())
    data[-1] ^= 1  # a weight's byte: the entry fails its MAC and is compiled again
    obj.write_bytes(bytes(data))
    cache.clear_memory()
    for a, b in zip(_outputs(dlc.compile_onnx(model)), want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(lowerings) == 2


def test_a_model_read_here_leaves_its_proto_before_the_import(tmp_path: Path) -> None:
    """A model dlc reads itself (a path, bytes) gives its initializers to the import
    apart (`detached`): the proto that held them is freed before the import begins.
    The module is the one the same model as a ModelProto gives."""
    from dlc.onnx.importer import detached
    from dlc.parser import print_module

    model, _ = _model(6)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    stripped, arrays = detached(onnx.load(str(path)), str(path))
    assert not stripped.graph.initializer and sorted(arrays) == ["w", "w2"]
    assert len(stripped.graph.node) == len(model.graph.node)
    assert len(model.graph.initializer) == 2  # a ModelProto given is never changed
    sources = (model, model.SerializeToString(), str(path))
    assert len({print_module(dlc.onnx.load(source)) for source in sources}) == 1
