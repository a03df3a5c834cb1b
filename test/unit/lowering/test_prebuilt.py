"""Prebuilt ops (`dlc.lowering.prebuilt`): an op made from a prototype is the op its
constructor makes (class, operands, result types, properties, attributes, text)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, VectorType, f32, i1, i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.lowering import prebuilt

PTR = llvm.LLVMPointerType()
CASES: list[tuple[str, list, Callable[..., Operation], Callable[..., Operation]]] = [
    ("add", [i64, i64], prebuilt.add, llvm.AddOp),
    ("mul", [i64, i64], prebuilt.mul, llvm.MulOp),
    (
        "load",
        [PTR],
        lambda p: prebuilt.load(p, VectorType(f32, [8]), 32),
        lambda p: llvm.LoadOp(p, VectorType(f32, [8]), alignment=32),
    ),
    (
        "store",
        [f32, PTR],
        lambda v, p: prebuilt.store(v, p, 4),
        lambda v, p: llvm.StoreOp(v, p, alignment=4),
    ),
    (
        "element",
        [PTR, i64],
        lambda b, k: prebuilt.element(b, k, f32),
        lambda b, k: llvm.GEPOp(b, [llvm.GEP_USE_SSA_VAL], f32, ssa_indices=[k], inbounds=True),
    ),
    (
        "icmp",
        [i64, i64],
        lambda a, b: prebuilt.icmp(2, a, b),
        lambda a, b: llvm.ICmpOp(a, b, IntegerAttr(2, 64)),
    ),
]


def _same(made: Operation, expected: Operation, operands: tuple[SSAValue, ...]) -> None:
    assert type(made) is type(expected)
    assert tuple(made.operands) == operands
    assert [r.type for r in made.results] == [r.type for r in expected.results]
    assert made.properties == expected.properties
    assert made.attributes == expected.attributes
    block = Block()
    block.add_ops([made, expected])  # printed side by side: the same text but the names
    assert str(made).split("=")[-1] == str(expected).split("=")[-1]


@pytest.mark.parametrize("name, types, fast, slow", CASES, ids=[c[0] for c in CASES])
def test_prototype_ops_are_the_constructors_ops(
    name: str, types: list, fast: Callable[..., Operation], slow: Callable[..., Operation]
) -> None:
    first, second = Block(arg_types=types), Block(arg_types=types)
    _same(fast(*first.args), slow(*first.args), first.args)  # the prototype, or one from it
    _same(fast(*second.args), slow(*second.args), second.args)  # one from the prototype


def test_keys_tell_result_types_apart() -> None:
    """An `icmp` of vectors gives a vector of i1, of scalars an i1."""
    scalars = Block(arg_types=[i64, i64])
    vectors = Block(arg_types=[VectorType(i64, [4])] * 2)
    assert prebuilt.icmp(4, *scalars.args).results[0].type == i1
    assert prebuilt.icmp(4, *vectors.args).results[0].type == VectorType(i1, [4])
