"""The arena a call of a function with symbolic dimensions needs, as a formula of its sizes.

A buffer sized at run time (`loop.alloc_sized`) takes `count * element bytes` rounded
up past a multiple of `loop.ARENA_ALIGN` at the arena's top (`lower-loop-to-llvm`'s
`sized_alloc`: the top only moves up during a call), after the function's static block
(`Report.arena_bytes`). Its `count` is arithmetic on the sizes (`loop.load` of the
sizes buffer at a constant index, constants, `arith` integer ops), read here from the
loop level as an expression tree (`Expr`) that `c_symbolic` turns into LLVM IR, so the
library computes the bytes for the sizes of a call. A buffer inside a `loop.if` counts
whether or not its branch runs (the formula is an upper bound); one inside a loop, or
whose count is not such arithmetic, is left out and `exact` is False: what does not fit
in the arena then comes from the heap, as it does when the caller's arena is smaller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue

from dlc.dialects import loop

Expr = tuple[Any, ...]
"""`("const", value)`, `("size", k)` (the k-th size) or `(op, lhs, rhs)`, `op` a key of
`BINARY`'s values."""

BINARY = {
    "arith.muli": "mul",
    "arith.addi": "add",
    "arith.subi": "sub",
    "arith.divui": "udiv",
    "arith.divsi": "sdiv",
    "arith.remui": "urem",
    "arith.remsi": "srem",
    "arith.maxsi": "smax",
    "arith.minsi": "smin",
    "arith.maxui": "umax",
    "arith.minui": "umin",
}
"""The integer ops a count may use -> the name of the operation in an `Expr`."""


@dataclass(frozen=True)
class SizedBuffer:
    """One buffer sized at run time: its element count and element bytes."""

    count: Expr
    element_bytes: int


@dataclass(frozen=True)
class ArenaFormula:
    """The arena bytes of one call: `static_bytes` plus each buffer's rounded bytes."""

    static_bytes: int
    buffers: tuple[SizedBuffer, ...]
    exact: bool  # every buffer sized at run time is in `buffers`


def _leaf(op: Operation, sizes: SSAValue) -> Expr | None:
    """A constant or a size, or None."""
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return ("const", op.value.value.data)
    if isinstance(op, loop.LoadOp) and op.buffer is sizes and len(op.indices) == 1:
        index = op.indices[0].owner
        if isinstance(index, arith.ConstantOp) and isinstance(index.value, IntegerAttr):
            return ("size", index.value.value.data)
    return None


def expression(value: SSAValue, sizes: SSAValue) -> Expr | None:
    """`value` as arithmetic on the sizes (the buffer `sizes`), or None (iterative: the
    chain of a count may be long)."""
    done: dict[SSAValue, Expr] = {}
    stack = [value]
    while stack:
        v = stack[-1]
        op = v.owner
        if v in done:
            stack.pop()
            continue
        if not isinstance(op, Operation):  # a block argument: a loop index
            return None
        leaf = _leaf(op, sizes)
        if leaf is None and op.name not in BINARY:
            return None
        if leaf is None:
            missing = [o for o in op.operands if o not in done]
            if missing:
                stack.extend(missing)
                continue
            leaf = (BINARY[op.name], done[op.operands[0]], done[op.operands[1]])
        done[v] = leaf
        stack.pop()
    return done[value]


def _in_loop(op: Operation, func: loop.FuncOp) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not func:
        if isinstance(parent, loop.ForOp):
            return True
        parent = parent.parent_op()
    return False


def function_formula(func: loop.FuncOp, params: int, static_bytes: int) -> ArenaFormula:
    """The formula of loop-level function `func` whose sizes buffer follows its
    `params` buffers."""
    sizes = func.body.blocks[0].args[params]
    buffers: list[SizedBuffer] = []
    exact = True
    for op in func.body.walk():
        if not isinstance(op, loop.AllocSizedOp):
            continue
        count = None if _in_loop(op, func) else expression(op.count, sizes)
        mtype = op.res.type
        assert isinstance(mtype, MemRefType)
        nbytes = loop.element_bytes(mtype.element_type)
        if count is None or nbytes is None:
            exact = False
            continue
        buffers.append(SizedBuffer(count, nbytes))
    return ArenaFormula(static_bytes, tuple(buffers), exact)


def arena_formulas(
    loop_level: ModuleOp, params: dict[str, int], static_bytes: int
) -> dict[str, ArenaFormula]:
    """The formula of each function named in `params` (name -> its parameter count)."""
    return {
        op.sym_name.data: function_formula(op, params[op.sym_name.data], static_bytes)
        for op in loop_level.body.block.ops
        if isinstance(op, loop.FuncOp) and op.sym_name.data in params
    }
