"""End to end: trap (a Python exception from the call) and the bounds-checking build
mode (every generated load/store guarded; a violation raises IndexError naming the
op's location). Memory ops, random and stacks: test_e2e_language.py and test_e2e_runtime.py."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, f32, i64

import dlc
from dlc import TrapError
from dlc.diagnostics import DiagnosticError, Location, set_loc
from dlc.dialects import loop
from dlc.dialects.abi import function_symbol
from dlc.lowering.loop_to_llvm.lower_loop_to_llvm import LowerLoopToLLVMPass
from dlc.runtime.context import CallContext
from dlc.runtime.jit import JITModule

TRAP = """module "t"
stage raw

func @check: (f32) -> f32 {
'entry(%x: f32):
    %bad = lessThan %x: f32, 0: f32
    conditional %bad: bool then 'fail() else 'ok(%x: f32)
'fail():
    trap
    return 0: f32
'ok(%y: f32):
    %r = sqrt %y: f32
    return %r: f32
}

func @outer: (<3 x f32>) -> <3 x f32> {
'entry(%x: <3 x f32>):
    %s = reduce %x: <3 x f32> by min init inf: f32 along 0
    %y = apply @check(%s: f32): (f32) -> f32
    %z = add %x: <3 x f32>, %y: f32
    return %z: <3 x f32>
}
"""


@pytest.mark.parametrize("bounds_check", [False, True])
def test_trap_raises_from_the_call_and_the_module_stays_usable(bounds_check: bool) -> None:
    m = dlc.compile(TRAP, filename="trap.dl", bounds_check=bounds_check)
    x = np.array([4.0, 9.0, 16.0], np.float32)
    np.testing.assert_allclose(m.outer(x), x + 2.0)
    with pytest.raises(TrapError, match=r"^trap\.dl:9:5: trap$"):
        m.outer(np.array([1.0, -1.0, 2.0], np.float32))
    np.testing.assert_allclose(m.outer(x), x + 2.0)  # status was reset


def _oob_module(index: int) -> ModuleOp:
    """loop.func @f(in: memref<4xf32>, out: memref<f32>): out = in[index]."""
    func = loop.FuncOp("f", [MemRefType(f32, [4]), MemRefType(f32, [])])
    x, out = func.args
    b = Builder(InsertPoint.at_end(func.body.block))
    i = b.insert(arith.ConstantOp(IntegerAttr(index, i64))).result
    value = b.insert(loop.LoadOp(x, [i]))
    set_loc(value, Location("oob.dl", 7, 12, ""))
    b.insert(loop.StoreOp(value.res, out, []))
    b.insert(loop.ReturnOp())
    return ModuleOp([func])


def _run_checked(index: int) -> tuple[float, str | None]:
    module = _oob_module(index)
    LowerLoopToLLVMPass(bounds_check=True).apply(Context(), module)
    messages = [m.data for m in module.attributes["dlc.messages"].data]  # type: ignore[attr-defined]
    jit = JITModule(module)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(jit.address(function_symbol("f")))
    x = np.arange(4, dtype=np.float32) + 1
    out = np.zeros((), np.float32)
    ctx = CallContext(0)
    fn(ctx.address, x.ctypes.data, out.ctypes.data)
    word = ctx.status
    return float(out), (messages[word.value - 1] if word.value else None)


def test_bounds_check_reports_the_access_location() -> None:
    value, message = _run_checked(2)
    assert value == 3.0 and message is None
    value, message = _run_checked(5)
    assert value == 1.0  # the access was redirected to element 0
    assert (
        message == "bounds\toob.dl:7:12: out-of-bounds load from a buffer of shape [4] (loop.load)"
    )
    _, message = _run_checked(-1)
    assert message is not None and "out-of-bounds load" in message


def _run_vector_checked(index: int) -> tuple[np.ndarray, str | None]:
    """out[0:4] = x[index : index + 4] with one loop.vload / loop.vstore, x of 8."""
    func = loop.FuncOp("f", [MemRefType(f32, [8]), MemRefType(f32, [4])])
    x, out = func.args
    b = Builder(InsertPoint.at_end(func.body.block))
    i = b.insert(arith.ConstantOp(IntegerAttr(index, i64))).result
    zero = b.insert(arith.ConstantOp(IntegerAttr(0, i64))).result
    value = b.insert(loop.VLoadOp(x, [i], 4))
    set_loc(value, Location("oob.dl", 3, 5, ""))
    b.insert(loop.VStoreOp(value.res, out, [zero]))
    b.insert(loop.ReturnOp())
    module = ModuleOp([func])
    LowerLoopToLLVMPass(bounds_check=True).apply(Context(), module)
    messages = [m.data for m in module.attributes["dlc.messages"].data]  # type: ignore[attr-defined]
    jit = JITModule(module)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(jit.address(function_symbol("f")))
    data = np.arange(8, dtype=np.float32) + 1
    result = np.zeros(4, np.float32)
    ctx = CallContext(0)
    fn(ctx.address, data.ctypes.data, result.ctypes.data)
    word = ctx.status
    return result, (messages[word.value - 1] if word.value else None)


def test_vector_bounds_check_covers_every_lane() -> None:
    """A vector access is in bounds only if its last lane is: x[4:8] is, x[5:9] not."""
    value, message = _run_vector_checked(4)
    np.testing.assert_array_equal(value, [5, 6, 7, 8])
    assert message is None
    value, message = _run_vector_checked(5)
    np.testing.assert_array_equal(value, [1, 2, 3, 4])  # redirected to element 0
    assert message is not None
    assert "oob.dl:3:5: out-of-bounds load from a buffer of shape [8] (loop.vload)" in message


def test_bounds_check_pass_option_in_dlc_opt(tmp_path) -> None:
    from dlc.cli.dlc_opt import main

    path = tmp_path / "f.dl"
    path.write_text(
        'module "m"\nstage raw\n\nfunc @f: (<4 x f32>) -> <4 x f32> {\n'
        "'entry(%x: <4 x f32>):\n    %y = exp %x: <4 x f32>\n    return %y: <4 x f32>\n}\n"
    )
    out = tmp_path / "out.mlir"
    passes = "lower-graph-to-tensor,lower-tensor-to-loop,lower-loop-to-llvm{bounds_check=true}"
    assert main([str(path), "-p", passes, "-o", str(out)]) in (0, None)
    assert "dlc.messages" in out.read_text() and "icmp" in out.read_text()


I7_ADD = """module "m"
stage raw

func @f: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    return %a: f32
}

func @g: (<3 x i7>) -> <3 x i7> {
'entry(%x: <3 x i7>):
    %y = add %x: <3 x i7>, %x: <3 x i7>
    return %y: <3 x i7>
}
"""


def test_unsupported_ops_are_located_errors() -> None:
    with pytest.raises(DiagnosticError) as info:
        dlc.compile(I7_ADD, filename="m.dl")
    message = "not supported by the code generator yet: i7 data type"
    assert info.value.message == message
    assert (info.value.line, info.value.column) == (9, 6)
