"""The W8/W9/W13 models (benchmarks/onnx_workloads.py), their bench table
(tools/bench_models.py) and tools/onnx_model_tests.py, on models small enough for the
suite: the builders' graphs are checked, not compiled (W8 and W9 take a minute or more)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import bench_models  # noqa: E402
import onnx_model_tests  # noqa: E402
import onnx_workloads  # noqa: E402


def test_randomized_replaces_every_fill_by_a_fitting_weight():
    light = onnx_workloads.light_model("resnet50")
    model = onnx_workloads.randomized(light, seed=3)
    assert not [n for n in model.graph.node if n.op_type == "ConstantOfShape"]
    fills = [n for n in light.graph.node if n.op_type == "ConstantOfShape"]
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert all(n.output[0] in weights for n in fills)
    filled = {n.output[0] for n in fills}
    variances = [n.input[4] for n in model.graph.node if n.op_type == "BatchNormalization"]
    variances = [v for v in variances if v in filled]
    assert variances and min(weights[v].min() for v in variances) >= 0.5  # stay positive
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    w = weights[conv.input[1]]
    assert w.dtype == np.float32 and 0.5 < w.std() * np.sqrt(np.prod(w.shape[1:]) / 2) < 1.5
    onnx.checker.check_model(model)
    again = onnx_workloads.randomized(light, seed=3)
    assert again.SerializeToString() == model.SerializeToString()  # deterministic


@pytest.mark.parametrize("fill", [False, True])
def test_bert_layer_has_bert_base_shapes(fill: bool):
    model = onnx_workloads.bert_layer(fill=fill, vocab=100)  # the shapes, without 23M weights
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("LayerNormalization") == 3 and "Erf" in ops
    assert ops.count("Softmax") == 1 and ops.count("Gather") == 1
    assert ("ConstantOfShape" in ops) == fill
    shape = onnx.shape_inference.infer_shapes(model).graph.output[0].type.tensor_type.shape
    assert [d.dim_value for d in shape.dim] == [1, 128, 768]


@pytest.mark.parametrize("fill", [False, True])
def test_mobilenet_v2_has_its_stages(fill: bool):
    """W13: 52 convolutions, 17 of them depthwise (group = channels), 10 residual Adds,
    ReLU6 as Clip, 1000 logits."""
    model = onnx_workloads.mobilenet_v2(fill=fill)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Conv") == 52 and ops.count("Add") == 10 and ops.count("Clip") == 35
    groups = [a.i for n in model.graph.node for a in n.attribute if a.name == "group"]
    assert sum(g > 1 for g in groups) == 17
    assert ("ConstantOfShape" in ops) == fill
    shape = onnx.shape_inference.infer_shapes(model).graph.output[0].type.tensor_type.shape
    assert [d.dim_value for d in shape.dim] == [1, 1000]


def test_ensure_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls = []
    tiny = onnx_workloads.light_model("squeezenet")
    monkeypatch.setitem(onnx_workloads.BUILDERS, "tiny", lambda: calls.append(1) or tiny)
    path = onnx_workloads.ensure("tiny", tmp_path / "generated")
    assert onnx_workloads.ensure("tiny", tmp_path / "generated") == path and calls == [1]
    assert onnx.load(str(path)).graph.name == tiny.graph.name


def relu_model() -> onnx.ModelProto:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_bench_row_for_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    """One table row: import, cold and cached compile, dlc and ort µs, the error, then
    the CPU seconds and the peak memory."""
    monkeypatch.setattr(bench_models, "GENERATED", tmp_path)
    monkeypatch.setitem(onnx_workloads.BUILDERS, "tiny", relu_model)
    w = bench_models.ModelWorkload("W8", "tiny", "tiny", lambda: [np.ones((2, 3), np.float32)])
    monkeypatch.setattr(bench_models, "MODELS", [w])
    bench_models.run_models({"W8"}, 1, opt_level=3)
    header, columns, row = capsys.readouterr().out.strip().splitlines()
    assert "random weights, opt_level 3 (1 threads" in header and columns.startswith("id  model")
    main, usage = row.rsplit("  (", 1)
    fields = main.split()
    assert fields[:2] == ["W8", "tiny"] and len(fields) == 9 and fields[-1] == "0.0e+00"
    assert re.fullmatch(r"[0-9.]+/[0-9.]+/[0-9.]+; [0-9.]+ GB\)", usage)  # CPU s, max RSS


def test_model_tests_tool_runs_a_light_model(capsys):
    assert onnx_model_tests.main(["bvlc_alexnet"]) == 0
    assert capsys.readouterr().out.startswith("bvlc_alexnet   BackendTest pass")
    with pytest.raises(SystemExit):
        onnx_model_tests.main(["lenet"])


def test_model_table_rows_and_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """tools/bench_model_table.py: a zoo export is found by name with its inputs, a row
    per thread count with dlc / onnxruntime, a missing model is a row saying so, and the
    summary gives the geometric mean per thread count and the worst loaded ratio (dlc at
    the default thread count / one thread, beside busy processes)."""
    import bench_model_table

    onnx.save(relu_model(), str(tmp_path / "tiny.onnx"))
    np.savez(tmp_path / "tiny.npz", x=np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    rows = [bench_model_table.measure("tiny", tmp_path, [1, 2], loaded=True)]
    rows.append(bench_model_table.measure("absent", tmp_path, [1, 2], loaded=False))
    assert rows[0].source == "zoo" and set(rows[0].ratios) == {1, 2}
    assert rows[0].error == "0.0e+00" and rows[1].missing.startswith("not found")
    assert rows[0].loaded is not None and rows[0].loaded > 0
    lines = bench_model_table.report(rows, [1, 2], loaded=True).splitlines()
    assert lines[0].startswith("model") and "1t dlc ms" in lines[0] and "2t dlc ms" in lines[0]
    assert lines[1].startswith("tiny") and len(lines[1].split()) == 13
    assert lines[2].startswith("absent") and "tools/model_zoo.py" in lines[2]
    mean = bench_model_table.geomean([rows[0].ratios[1]])
    assert lines[3] == (
        f"1 thread(s): geomean dlc/ort {mean:.2f} (target 0.9) over 1 models; above 1.1: "
        + ("tiny" if rows[0].ratios[1] > 1.1 else "none")
    )
    assert lines[-1] == f"loaded: worst default / one thread {rows[0].loaded:.2f} (limit 1.5)"
    assert bench_model_table.geomean([0.5, 2.0]) == pytest.approx(1.0)
