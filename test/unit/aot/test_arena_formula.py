"""The arena of a call as a formula of its sizes, read from the loop level: every
`loop.alloc_sized` count as arithmetic on the sizes; a buffer inside a loop, or whose
count is not such arithmetic, is left out (the formula is then not exact)."""

from __future__ import annotations

from typing import Any

from xdsl.builder import InsertPoint
from xdsl.rewriter import Rewriter

import dlc
from dlc.aot.arena_formula import ArenaFormula, Expr, function_formula
from dlc.dialects import loop

PROGRAM = """\
module "a"
stage raw

func @f: (<%n x 8 x f32>, <8 x %m x f32>) -> <%n x %m x f32> {
'entry(%x: <%n x 8 x f32>, %w: <8 x %m x f32>):
    %h = dot %x: <%n x 8 x f32>, %w: <8 x %m x f32>
    %e = exp %h: <%n x %m x f32>
    %s = reduce %e: <%n x %m x f32> by add init 0: f32 along 1
    %s2 = padShape %s: <%n x f32> at 1
    %y = divide %e: <%n x %m x f32>, %s2: <%n x 1 x f32>
    return %y: <%n x %m x f32>
}
"""

OPS: dict[str, Any] = {
    "mul": lambda a, b: a * b,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "udiv": lambda a, b: a // b,
    "smax": max,
    "smin": min,
}


def _value(e: Expr, sizes: list[int]) -> int:
    if e[0] == "const":
        return int(e[1])
    if e[0] == "size":
        return sizes[e[1]]
    return int(OPS[e[0]](_value(e[1], sizes), _value(e[2], sizes)))


def _func() -> loop.FuncOp:
    module = dlc.compile(PROGRAM).ir_module("loop")
    return next(op for op in module.body.block.ops if isinstance(op, loop.FuncOp))


def _counts(formula: ArenaFormula, sizes: list[int]) -> list[int]:
    return sorted(_value(b.count, sizes) * b.element_bytes for b in formula.buffers)


def test_counts_are_arithmetic_on_the_sizes() -> None:
    formula = function_formula(_func(), 2, 128)
    assert formula.exact and formula.static_bytes == 128
    n, m = 5, 3
    for count in [n * 4, n * m * 4, n * m * 4]:  # the sums, the dot's result, exp's
        assert count in _counts(formula, [n, m])


def test_a_buffer_inside_a_loop_is_left_out() -> None:
    func = _func()
    full = function_formula(func, 2, 0)
    alloc = next(op for op in func.body.walk() if isinstance(op, loop.AllocSizedOp))
    nest = next(op for op in func.body.walk() if isinstance(op, loop.ForOp))
    alloc.detach()
    Rewriter.insert_op(alloc, InsertPoint.at_start(nest.body.block))
    formula = function_formula(func, 2, 0)
    assert not formula.exact and len(formula.buffers) == len(full.buffers) - 1


def test_a_count_of_a_loop_index_is_left_out() -> None:
    func = _func()
    alloc = next(op for op in func.body.walk() if isinstance(op, loop.AllocSizedOp))
    nest = next(op for op in func.body.walk() if isinstance(op, loop.ForOp))
    alloc.operands[0] = nest.iv  # not arithmetic on the sizes (the IR is not run)
    formula = function_formula(func, 2, 0)
    assert not formula.exact
