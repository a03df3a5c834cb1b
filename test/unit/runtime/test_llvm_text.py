"""dlc's own printer of LLVM IR (dlc/runtime/llvm_text.py) against xDSL's converter:
for the programs of the examples and the lit tests and an ONNX model, LLVM parses
both texts into the same module (names included), the compiled functions give the
same bits, and a module with an op the printer does not spell still compiles (through
the converter)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import llvmlite.binding as llvm_binding
import numpy as np
import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp, VectorType, f32, i32, i64
from xdsl.ir import Block, Region

import dlc
from dlc.options import Options
from dlc.parser import parse_module
from dlc.program_levels import lower
from dlc.runtime import jit, llvm_text
from dlc.runtime.constant_data import BoundData, DataFiles, module_text

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = sorted(
    [
        *ROOT.glob("examples/*.dl"),
        *ROOT.glob("test/lit/dlvm/*.dl"),
        *ROOT.glob("test/lit/lowering/*.dl"),
    ]
)


def _parts(path: Path) -> list[str]:
    """The programs of a file that lower (lit files also hold programs that must not)."""
    good = []
    for index, text in enumerate(path.read_text().split("// -----")):
        try:
            parse_module(text, f"{path.name}#{index}")
        except Exception as e:  # a lit case of a diagnostic: not a program to print
            if type(e).__name__ not in ("DiagnosticError", "ParseError", "VerifyException"):
                raise
            continue
        good.append(text)
    return good


def _both(level: ModuleOp, tm: Any, files: Any = None) -> tuple[str, str]:
    """The module LLVM parses from dlc's text and from xDSL's converter's."""
    new = llvm_binding.parse_assembly(jit.ir_text(level, tm, files() if files else BoundData()))
    old_ir = jit.llvmlite_module(level, tm, files() if files else BoundData())
    old = llvm_binding.parse_assembly(module_text(old_ir))
    new.verify()
    return str(new), str(old)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_programs_print_as_the_converter_does(path: Path) -> None:
    tm = jit.target_machine(2)
    for index, text in enumerate(_parts(path)):
        for opt_level in (0, 2):
            try:
                level, _ = lower(parse_module(text, path.name), Options(opt_level=opt_level))
            except dlc.DiagnosticError:
                continue  # a lit case of a located error at a later level
            new, old = _both(level, tm)
            assert new == old, f"{path.name} part {index} at opt_level={opt_level}"


def _onnx_level(**options: Any) -> ModuleOp:
    onnx_models = pytest.importorskip("onnx_models")
    model = _small_conv_model(onnx_models)
    captured: list[ModuleOp] = []
    real = jit.ir_text

    def spy(level: ModuleOp, tm: Any, files: Any = None) -> str:
        captured.append(level.clone())
        return real(level, tm, files)

    mp = pytest.MonkeyPatch()
    mp.setattr(jit, "ir_text", spy)
    mp.setenv("DLC_CACHE", "0")  # compiled, not found in the cache
    try:
        dlc.compile_onnx(model.SerializeToString(), **options)
    finally:
        mp.undo()
    assert captured
    return captured[0]


def _small_conv_model(onnx_models: Any) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(onnx_models.randn(8, 3, 3, 3, seed=1), "w")
    b = numpy_helper.from_array(onnx_models.randn(8, seed=2), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("files", [None, DataFiles], ids=["bytes", "included"])
def test_onnx_model_with_weights_prints_as_the_converter_does(files: Any) -> None:
    pytest.importorskip("onnx")
    level = _onnx_level(opt_level=2)
    tm = jit.target_machine(2)
    if files is None:  # data as `c"..."` text
        new = jit.ir_text(level, tm, None)
        old = module_text(jit.llvmlite_module(level, tm, None))
        assert str(llvm_binding.parse_assembly(new)) == str(llvm_binding.parse_assembly(old))
        return
    with DataFiles() as a, DataFiles() as b:  # data by `.incbin` (each its own file)
        new = jit.ir_text(level, tm, a)
        old = module_text(jit.llvmlite_module(level, tm, b))
    assert new.count(".incbin") == old.count(".incbin") >= 1
    assert "__dlc_const_0 = external hidden constant" in new


def _old_path(level: ModuleOp, tm: Any, files: Any = None) -> str:
    return module_text(jit.llvmlite_module(level, tm, files))


@pytest.mark.parametrize("name", ["mlp", "softmax", "lstm_cell"])
def test_compiled_functions_give_the_same_bits(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "examples" / f"{name}.dl").read_text()
    rng = np.random.default_rng(7)
    monkeypatch.setenv("DLC_CACHE", "0")
    new = dlc.compile(text, opt_level=0)
    monkeypatch.setattr(jit, "ir_text", _old_path)
    old = dlc.compile(text, opt_level=0)
    for fn in parse_module(text, name).body.block.ops:
        args = _inputs(fn, rng)
        if args is None:
            continue
        got, want = new[fn.sym_name.data](*args), old[fn.sym_name.data](*args)
        for g, w in zip(np.atleast_1d(got) if not isinstance(got, tuple) else got, _tuple(want)):
            assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


def _tuple(value: Any) -> tuple:
    return value if isinstance(value, tuple) else tuple(np.atleast_1d(value))


def _inputs(fn: Any, rng: np.random.Generator) -> list[np.ndarray] | None:
    """Random inputs for a function of float tensors (None for any other function)."""
    if not hasattr(fn, "sym_name") or not fn.body.blocks:
        return None
    args = []
    for arg in fn.body.blocks[0].args:
        dims, dt = getattr(arg.type, "dims", None), getattr(arg.type, "dt", None)
        if dims is None or dt not in ("f32", "f64"):
            return None
        args.append(rng.standard_normal(tuple(dims)).astype(dt.replace("f", "float")))
    return args


def test_onnx_model_gives_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    onnx_models = pytest.importorskip("onnx_models")
    model = _small_conv_model(onnx_models).SerializeToString()
    x = onnx_models.randn(1, 3, 12, 12, seed=3)
    monkeypatch.setenv("DLC_CACHE", "0")
    new = dlc.compile_onnx(model, opt_level=0)
    monkeypatch.setattr(jit, "ir_text", _old_path)
    old = dlc.compile_onnx(model, opt_level=0)
    name = new.functions[0]
    assert np.asarray(new[name](x)).tobytes() == np.asarray(old[name](x)).tobytes()


def _fma_module() -> ModuleOp:
    """`f(a, b, c) = fma(a, b, c)` on `<4 x float>` through `llvm.intr.fma`, an op the
    printer leaves to xDSL's converter."""
    vec = VectorType(f32, [4])
    block = Block(arg_types=[vec, vec, vec])
    fma = llvm.FMAOp(*block.args)
    block.add_ops([fma, llvm.ReturnOp(fma.res)])
    ftype = llvm.LLVMFunctionType([vec, vec, vec], vec)
    func = llvm.FuncOp("f", ftype, linkage=llvm.LinkageAttr("external"), body=Region(block))
    counter = llvm.GlobalOp(i64, "count", "internal", value=None)
    return ModuleOp([counter, func])


def test_an_op_the_printer_does_not_know_goes_through_the_converter() -> None:
    module = _fma_module()
    tm = jit.target_machine(0)
    with pytest.raises(llvm_text.Unsupported, match="fma"):
        llvm_text.module_text(module, tm.triple, str(tm.target_data), lambda op: None)
    parsed = llvm_binding.parse_assembly(jit.ir_text(module, tm))
    parsed.verify()
    assert "llvm.fma.v4f32" in str(parsed)


def test_flags_print_in_llvms_order() -> None:
    """Fast-math and overflow flags are sets: printed in LLVM's order, not the set's
    (whose order changes with the process's string hashing), a module prints alike in
    every process, and so does a unit's content name and cache key."""
    block = Block(arg_types=[f32, f32, i64])
    flags = llvm.FastMathAttr(list(llvm.FastMathFlag))
    add = llvm.FAddOp(block.args[0], block.args[1], fast_math=flags)
    trunc = llvm.TruncOp(block.args[2], i32, overflow=llvm.OverflowAttr(list(llvm.OverflowFlag)))
    block.add_ops([add, trunc, llvm.ReturnOp(add.res)])
    ftype = llvm.LLVMFunctionType([f32, f32, i64], f32)
    func = llvm.FuncOp("f", ftype, linkage=llvm.LinkageAttr("external"), body=Region(block))
    tm = jit.target_machine(0)
    text = "\n".join(
        llvm_text.module_text(ModuleOp([func]), tm.triple, str(tm.target_data), lambda op: None)
    )
    assert "fadd nnan ninf nsz arcp contract afn reassoc float" in text
    assert "trunc nuw nsw i64" in text
