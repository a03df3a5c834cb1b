"""ONNX operators mapped to DLVM functions (`custom_ops=`, `--custom-op`) and
model-local functions (the model's own `functions`), against NumPy references."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import dlc  # noqa: E402
import dlc.onnx  # noqa: E402
from dlc.cli import dlc_run  # noqa: E402
from dlc.onnx import ImportLimits  # noqa: E402

SWISH = """module "swish"
stage raw

func @Swish: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %0.0 = multiply %x: <2 x 3 x f32>, -2: f32
    %0.1 = exp %0.0: <2 x 3 x f32>
    %0.2 = add %0.1: <2 x 3 x f32>, 1: f32
    %0.3 = divide %x: <2 x 3 x f32>, %0.2: <2 x 3 x f32>
    return %0.3: <2 x 3 x f32>
}
"""


def _swish(x: np.ndarray, beta: float = 2.0) -> np.ndarray:
    return x / (1 + np.exp(-beta * x))


def _model(nodes, shape=(2, 3), outputs=1, functions=(), domains=("my.ops",)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(outputs)]
    graph = helper.make_graph(nodes, "g", [x], outs)
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets, functions=list(functions))


def _chain(op="Swish", domain="my.ops", **attrs):
    return [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node(op, ["r"], ["s"], domain=domain, name="first", **attrs),
        helper.make_node(op, ["s"], ["y0"], domain=domain, name="second", **attrs),
    ]


def _x(shape=(2, 3)) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _errors(model, **kwargs) -> str:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.onnx.load(model, **kwargs)
    return info.value.format()


def test_text_mapping_is_called_and_imported_once() -> None:
    model = _model(_chain())
    module = dlc.onnx.load(model, custom_ops={("my.ops", "Swish"): SWISH})
    names = [f.sym_name.data for f in module.ops]
    assert names == ["custom.my.ops.Swish", "g"]
    compiled = dlc.compile_onnx(model, custom_ops={("my.ops", "Swish"): SWISH})
    x = _x()
    want = _swish(_swish(np.maximum(x, 0)))
    np.testing.assert_allclose(compiled.g(x), want, rtol=1e-6, atol=1e-7)


def test_callable_mapping_sees_shapes_and_attributes() -> None:
    seen = []

    def swish(node: dlc.onnx.CustomNode) -> str:
        seen.append((node.name, node.input_shapes, node.input_dtypes, node.attributes))
        t = "<" + " x ".join(map(str, node.input_shapes[0])) + f" x {node.input_dtypes[0]}>"
        beta = -node.attributes["beta"]
        return (
            SWISH.replace("<2 x 3 x f32>", t)
            .replace("-2: f32", f"{beta}: f32")
            .replace("@Swish", "@swish_any")
        )

    nodes = [
        helper.make_node("Swish", ["x"], ["s"], domain="my.ops", name="a", beta=0.5),
        helper.make_node("ReduceSum", ["s"], ["t"], keepdims=0, axes=[0]),  # opset-13 form
        helper.make_node("Swish", ["t"], ["y0"], domain="my.ops", name="b", beta=0.5),
    ]
    model = _model(nodes, shape=(4, 5), domains=("my.ops",))
    model.opset_import[0].version = 12
    compiled = dlc.compile_onnx(model, custom_ops={("my.ops", "Swish"): swish})
    x = _x((4, 5))
    want = _swish(_swish(x, 0.5).sum(axis=0), 0.5)
    np.testing.assert_allclose(compiled.g(x), want, rtol=1e-5, atol=1e-6)
    assert [s[:3] for s in seen] == [("a", ((4, 5),), ("f32",)), ("b", ((5,),), ("f32",))]
    assert seen[0][3] == {"beta": 0.5}
    module = dlc.onnx.load(model, custom_ops={("my.ops", "Swish"): swish})
    assert [f.sym_name.data for f in module.ops] == [
        "custom.my.ops.Swish",
        "custom.my.ops.Swish.1",
        "g",
    ]


def test_helpers_are_renamed_with_their_calls_and_tuples_split() -> None:
    text = """module "pair"
stage raw

func @twice: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %0.0 = add %x: <2 x 3 x f32>, %x: <2 x 3 x f32>
    return %0.0: <2 x 3 x f32>
}

func @Pair: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%x: <2 x 3 x f32>):
    %0.0 = apply @twice(%x: <2 x 3 x f32>): (<2 x 3 x f32>) -> <2 x 3 x f32>
    %0.1 = negate %x: <2 x 3 x f32>
    %0.2 = literal (%0.0: <2 x 3 x f32>, %0.1: <2 x 3 x f32>): (<2 x 3 x f32>, <2 x 3 x f32>)
    return %0.2: (<2 x 3 x f32>, <2 x 3 x f32>)
}
"""
    nodes = [helper.make_node("Pair", ["x"], ["y0", "y1"], domain="my.ops")]
    model = _model(nodes, outputs=2)
    module = dlc.onnx.load(model, custom_ops={("my.ops", "Pair"): text})
    assert [f.sym_name.data for f in module.ops] == [
        "custom.my.ops.Pair.twice",
        "custom.my.ops.Pair",
        "g",
    ]
    compiled = dlc.compile_onnx(model, custom_ops={("my.ops", "Pair"): text})
    x = _x()
    twice, negated = compiled.g(x)
    np.testing.assert_array_equal(twice, 2 * x)
    np.testing.assert_array_equal(negated, -x)


def test_unmapped_operator_says_how_to_map_it() -> None:
    message = _errors(_model(_chain()))
    assert "node 'first' (Swish): operator domain 'my.ops' is not supported" in message
    assert "map my.ops::Swish to a DLVM function with custom_ops=" in message


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        (
            SWISH.replace("exp %0.0", "expo %0.0"),
            "its DLVM text: <custom_ops my.ops::Swish>:7:12: ",
        ),
        (
            SWISH.replace("<2 x 3 x f32>", "<3 x 2 x f32>"),
            "@Swish takes (<3 x 2 x f32>), the node's inputs are (<2 x 3 x f32>)",
        ),
        (SWISH + SWISH.split("stage raw")[1].replace("@Swish", "@other"), None),
        (
            SWISH.replace("@Swish", "@a") + SWISH.split("stage raw")[1].replace("@Swish", "@b"),
            "its DLVM text defines 2 functions and none is named @Swish",
        ),
        (
            SWISH.replace("stage raw\n", "stage raw\n\nstruct $P {\n    #a: f32\n}\n"),
            "its DLVM text may define functions only, not struct",
        ),
        (lambda node: 42, "its custom_ops function returned int, not DLVM text"),
        (lambda node: 1 / 0, "its custom_ops function raised ZeroDivisionError: division by zero"),
    ],
)
def test_bad_mappings_name_the_node(mapping, expected) -> None:
    if expected is None:  # a second function beside @Swish is a helper: fine
        dlc.onnx.load(_model(_chain()), custom_ops={("my.ops", "Swish"): mapping})
        return
    message = _errors(_model(_chain()), custom_ops={("my.ops", "Swish"): mapping})
    assert message.startswith("<model>: error: node 'first' (Swish): ")
    assert expected in message


def test_output_count_must_match() -> None:
    nodes = [helper.make_node("Swish", ["x"], ["y0", "y1"], domain="my.ops", name="n")]
    message = _errors(_model(nodes, outputs=2), custom_ops={("my.ops", "Swish"): SWISH})
    assert "node 'n' (Swish): the mapped function returns 1 values for 2 outputs" in message


@pytest.mark.parametrize(
    ("custom_ops", "expected"),
    [
        ([("my.ops", "Swish")], "custom_ops: expected a mapping, got list"),
        ({"Swish": SWISH}, "custom_ops: keys are (domain, op_type) pairs of str, got 'Swish'"),
        ({("my.ops", "Swish"): 3}, "expected DLVM text or a callable, got int"),
    ],
)
def test_malformed_custom_ops_are_type_errors(custom_ops, expected) -> None:
    with pytest.raises(TypeError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        dlc.onnx.load(_model(_chain()), custom_ops=custom_ops)


def test_a_mapping_may_replace_a_default_domain_operator() -> None:
    relu_as_abs = SWISH.replace("@Swish", "@Relu").split("'entry")[0] + (
        "'entry(%x: <2 x 3 x f32>):\n    %0.0 = multiply %x: <2 x 3 x f32>, %x: <2 x 3 x f32>\n"
        "    return %0.0: <2 x 3 x f32>\n}\n"
    )
    model = _model([helper.make_node("Relu", ["x"], ["y0"])], domains=())
    compiled = dlc.compile_onnx(model, custom_ops={("ai.onnx", "Relu"): relu_as_abs})
    x = _x()
    np.testing.assert_array_equal(compiled.g(x), x * x)


# ---- model-local functions ------------------------------------------------------------


def _double(domain="my.fn"):
    return helper.make_function(
        domain,
        "Double",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )


def _calls(name, callee, times, domain="my.fn"):
    nodes, prev = [], "a"
    for k in range(times):
        out = "b" if k == times - 1 else f"t{k}"
        nodes.append(helper.make_node(callee, [prev], [out], domain=domain))
        prev = out
    return helper.make_function(
        domain,
        name,
        ["a"],
        ["b"],
        nodes,
        [helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)],
    )


def test_model_local_functions_are_imported_as_their_bodies() -> None:
    quad = _calls("Quad", "Double", 2)
    nodes = [helper.make_node("Quad", ["x"], ["y0"], domain="my.fn")]
    model = _model(nodes, functions=[_double(), quad], domains=("my.fn",))
    compiled = dlc.compile_onnx(model)
    x = _x()
    np.testing.assert_array_equal(compiled.g(x), 4 * x)


def test_local_function_attributes_take_the_call_or_the_default() -> None:
    scale = helper.make_function(
        "my.fn",
        "Scale",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["k"], value_float=0.0),
            helper.make_node("Mul", ["a", "k"], ["b"]),
        ],
        [helper.make_opsetid("", 17)],
    )
    ref = onnx.AttributeProto()
    ref.name, ref.type, ref.ref_attr_name = "value_float", onnx.AttributeProto.FLOAT, "k"
    del scale.node[0].attribute[:]
    scale.node[0].attribute.append(ref)
    scale.attribute_proto.append(helper.make_attribute("k", 3.0))
    nodes = [
        helper.make_node("Scale", ["x"], ["s"], domain="my.fn"),  # the default, 3
        helper.make_node("Scale", ["s"], ["y0"], domain="my.fn", k=0.5),
    ]
    model = _model(nodes, functions=[scale], domains=("my.fn",))
    x = _x()
    np.testing.assert_allclose(dlc.compile_onnx(model).g(x), x * 1.5, rtol=1e-7)


def test_recursive_local_functions_are_refused() -> None:
    loop = _calls("Loop", "Loop", 1)
    model = _model(
        [helper.make_node("Loop", ["x"], ["y0"], domain="my.fn", name="l")],
        functions=[loop],
        domains=("my.fn",),
    )
    message = _errors(model)
    assert "model-local function my.fn::Loop calls itself" in message


def test_exponential_local_function_expansion_is_bounded() -> None:
    functions = [_double()]
    for level in range(1, 25):  # level k calls level k-1 twice: 2^24 Adds
        callee = "Double" if level == 1 else f"L{level - 1}"
        functions.append(_calls(f"L{level}", callee, 2))
    nodes = [helper.make_node("L24", ["x"], ["y0"], domain="my.fn", name="top")]
    model = _model(nodes, functions=functions, domains=("my.fn",))
    message = _errors(model, limits=ImportLimits(max_function_nodes=1000))
    assert "node 'top' (L24)" in message
    assert (
        "expand to more than 1000 nodes (raise it with ImportLimits(max_function_nodes=...))"
        in message
    )


# ---- the command line -----------------------------------------------------------------


def test_dlc_run_custom_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(_model(_chain()), tmp_path / "m.onnx")
    (tmp_path / "swish.dl").write_text(SWISH)
    argv = [str(tmp_path / "m.onnx"), "--custom-op", f"my.ops::Swish={tmp_path / 'swish.dl'}"]
    assert dlc_run.main([*argv, "--random-inputs"]) == 0
    assert "output 0: <2 x 3 x f32>" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("Swish=swish.dl", "--custom-op expects DOMAIN::OP=FILE.dl, got 'Swish=swish.dl'"),
        ("my.ops::Swish", "--custom-op expects DOMAIN::OP=FILE.dl, got 'my.ops::Swish'"),
        (
            "my.ops::Swish=missing.dl",
            "--custom-op my.ops::Swish: cannot read 'missing.dl': No such file",
        ),
    ],
)
def test_dlc_run_custom_op_errors(
    spec: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(_model(_chain()), tmp_path / "m.onnx")
    assert dlc_run.main(["m.onnx", "--custom-op", spec, "--random-inputs"]) == 1
    assert f"dlc-run: error: {expected}" in capsys.readouterr().err


def test_dlc_run_custom_op_is_for_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "swish.dl").write_text(SWISH)
    spec = f"my.ops::Swish={tmp_path / 'swish.dl'}"
    assert dlc_run.main([str(tmp_path / "swish.dl"), "--custom-op", spec, "--random-inputs"]) == 1
    assert "--custom-op applies to ONNX models only" in capsys.readouterr().err


C_SWISH = r"""
#include <math.h>
void dlc_test_swish(const float *x, float *out) {
    for (int i = 0; i < 6; i++) out[i] = x[i] / (1.0f + expf(-2.0f * x[i]));
}
"""

EXTERN_SWISH = """module "swish"
stage raw

[extern]
func @dlc_test_swish: (<2 x 3 x f32>) -> <2 x 3 x f32>

func @Swish: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %0.0 = apply @dlc_test_swish(%x: <2 x 3 x f32>): (<2 x 3 x f32>) -> <2 x 3 x f32>
    return %0.0: <2 x 3 x f32>
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on this machine")
def test_a_custom_operator_may_call_an_allowed_c_function(tmp_path: Path) -> None:
    import ctypes

    (tmp_path / "swish.c").write_text(C_SWISH)
    library = tmp_path / "libswish.so"
    cmd = ["cc", "-shared", "-fPIC", "-O1", str(tmp_path / "swish.c"), "-o", str(library), "-lm"]
    subprocess.run(cmd, check=True)
    ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    model = _model(_chain())
    mapping = {("my.ops", "Swish"): EXTERN_SWISH}
    with pytest.raises(dlc.DiagnosticError, match="dlc_test_swish"):
        dlc.compile_onnx(model, custom_ops=mapping)  # the C function is a capability
    compiled = dlc.compile_onnx(model, custom_ops=mapping, externs=["dlc_test_swish"])
    x = _x()
    want = _swish(_swish(np.maximum(x, 0)))
    np.testing.assert_allclose(compiled.g(x), want, rtol=1e-6, atol=1e-7)
