"""Lane masks on loop-level vectors (`loop.vcmpf`, `loop.vselect`) -> lower-loop-to-llvm
-> JIT: every predicate lane by lane as scalar `arith.cmpf` gives it (NaN lanes
included), and a libm function on a vector called lane by lane."""

from __future__ import annotations

import math as pymath

import numpy as np
import pytest
from test_loop_llvm import c64, call
from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, MemRefType, ModuleOp, f32, f64
from xdsl.ir import SSAValue

from dlc.dialects import loop
from dlc.lowering.loop_to_llvm.lower_loop_to_llvm import LowerLoopToLLVMPass
from dlc.runtime.jit import JITModule

A = np.array([1.0, np.nan, 2.0, 1.0, np.nan, -0.0, np.inf, 3.0], np.float32)
B = np.array([1.0, 1.0, 1.0, 2.0, np.nan, 0.0, np.inf, -np.inf], np.float32)


def _jit(func: loop.FuncOp) -> JITModule:
    """Lowered without xDSL's verifier after the lowering: its `llvm.fcmp` and
    `llvm.select` take scalars only, LLVM (which verifies the module) takes vectors."""
    module = ModuleOp([func])
    module.verify()
    LowerLoopToLLVMPass().apply(Context(), module)
    return JITModule(module, 2)


def _masks(predicate: str) -> np.ndarray:
    """out = select(vcmpf(predicate, a, b), 1, 0) on one 8-lane vector."""
    func = loop.FuncOp("f", [MemRefType(f32, [8])] * 3)
    b = Builder(InsertPoint.at_end(func.body.block))
    a_vec, b_vec = (b.insert(loop.VLoadOp(arg, [c64(b, 0)], 8)).res for arg in func.args[:2])
    one, zero = (
        b.insert(loop.BroadcastOp(b.insert(arith.ConstantOp(FloatAttr(v, f32))), 8)).res
        for v in (1.0, 0.0)
    )
    mask = b.insert(loop.VCmpfOp(predicate, a_vec, b_vec)).res
    picked = b.insert(loop.VSelectOp(mask, one, zero)).res
    b.insert(loop.VStoreOp(picked, func.args[2], [c64(b, 0)]))
    b.insert(loop.ReturnOp())
    out = np.full(8, -1.0, np.float32)
    call(_jit(func), "f", A, B, out)
    return out


@pytest.mark.parametrize("predicate", loop.CMPF_PREDICATES)
def test_lane_compare_and_select(predicate: str) -> None:
    unordered = np.isnan(A) | np.isnan(B)
    with np.errstate(invalid="ignore"):
        base = {"eq": A == B, "gt": A > B, "ge": A >= B, "lt": A < B, "le": A <= B, "ne": A != B}
    if predicate in ("false", "true"):
        want = np.full(8, predicate == "true")
    elif predicate in ("ord", "uno"):
        want = ~unordered if predicate == "ord" else unordered
    elif predicate[0] == "o":
        want = base[predicate[1:]] & ~unordered
    else:
        want = base[predicate[1:]] | unordered
    assert _masks(predicate).tolist() == want.astype(np.float32).tolist()


def test_libm_function_lane_by_lane() -> None:
    """f64 erf on a 4-lane vector: four `erf` calls, the exact libm values."""
    func = loop.FuncOp("f", [MemRefType(f64, [4])] * 2)
    b = Builder(InsertPoint.at_end(func.body.block))
    x: SSAValue = b.insert(loop.VLoadOp(func.args[0], [c64(b, 0)], 4)).res
    y = b.insert(math.ErfOp(x)).result
    b.insert(loop.VStoreOp(y, func.args[1], [c64(b, 0)]))
    b.insert(loop.ReturnOp())
    x_np = np.array([-2.5, -0.1, 0.3, 1.7])
    out = np.zeros(4)
    call(_jit(func), "f", x_np, out)
    assert out.tolist() == [pymath.erf(v) for v in x_np]
