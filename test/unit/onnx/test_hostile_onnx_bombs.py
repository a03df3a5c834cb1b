"""Import bombs: ~100-byte ONNX models whose numbers ask for gigabytes or minutes
(issue 28). Sizes are checked before anything is allocated, evaluated or built; each
refusal is an `OnnxImportError` naming the node. The models are imported in a child
process under a 3 GiB address-space limit (`resource.setrlimit`), so a regression fails
(MemoryError) instead of swapping the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dlc
import dlc.onnx
from dlc.onnx import ImportLimits
from dlc.onnx.importer import OnnxImportError

F = TensorProto.FLOAT
I64 = np.int64
LIMIT = "more than the limit of 268435456 (raise it with ImportLimits(max_elements=...))"


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int]],
    inits: dict[str, np.ndarray],
    opset: int = 18,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _node(op: str, inputs: list[str], **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, inputs, ["y"], name="bomb", **attrs)


GIGA = np.array([1 << 30], I64)
BOMBS: dict[str, tuple[onnx.ModelProto, str]] = {
    "ConstantOfShape": (
        _model([_node("ConstantOfShape", ["s"])], {}, {"s": GIGA}),
        f"the output would have 1073741824 elements (shape [1073741824]), {LIMIT}",
    ),
    "Expand": (
        _model([_node("Expand", ["x", "s"])], {}, {"x": np.ones(1, np.float32), "s": GIGA}),
        f"the output would have 1073741824 elements (shape [1073741824]), {LIMIT}",
    ),
    "Expand of an input": (
        _model([_node("Expand", ["x", "s"])], {"x": [1]}, {"s": GIGA}),
        f"the output would have 1073741824 elements (shape [1073741824]), {LIMIT}",
    ),
    "Add broadcast": (
        _model(
            [_node("Add", ["a", "b"])],
            {},
            {"a": np.ones((1 << 16, 1), np.float32), "b": np.ones((1, 1 << 16), np.float32)},
        ),
        f"output 'y' would have 4294967296 elements (shape [65536, 65536]), {LIMIT}",
    ),
    "Range": (
        _model(
            [_node("Range", ["a", "b", "c"])],
            {},
            {"a": np.array(0, I64), "b": np.array(1 << 29, I64), "c": np.array(1, I64)},
        ),
        "operator Range (its function body: node 'y.8.Loop' (Loop): scan outputs of more "
        "than 1048576 iterations)",
    ),
    "Split": (
        helper.make_model(
            helper.make_graph(
                [helper.make_node("Split", ["x"], ["y", "z"], name="bomb", num_outputs=1 << 30)],
                "g",
                [helper.make_tensor_value_info("x", F, [4])],
                [helper.make_tensor_value_info("y", F, None)],
            ),
            opset_imports=[helper.make_opsetid("", 18)],
        ),
        "num_outputs=1073741824 but the node has 2 outputs",
    ),
    "Tile": (
        _model([_node("Tile", ["x", "r"])], {"x": [1]}, {"r": np.array([1 << 29], I64)}),
        f"the output would have 536870912 elements (shape [536870912]), {LIMIT}",
    ),
    "Pad": (
        _model([_node("Pad", ["x", "p"], mode="edge")], {"x": [1]}, {"p": np.array([0, 1 << 29])}),
        f"the output would have 536870913 elements (shape [536870913]), {LIMIT}",
    ),
    "Resize": (
        _model(
            [_node("Resize", ["x", "", "s"])],
            {"x": [1, 1, 2, 2]},
            {"s": np.array([1, 1, 1e9, 1e9], np.float32)},
        ),
        "the output would have 4000000000000000000 elements (shape [1, 1, 2000000000, "
        f"2000000000]), {LIMIT}",
    ),
}

CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import dlc.onnx
from dlc.onnx.importer import OnnxImportError
out = {}
for path in sys.argv[1:]:
    try:
        dlc.onnx.load(path)
        out[path] = "imported"
    except OnnxImportError as err:
        out[path] = err.problems
    except BaseException as err:
        out[path] = f"{type(err).__name__}: {err}"
print(json.dumps(out))
"""


def test_import_bombs_are_refused_under_a_memory_limit(tmp_path: Path) -> None:
    paths = {}
    for k, (name, (model, _)) in enumerate(BOMBS.items()):
        paths[name] = str(tmp_path / f"bomb{k}.onnx")
        onnx.save(model, paths[name])
    child = subprocess.run(
        [sys.executable, "-c", CHILD, *paths.values()],
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang, not a timing assertion
        check=False,
    )
    assert child.returncode == 0, child.stderr
    got = json.loads(child.stdout)
    for name, (_, message) in BOMBS.items():
        assert got[paths[name]] == [f"node 'bomb' ({name.split()[0]}): {message}"], name


def test_tile_and_pad_build_a_few_ops_whatever_the_counts() -> None:
    """Tile repeats [10^6] once built one concatenate operand per repeat (15-28 s)."""
    for model in (
        _model([_node("Tile", ["x", "r"])], {"x": [2]}, {"r": np.array([10**6], I64)}),
        _model([_node("Pad", ["x", "p"], mode="wrap")], {"x": [3]}, {"p": np.array([10**6, 5])}),
        _model([_node("Pad", ["x", "p"], mode="edge")], {"x": [3]}, {"p": np.array([10**6, 5])}),
    ):
        module = dlc.onnx.load(model)
        assert sum(1 for _ in module.walk()) < 20
    x = np.array([1, 2, 3], np.float32)
    wrap = _model([_node("Pad", ["x", "p"], mode="wrap")], {"x": [3]}, {"p": np.array([4, 5])})
    assert dlc.compile_onnx(wrap).g(x).tolist() == np.pad(x, (4, 5), mode="wrap").tolist()
    edge = _model([_node("Pad", ["x", "p"], mode="edge")], {"x": [3]}, {"p": np.array([2, 3])})
    assert dlc.compile_onnx(edge).g(x).tolist() == np.pad(x, (2, 3), mode="edge").tolist()
    tile = _model([_node("Tile", ["x", "r"])], {"x": [3]}, {"r": np.array([4], I64)})
    assert dlc.compile_onnx(tile).g(x).tolist() == np.tile(x, 4).tolist()


def test_limits_are_options() -> None:
    model = _model([_node("ConstantOfShape", ["s"])], {}, {"s": np.array([1 << 20], I64)})
    with pytest.raises(OnnxImportError, match="more than the limit of 1000"):
        dlc.onnx.load(model, limits=ImportLimits(max_elements=1000))
    big = dlc.onnx.load(model, limits=ImportLimits(max_elements=1 << 30))
    assert big is not None
    model = _model([_node("ConstantOfShape", ["s"])], {}, {"s": np.array([1 << 29], I64)})
    with pytest.raises(OnnxImportError):
        dlc.compile_onnx(model)
    assert dlc.onnx.load(model, limits=ImportLimits(max_elements=1 << 29)) is not None


@pytest.mark.parametrize("dim", [-1, -5])
def test_negative_declared_dims_are_unknown(dim: int) -> None:
    """[-5] once reached the C header as a dimension; any negative is unknown, as -1
    is for the exporters that write it (the message shows the model's own text)."""
    model = _model([_node("Relu", ["x"])], {"x": [dim, 3]}, {})
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [
        f"input 'x': dynamic shape ({dim}, 3); give its shape with input_shapes={{'x': (...)}} "
        "(dlc-run: --input-shape x=...)"
    ]
    out = dlc.compile_onnx(model, input_shapes={"x": (2, 3)}).g(-np.ones((2, 3), np.float32))
    assert out.tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("opset", [0, -1, 1 << 62])
def test_absurd_opsets_are_refused(opset: int) -> None:
    model = _model([_node("Relu", ["x"])], {"x": [3]}, {}, opset=opset)
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert info.value.problems == [
        f"opset {opset} of the default domain is not a valid opset (1 to 64; raise it with "
        "ImportLimits(max_opset=...))"
    ]


def test_initializer_dims_that_do_not_match_its_data() -> None:
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    del w.dims[:]
    w.dims.extend([1000])
    model = _model([_node("Identity", ["w"])], {}, {})
    model.graph.initializer.append(w)
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(model)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(
        "initializer 'w': its data does not match its dims [1000] and type ("
    )
    assert isinstance(info.value, dlc.DiagnosticError)
