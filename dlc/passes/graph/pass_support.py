"""Helpers shared by the graph-level optimization passes.

- literal matching: `splat_value(v)` is the scalar of an inline literal (`1: f32`), of a
  splat literal (`literal 0.0: <2 x 3 x f32>`) or of `zero`, whatever the shape;
- literal building: `splat(c, T)` makes `c: dt` inline for scalars, `literal c: T` else;
- purity: `pure_functions(module)` and `is_pure(op, pure)` follow the sound purity
  table of docs/reference/semantics.md (random, memory, allocation, stack and refcount ops are impure; `apply` is
  pure only when its callee is, recursion counting as impure);
- patterns: `rewrite_once(module, pattern, counting)` applies a pattern in one sweep and
  counts the ops it replaced or modified;
- control flow: `edges`/`rebuild_terminator` for branch operands (the CFG analyses live in
  `dlc.dialects.cfg`, whose `successors`, `predecessors` and `reachable` are re-exported).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriterListener, PatternRewriteWalker, RewritePattern
from xdsl.traits import IsTerminator, Pure

# successors, predecessors and reachable moved to dlc.dialects.cfg; re-exported here.
from dlc.dialects.cfg import predecessors, reachable, successors  # noqa: F401
from dlc.dialects.graph import BranchOp, ConditionalOp, FuncOp, LiteralOp
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_types import TensorType, dtype_is_bool, dtype_is_float

Scalar = int | float | bool

# -- literals ---------------------------------------------------------------------


def splat_value(value: SSAValue) -> Scalar | None:
    """c when `value` is a literal whose every element is c (inline, splat or zero)."""
    op = value.owner
    if not isinstance(op, LiteralOp) or not isinstance(value.type, TensorType):
        return None
    tree = op.value.data
    if tree[0] == "zero":
        return False if dtype_is_bool(value.type.dt) else 0
    if tree[0] in ("int", "float", "bool"):
        return tree[1]
    return None


def is_splat(value: SSAValue, c: Scalar) -> bool:
    """`value` is a splat literal equal to c (either sign of zero when c is 0)."""
    v = splat_value(value)
    return v is not None and not isinstance(v, bool) and v == c


def is_minus_zero(value: SSAValue) -> bool:
    """`value` is -0.0 in a float tensor, or 0 in an integer one (where 0 has no sign)."""
    v = splat_value(value)
    if v is None or isinstance(v, bool) or v != 0 or not isinstance(value.type, TensorType):
        return False
    return not dtype_is_float(value.type.dt) or math.copysign(1.0, v) < 0


def is_plus_zero(value: SSAValue) -> bool:
    """`value` is +0.0 in a float tensor, or 0 in an integer one."""
    v = splat_value(value)
    if v is None or isinstance(v, bool) or v != 0 or not isinstance(value.type, TensorType):
        return False
    return not dtype_is_float(value.type.dt) or math.copysign(1.0, v) > 0


def is_float(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and dtype_is_float(value.type.dt)


def splat(c: Scalar, t: TensorType) -> LiteralOp:
    """`c: dt` (inline) for a scalar type, `literal c: T` for any other shape."""
    tree: tuple[str, bool | float | int]
    if dtype_is_bool(t.dt):
        tree = ("bool", bool(c))
    elif dtype_is_float(t.dt):
        tree = ("float", float(c))
    else:
        tree = ("int", int(c))
    return LiteralOp(LiteralAttr(tree), t, inline=t.rank == 0)


# -- purity -----------------------------------------------------------------------


def pure_functions(module: ModuleOp) -> set[str]:
    """Names of the defined functions whose bodies are pure (least fixpoint, so a
    recursive function, which may not terminate, is impure)."""
    funcs = [f for f in module.ops if isinstance(f, FuncOp) and not f.is_declaration]
    pure: set[str] = set()
    changed = True
    while changed:
        changed = False
        for func in funcs:
            name = func.sym_name.data
            if name in pure or not func.body.blocks:
                continue
            if all(is_pure(op, pure) or op.has_trait(IsTerminator) for op in func.body.walk()):
                pure.add(name)
                changed = True
    return pure


def is_pure(op: Operation, pure: set[str]) -> bool:
    """`op` has no effect beyond its results (so it may be merged, moved or removed)."""
    if isinstance(op, ApplyOp):
        return op.callee.data in pure
    return op.has_trait(Pure)


def is_dead(op: Operation, pure: set[str]) -> bool:
    return (
        not op.has_trait(IsTerminator) and is_pure(op, pure) and all(not r.uses for r in op.results)
    )


def rewrite_once(module: ModuleOp, pattern: RewritePattern, counting: str = "replaced") -> int:
    """Apply `pattern` to every op of `module` in one sweep (what it builds is not
    matched again: `apply_recursively=False`); the number of ops it replaced, or with
    `counting="modified"` of in-place modifications."""
    count = 0

    def seen(*_args: object) -> None:
        nonlocal count
        count += 1

    if counting == "replaced":
        listener = PatternRewriterListener(operation_replacement_handler=[seen])
    else:
        listener = PatternRewriterListener(operation_modification_handler=[seen])
    PatternRewriteWalker(pattern, apply_recursively=False, listener=listener).rewrite_module(module)
    return count


def erase_dead_ops(module: ModuleOp, pure: set[str]) -> int:
    """Erase unused pure ops (and the ops that only they used); return how many."""
    work = [op for op in module.walk() if is_dead(op, pure)]
    erased = 0
    while work:
        op = work.pop()
        if op.parent is None or not is_dead(op, pure):
            continue
        operands = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        op.detach()
        op.erase()
        erased += 1
        work.extend(operands)
    return erased


def count_ops(module: ModuleOp) -> int:
    """Instructions in function bodies (declarations and the module op excluded)."""
    return sum(1 for f in module.ops if isinstance(f, FuncOp) for _ in f.body.walk())


def functions(module: ModuleOp) -> list[FuncOp]:
    return [f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks]


def tensor_of(v: SSAValue) -> TensorType:
    """The type of `v`, a tensor (the graph verifier has checked the operand types)."""
    assert isinstance(v.type, TensorType), v.type
    return v.type


# -- control flow -----------------------------------------------------------------

Edge = tuple[Block, list[SSAValue]]


def edges(term: Operation | None) -> list[Edge] | None:
    """(successor, arguments) of a branch or conditional; None for other terminators
    (return, branchEnum, whose block arguments come from the enum value) and for None
    (the `last_op` of an empty block)."""
    if isinstance(term, BranchOp):
        return [(term.dest, list(term.args))]
    if isinstance(term, ConditionalOp):
        return [(term.then_block, list(term.then_args)), (term.else_block, list(term.else_args))]
    return None


def rebuild_terminator(term: Operation | None, new_edges: list[Edge]) -> Operation:
    """Replace branch/conditional `term` by the same kind of op with `new_edges`."""
    if isinstance(term, BranchOp):
        ((dest, args),) = new_edges
        new: Operation = BranchOp(dest, args)
    else:
        assert isinstance(term, ConditionalOp)
        (then_block, then_args), (else_block, else_args) = new_edges
        new = ConditionalOp(term.cond, then_block, then_args, else_block, else_args)
    block = term.parent_block()
    assert block is not None
    block.insert_op_before(new, term)
    term.detach()
    term.erase()
    return new


def erase_blocks(blocks: list[Block]) -> None:
    """Erase `blocks` (their values must be unused outside them)."""
    for b in blocks:
        if b.parent is not None:
            b.parent.detach_block(b)
    for b in blocks:
        b.drop_all_references()
