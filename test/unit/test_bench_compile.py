"""tools/bench_compile.py: its table rows and the W2 x200 twin it gives onnxruntime."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import bench_compile  # noqa: E402

COLD = {
    "import_s": 1.0,
    "compile_s": 4.5,
    "compile_cpu_s": 6.0,
    "graph_cpu_s": 0.1,
    "tensor_cpu_s": 1.0,
    "loop_cpu_s": 2.0,
    "llvm_cpu_s": 2.5,
    "rss_mb": 800.0,
    "ort_session_s": 0.5,
}


def test_a_row_per_model() -> None:
    other = {"compile_s": 3.0, "compile_cpu_s": 4.0, "units_reused": 21, "units": 21}
    row = bench_compile.table_row(
        {
            "model": "resnet50",
            "cold": COLD,
            "cached": {"compile_s": 0.3, "compile_cpu_s": 0.2},
            "other": other,
        }
    )
    assert row.startswith("ResNet-50")
    want = "1.00 4.50 6.00 0.10 1.00 2.00 2.50 0.30 0.20 3.00 4.00 21/21 800 0.50"
    assert row.split()[1:] == want.split()
    assert len(bench_compile.HEADER.split()) == len(row.split()) + 1  # "RSS MB": two words
    alone = bench_compile.table_row({"model": "w2x200", "cold": COLD, "cached": {}})
    assert alone.split()[-7:] == "- - - - - 800 0.50".split()  # no cached or other-weights run


def test_a_failed_model_says_why() -> None:
    row = bench_compile.table_row({"model": "vit_b16", "cold": {"error": "boom"}, "cached": {}})
    assert row.endswith("failed: boom")


def test_softmax_chain_twin() -> None:
    onnx = pytest.importorskip("onnx")
    model = bench_compile._softmax_chain(3)
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["Softmax"] * 3


def test_unknown_model_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_compile.main(["--only", "nosuchmodel"])
    assert "unknown model(s) nosuchmodel" in capsys.readouterr().err


def test_other_weights_keep_the_architectures_scalars(tmp_path: Path) -> None:
    """ "Other weights" scales the weights by 1.01, not scalar constants such as an
    attention scale or ReLU6's bound, nor integer initializers."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    inits = {
        "w": np.full((2, 2), 2.0, np.float32),
        "scale": np.array(0.125, np.float32),
        "hi": np.array([6.0], np.float32),
        "shape": np.array([2, 2], np.int64),
    }
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2])],
        [numpy_helper.from_array(a, name) for name, a in inits.items()],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    model = bench_compile._reweighted(path)  # noqa: SLF001
    got = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got["w"], np.full((2, 2), np.float32(2.0) * np.float32(1.01)))
    for name in ("scale", "hi", "shape"):
        np.testing.assert_array_equal(got[name], inits[name])
