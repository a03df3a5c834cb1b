"""The ops the nest builder makes from prototypes (`tensor_to_loop/loop_ops.py`) are
the ops their constructors make, and its constants (`tensor_to_loop/constants.py`)
are made once per function, where they dominate every use."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, f32, i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects import loop
from dlc.lowering.tensor_to_loop import loop_ops
from dlc.lowering.tensor_to_loop.constants import constant, offset

BUF = MemRefType(f32, [4, 8])
CASES: list[tuple[str, list, Callable[..., Operation]]] = [
    ("load", [BUF, i64, i64], lambda m, i, j: loop_ops.load(m, [i, j])),
    ("store", [f32, BUF, i64, i64], lambda v, m, i, j: loop_ops.store(v, m, [i, j])),
    ("vload", [BUF, i64, i64], lambda m, i, j: loop_ops.vload(m, [i, j], 8)),
    ("broadcast", [f32], lambda s: loop_ops.broadcast(s, 4)),
    ("addi", [i64, i64], loop_ops.addi),
]
SLOW: dict[str, Callable[..., Operation]] = {
    "load": lambda m, i, j: loop.LoadOp(m, [i, j]),
    "store": lambda v, m, i, j: loop.StoreOp(v, m, [i, j]),
    "vload": lambda m, i, j: loop.VLoadOp(m, [i, j], 8),
    "broadcast": lambda s: loop.BroadcastOp(s, 4),
    "addi": arith.AddiOp,
}


@pytest.mark.parametrize("name, types, fast", CASES, ids=[c[0] for c in CASES])
def test_prototype_loop_ops_are_the_constructors_ops(
    name: str, types: list, fast: Callable[..., Operation]
) -> None:
    block = Block(arg_types=types)
    operands = tuple(block.args)
    for _ in range(2):  # the first builds the prototype, the second is made from it
        made, expected = fast(*operands), SLOW[name](*operands)
        assert type(made) is type(expected)
        assert tuple(made.operands) == operands
        assert [r.type for r in made.results] == [r.type for r in expected.results]
        assert made.properties == expected.properties
        assert made.attributes == expected.attributes
        block.add_ops([made, expected])
        assert str(made).split("=")[-1] == str(expected).split("=")[-1]


def _function() -> tuple[loop.FuncOp, Builder, Builder]:
    """A function with a loop: builders at the end of its body and of the loop's."""
    func = loop.FuncOp("f", [BUF])
    top = Builder(InsertPoint.at_end(func.body.block))
    zero, four = (top.insert(arith.ConstantOp(IntegerAttr(n, i64))).result for n in (0, 4))
    nest = top.insert(loop.ForOp(zero, four, four))
    inner = Builder(InsertPoint.at_end(nest.body.block))
    return func, top, inner


def test_constants_are_made_once_at_the_function_entry() -> None:
    func, top, inner = _function()
    first = func.body.block.first_op
    a = constant(inner, IntegerAttr(7, i64))
    b = constant(top, IntegerAttr(7, i64))
    c = constant(inner, IntegerAttr(8, i64))
    assert a is b and a is not c
    entry = list(func.body.block.ops)
    assert entry[:3] == [a.owner, c.owner, first]  # in order made, before the rest
    assert constant(inner, FloatAttr(0.0, f32)) is not constant(inner, FloatAttr(-0.0, f32))
    assert constant(inner, FloatAttr(1.5, f32)) is constant(top, FloatAttr(1.5, f32))


def test_a_constant_moved_away_is_made_again() -> None:
    func, _, inner = _function()
    a = constant(inner, IntegerAttr(7, i64))
    assert isinstance(a.owner, Operation)
    a.owner.detach()
    b = constant(inner, IntegerAttr(7, i64))
    assert b is not a and b.owner.parent is func.body.block


def test_offsets_are_shared_within_a_block_only() -> None:
    func, top, inner = _function()
    nest = func.body.block.last_op
    assert isinstance(nest, loop.ForOp)
    iv: SSAValue = nest.iv
    x = offset(inner, iv, 3)
    assert offset(inner, iv, 3) is x
    assert offset(inner, iv, 4) is not x
    other = top.insert(loop.ForOp(iv, iv, iv))  # another block: its own addition
    assert offset(Builder(InsertPoint.at_end(other.body.block)), iv, 3) is not x


def test_constants_in_a_parallel_loop_are_made_in_its_body() -> None:
    func, top, _ = _function()
    zero = constant(top, IntegerAttr(0, i64))
    nest = top.insert(loop.ForOp(zero, zero, zero, parallel=True))
    inner = Builder(InsertPoint.at_end(nest.body.block))
    made = constant(inner, IntegerAttr(9, i64))
    assert made.owner.parent is nest.body.block  # outlined with the body: stays constant
    assert constant(inner, IntegerAttr(9, i64)) is made
    assert constant(top, IntegerAttr(9, i64)) is not made
