"""`lower-loop-to-llvm` builds its `llvm` ops from prototypes (`dlc.lowering.prebuilt.make`):
the llvm level it makes, and the LLVM IR printed from it, are byte-identical to those of
xDSL's constructors (`prebuilt.constructors()`), for the programs of the examples and the
lit tests and for ONNX models (convolutions; attention, GELU and layer normalization)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp, f32, i64
from xdsl.ir import Block, Region

import dlc
from dlc.lowering import prebuilt
from dlc.lowering.loop_to_llvm import lower_loop_to_llvm
from dlc.options import Options
from dlc.parser import parse_module
from dlc.program_levels import lower
from dlc.runtime import jit
from dlc.runtime.constant_data import BoundData

ROOT = Path(__file__).resolve().parents[4]
PROGRAMS = sorted(
    [
        *ROOT.glob("examples/*.dl"),
        *ROOT.glob("test/lit/dlvm/*.dl"),
        *ROOT.glob("test/lit/lowering/*.dl"),
    ]
)
assert lower_loop_to_llvm.LowerLoopToLLVMPass.name == "lower-loop-to-llvm"


def _programs(path: Path) -> list[str]:
    """The programs of a file that parse (lit files also hold programs that must not)."""
    good = []
    for index, text in enumerate(path.read_text().split("// -----")):
        try:
            parse_module(text, f"{path.name}#{index}")
        except dlc.DiagnosticError:
            continue
        good.append(text)
    return good


def _texts(level: ModuleOp) -> tuple[str, str]:
    """The llvm level as xDSL prints it, and the LLVM IR dlc prints from it."""
    return str(level), jit.ir_text(level, jit.target_machine(2), BoundData())


def _lowered(text: str, name: str, opt_level: int) -> tuple[str, str] | None:
    try:
        level, _ = lower(parse_module(text, name), Options(opt_level=opt_level))
    except dlc.DiagnosticError:
        return None  # a lit case of a located error at a later level
    return _texts(level)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_programs_lower_to_the_constructors_ir(path: Path) -> None:
    for index, text in enumerate(_programs(path)):
        for opt_level in (0, 2) if path.parent.name == "examples" else (2,):
            with prebuilt.constructors():  # also keeps a prototype of each op
                built = _lowered(text, path.name, opt_level)
            made = _lowered(text, path.name, opt_level)  # every op from a prototype
            assert made == built, f"{path.name} part {index} at opt_level={opt_level}"


def _onnx_texts(model: Any) -> tuple[str, str]:
    captured: list[tuple[str, str]] = []
    real = jit.ir_text

    def spy(level: ModuleOp, tm: Any, files: Any = None) -> str:
        text = real(level, tm, files)
        captured.append((str(level), text))
        return text

    mp = pytest.MonkeyPatch()
    mp.setattr(jit, "ir_text", spy)
    mp.setenv("DLC_CACHE", "0")  # compiled, not found in the cache
    try:
        dlc.compile_onnx(model.SerializeToString(), opt_level=2)
    finally:
        mp.undo()
    assert captured
    return captured[0]


def _conv_model(helper: Any, numpy_helper: Any, tp: Any) -> Any:
    import numpy as np

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3), dtype=np.float32), "w")
    d = numpy_helper.from_array(rng.standard_normal((16, 1, 3, 3), dtype=np.float32), "d")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "d"], ["e"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("GlobalAveragePool", ["e"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", tp.FLOAT, [1, 8, 20, 20])
    y = helper.make_tensor_value_info("y", tp.FLOAT, [1, 16, 1, 1])
    return helper.make_graph(nodes, "conv", [x], [y], [w, d])


def _attention_model(helper: Any, numpy_helper: Any, tp: Any) -> Any:
    import numpy as np

    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((32, 32), dtype=np.float32), "w")
    scale = numpy_helper.from_array(np.ones(32, dtype=np.float32), "s")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["q"]),
        helper.make_node("Transpose", ["q"], ["k"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "k"], ["a"]),
        helper.make_node("Softmax", ["a"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "q"], ["v"]),
        helper.make_node("Erf", ["v"], ["g"]),
        helper.make_node("LayerNormalization", ["g", "s"], ["y"], axis=-1),
    ]
    x = helper.make_tensor_value_info("x", tp.FLOAT, [2, 24, 32])
    y = helper.make_tensor_value_info("y", tp.FLOAT, [2, 24, 32])
    return helper.make_graph(nodes, "attention", [x], [y], [w, scale])


@pytest.mark.parametrize("build", [_conv_model, _attention_model], ids=["conv", "attention"])
def test_onnx_models_lower_to_the_constructors_ir(build: Any) -> None:
    onnx = pytest.importorskip("onnx")
    graph = build(onnx.helper, onnx.numpy_helper, onnx.TensorProto)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    with prebuilt.constructors():
        built = _onnx_texts(model)
    assert _onnx_texts(model) == built


def test_make_keeps_values_apart_that_were_one_value() -> None:
    """A prototype made of `x + x` does not make `x + y` into `x + x`, nor the reverse."""
    block = Block(arg_types=[i64, i64, i64])
    x, y, z = block.args
    twice = prebuilt.make(llvm.AddOp, x, x)
    both = prebuilt.make(llvm.AddOp, y, z)
    assert tuple(twice.operands) == (x, x) and tuple(both.operands) == (y, z)
    assert tuple(prebuilt.make(llvm.AddOp, z, z).operands) == (z, z)
    assert tuple(prebuilt.make(llvm.AddOp, z, x).operands) == (z, x)


def test_make_tells_apart_arguments_that_compare_equal() -> None:
    """0.0 == -0.0 in Python: each has its own prototype (and its own printed constant)."""
    from xdsl.dialects.builtin import FloatAttr

    plus = prebuilt.make(llvm.ConstantOp, FloatAttr(0.0, f32), f32)
    minus = prebuilt.make(llvm.ConstantOp, FloatAttr(-0.0, f32), f32)
    again = prebuilt.make(llvm.ConstantOp, FloatAttr(-0.0, f32), f32)
    assert str(minus) == str(again) != str(plus)


def test_make_builds_ops_with_regions_and_blocks() -> None:
    """Successors are the new blocks; an op taking a region is built by its constructor."""
    for name in ("f", "g"):
        func = prebuilt.make(llvm.FuncOp, name, llvm.LLVMFunctionType([]), body=Region(Block()))
        assert func.sym_name.data == name and len(func.body.blocks) == 1
    block = Block(arg_types=[i64])
    a, b, c = Block(), Block(), Block()
    first = prebuilt.make(llvm.BrOp, a, block.args[0])
    second = prebuilt.make(llvm.BrOp, b, block.args[0])
    assert tuple(first.successors) == (a,) and tuple(second.successors) == (b,)
    assert tuple(prebuilt.make(llvm.BrOp, c).successors) == (c,)
