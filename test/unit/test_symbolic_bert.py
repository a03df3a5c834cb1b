"""A BERT encoder with a symbolic sequence length (`compile_onnx(model, dynamic=True)`):
embedding gathers, LayerNormalization, reshapes and transposes of the heads, Softmax
and the erf GELU compile once and match onnx's reference at every length."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.lowering.loop_to_llvm import lower_loop_to_llvm
from dlc.runtime import jit

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import onnx_workloads  # noqa: E402

HIDDEN, HEADS, FFN, VOCAB, POSITIONS = 16, 2, 24, 50, 40


def _bert(layers: int = 1) -> onnx.ModelProto:
    """The benchmarks' BERT encoder (`onnx_workloads.bert_layer`), small: input_ids,
    position_ids int64 [1, seq] -> f32 [1, seq, HIDDEN]."""
    sizes = {"hidden": HIDDEN, "heads": HEADS, "ffn": FFN, "vocab": VOCAB, "positions": POSITIONS}
    return onnx_workloads.bert_layer(3, layers=layers, dynamic=True, **sizes)


def _inputs(length: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.random.default_rng(length).integers(0, VOCAB, (1, length), dtype=np.int64)
    return ids, np.arange(length, dtype=np.int64)[None]


def test_bert_with_a_symbolic_length_compiles_once():
    model = _bert()
    module = dlc.compile_onnx(model, dynamic=True)
    assert "<1 x %seq x 16 x f32>" in module.ir("graph")
    reference = ReferenceEvaluator(model)
    compiled = jit.NATIVE_COMPILES[0]
    for length in (1, 7, 33):
        ids, places = _inputs(length)
        expected = reference.run(None, {"input_ids": ids, "position_ids": places})[0]
        got = module.bert_layer(ids, places)
        assert got.shape == (1, length, HIDDEN)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert jit.NATIVE_COMPILES[0] == compiled
    assert module.stats("bert_layer")["compiles"] == 1


def test_a_large_symbolic_function_is_split_and_its_layers_share_runs(monkeypatch):
    """Over `SPLIT_OPS`, the runs of nests (each a `loop.if` between its threaded and
    serial versions) are outlined as in a static function: the second layer calls the
    first layer's functions, which `jit_parts` compiles as units of their own."""
    monkeypatch.setenv("DLC_CACHE", "0")  # the split threshold is not part of the key
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    model = _bert(layers=2)
    module = dlc.compile_onnx(model, dynamic=True)
    ir = module.ir("llvm")
    defined = len(set(re.findall(r'define void @"dlc\.fn\.bert\$nest\d+"', ir)))
    called = len(re.findall(r'call void @"dlc\.fn\.bert\$nest\d+"', ir))
    assert 0 < defined < called
    reference = ReferenceEvaluator(model)
    for length in (1, 9):
        ids, places = _inputs(length)
        expected = reference.run(None, {"input_ids": ids, "position_ids": places})[0]
        np.testing.assert_allclose(module.bert(ids, places), expected, rtol=1e-4, atol=1e-4)


def test_a_gather_index_out_of_range_is_an_index_error():
    module = dlc.compile_onnx(_bert(), dynamic=True, opt_level=0)
    ids, places = _inputs(4)
    places[0, 2] = POSITIONS  # one past the position table
    with pytest.raises(IndexError, match=r"out-of-bounds gather index 40 into axis 0"):
        module.bert_layer(ids, places)
    places[0, 2] = -POSITIONS  # counted from the end: the first row
    module.bert_layer(ids, places)


def test_a_reshape_that_splits_a_symbolic_dimension_is_located():
    model = _bert()
    heads = next(t for t in model.graph.initializer if t.name == "heads_shape")
    heads.CopyFrom(numpy_helper.from_array(np.array([-1, 2, HIDDEN], np.int64), "heads_shape"))
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile_onnx(model, dynamic=True)
    assert "(Reshape): cannot reshape [1, 'seq', 16] to [-1, 2, 16]" in str(info.value)
    assert "symbolic dimensions stay whole" in str(info.value)


def test_layer_norm_over_a_symbolic_axis_is_located():
    model = _bert()
    norm = next(n for n in model.graph.node if n.op_type == "LayerNormalization")
    norm.attribute[0].i = 1  # axis 1: the sequence
    with pytest.raises(
        dlc.DiagnosticError, match="LayerNormalization over symbolic dimension %seq"
    ):
        dlc.compile_onnx(model, dynamic=True)


GATHERS = """module "g"
stage raw

func @g: (<5 x 3 x f32>, <1 x %n x i64>, <1 x %n x i64>) -> <1 x %n x 3 x f32> {
'entry(%t: <5 x 3 x f32>, %i: <1 x %n x i64>, %j: <1 x %n x i64>):
    %y = gather %t: <5 x 3 x f32> at %i: <1 x %n x i64> along 0
    %z = gather %t: <5 x 3 x f32> at %j: <1 x %n x i64> along 0
    %w = add %y: <1 x %n x 3 x f32>, %z: <1 x %n x 3 x f32>
    return %w: <1 x %n x 3 x f32>
}
"""


@pytest.mark.parametrize("opt_level", [0, 2])
def test_gathers_at_symbolic_indices(opt_level):
    """Each index checked in every build (the check's status is read before the
    arena grows for the call's two buffers: growing it resets the context)."""
    module = dlc.compile(GATHERS, filename="g.dl", opt_level=opt_level)
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    i, j = np.array([[0, 4, -1]]), np.array([[2, -5, 3]])
    np.testing.assert_array_equal(module.g(t, i, j), t[i[0] % 5][None] + t[j[0] % 5][None])
    with pytest.raises(IndexError, match="g.dl:7:10: out-of-bounds gather index -6 into axis 0"):
        module.g(t, i, np.array([[0, -6, 1]]))
    with pytest.raises(IndexError, match="g.dl:6:10: out-of-bounds gather index 5 into axis 0"):
        module.g(t, np.array([[5] * 40]), np.zeros((1, 40), np.int64))


SHAPE_CAST = """module "s"
stage raw

func @split: (<%n x 6 x f32>) -> <%n x 2 x 3 x f32> {
'entry(%x: <%n x 6 x f32>):
    %y = shapeCast %x: <%n x 6 x f32> to %n x 2 x 3
    return %y: <%n x 2 x 3 x f32>
}
"""


def test_shape_cast_keeps_symbolic_dimensions():
    module = dlc.compile(SHAPE_CAST)
    assert "to %n x 2 x 3" in module.ir("graph")
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    np.testing.assert_array_equal(module.split(x), x.reshape(5, 2, 3))


def test_shape_cast_to_another_count_is_located():
    text = SHAPE_CAST.replace("to %n x 2 x 3", "to %n x 4 x 2").replace(
        "<%n x 2 x 3", "<%n x 4 x 2"
    )
    with pytest.raises(dlc.DiagnosticError, match=r"6:\d+: error: .*element counts differ"):
        dlc.compile(text)


PRODUCT = """module "p"
stage raw

func @p: (<%n x %k x f32>, <%k x 80 x f32>) -> <%n x 80 x f32> {
'entry(%a: <%n x %k x f32>, %b: <%k x 80 x f32>):
    %y = dot %a: <%n x %k x f32>, %b: <%k x 80 x f32>
    return %y: <%n x 80 x f32>
}
"""


@pytest.mark.parametrize("rows", [3, 20])
@pytest.mark.parametrize("inner", [5, 300])
def test_products_in_k_blocks_and_packed_panels(rows, inner):
    """300 k's walk in blocks, 20 rows pack the rhs panels at run time."""
    module = dlc.compile(PRODUCT, filename="p.dl")
    rng = np.random.default_rng(rows + inner)
    a = rng.standard_normal((rows, inner)).astype(np.float32)
    b = rng.standard_normal((inner, 80)).astype(np.float32)
    np.testing.assert_allclose(module.p(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("columns", "buffers"), [(70, 2), (64, 1)])
def test_products_of_weights_read_panels_packed_at_compile_time(columns, buffers):
    """The columns left over past the last full tile read the weights; without any,
    only their packed copy is kept (and emitted)."""
    w = np.random.default_rng(0).standard_normal((300, columns)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 300])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", columns])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = dlc.compile_onnx(model, dynamic=True)
    assert module.ir("loop").count("loop.const_buffer") == buffers
    for rows in (1, 7, 40):
        x = np.random.default_rng(rows).standard_normal((rows, 300)).astype(np.float32)
        np.testing.assert_allclose(module.dense(x), x @ w, rtol=1e-4, atol=1e-4)
