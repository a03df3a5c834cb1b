"""Compile time stays near-linear in function length, and a function too large to
compile in reasonable time is a located diagnostic (lower-graph-to-tensor)."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import MAX_FUNCTION_INSTRUCTIONS


def _chain(n: int) -> str:
    """n element-wise instructions; every fifth reads x0, the others read the previous
    value twice (`x + x`: inlining each read separately doubled the fused body)."""
    lines = ['module "big"', "stage raw", "", "func @f: (<8 x f32>) -> <8 x f32> {"]
    lines.append("'entry(%x0: <8 x f32>):")
    for i in range(1, n + 1):
        other = f"%x{i - 1}" if i % 5 else "%x0"
        op = ("add", "multiply", "subtract")[i % 3]
        lines.append(f"    %x{i} = {op} %x{i - 1}: <8 x f32>, {other}: <8 x f32>")
    lines += [f"    return %x{n}: <8 x f32>", "}", ""]
    return "\n".join(lines)


def test_a_long_element_wise_chain_fuses_into_a_body_of_linear_size() -> None:
    """Fusion inlines a chain of 400 into one nest whose body has one op per
    instruction (before: every `x + x` doubled the inlined body, exponential)."""
    mod = dlc.compile(_chain(400))
    assert mod.stats("f")["loop_nests"] == 1
    (compute,) = [op for op in mod.ir_module("tensor").walk() if op.name == "tensor.compute"]
    assert len(compute.body.block.ops) <= 3 * 400
    x = np.full(8, 0.5, np.float32)
    assert np.isfinite(mod.f(x)).all()


def test_too_large_a_function_is_a_located_diagnostic() -> None:
    text = _chain(MAX_FUNCTION_INSTRUCTIONS + 1)
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text, filename="big.dl")
    assert str(info.value).splitlines()[0] == (
        f"big.dl:4:6: error: function @f is too large to compile: more than "
        f"{MAX_FUNCTION_INSTRUCTIONS} instructions (split it into smaller functions)"
    )
