"""Integer division and remainder out of index expressions, where ranges allow.

A reshape reads its input through a linear offset taken apart again by `divsi` and
`remsi` (`lower_shape_cast`). Once fusion has inlined chains of reshapes and slices
(a channel split of an NCHW tensor is shapeCast · slice · shapeCast), a body computes
offsets such as ((c + 80)·784 + h·28 + w) / 28 % 28, which is just h: the divisions
stay in the loop, keep it from vectorizing, and cost tens of cycles per element.

Each i64 value of a `tensor.compute` body that is an affine form of the body's
indices (`affine.combine`: sums, differences, products by constants, Σ aᵢ·xᵢ + b) is
tracked, and an index ranges over its extent; a clamp (`minsi`, `maxsi`, `select`: how a
concatenation or a padding reads) is a variable of its own, ranging as its operands
allow. For `x / c` and `x % c` (c > 0) with x ≥ 0,
the terms of x whose coefficients c divides (and the multiple of c in b) are the
quotient's; when the rest r lies in [0, c), x / c = (x − r) / c exactly and x % c = r,
and the division is replaced by that affine form, spelled with `muli`/`addi` (the ops
it replaces are erased when nothing else reads them). Anything else is left alone.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects.tensor_compute import ComputeOp
from dlc.passes.tensor.affine import CONST, Form, combine

Ranges = dict[SSAValue, tuple[int, int]]


def _bounds(form: Form, ranges: Ranges) -> tuple[int, int] | None:
    """The least and greatest value of `form` over its variables' ranges (None when a
    variable has none)."""
    lo = hi = form.get(CONST, 0)
    for v, k in form.items():
        if v == CONST or k == 0:
            continue
        r = ranges.get(v)  # type: ignore[call-overload]
        if r is None:
            return None
        a, b = k * r[0], k * r[1]
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def _split(x: Form, c: int) -> tuple[Form, Form]:
    """(q, r) with x = c·q + r: q the terms c divides and ⌊b / c⌋, r the rest."""
    const = x.get(CONST, 0)
    q = {v: k // c for v, k in x.items() if v != CONST and k % c == 0}
    r = {v: k for v, k in x.items() if v != CONST and k % c != 0}
    return {**q, CONST: const // c}, {**r, CONST: const % c}


def _constant(v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def simplify_indices(compute: ComputeOp) -> int:
    """Replace the `divsi` / `remsi` of `compute`'s body that ranges decide; return how
    many (module docstring)."""
    block = compute.body.block
    extents = (*compute.domain, *compute.reduction_extents)
    ranges: Ranges = {a: (0, n - 1) for a, n in zip(block.args, extents, strict=True) if n > 0}
    forms: dict[SSAValue, Form] = {a: {a: 1} for a in ranges}
    replaced = 0
    for op in list(block.walk()):
        if not op.results or op.results[0].type != i64:
            continue
        out = op.results[0]
        value = _constant(out)
        operands = [forms.get(v) for v in op.operands]
        if value is not None:
            forms[out] = {CONST: value}
        elif isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
            lhs, rhs = operands
            form = combine(op, lhs, rhs) if lhs is not None and rhs is not None else None
            if form is not None:
                forms[out] = form
        elif isinstance(op, arith.MinSIOp | arith.MaxSIOp | arith.SelectOp):
            # a clamp (a concatenation's or a padding's read): a new variable whose range
            # follows from its operands'
            known = [_bounds(f, ranges) for f in operands[-2:] if f is not None]
            bounds = [k for k in known if k is not None]
            if len(bounds) == 2:
                (alo, ahi), (blo, bhi) = bounds
                if isinstance(op, arith.SelectOp):
                    ranges[out] = (min(alo, blo), max(ahi, bhi))
                else:
                    pick = min if isinstance(op, arith.MinSIOp) else max
                    ranges[out] = (pick(alo, blo), pick(ahi, bhi))
                forms[out] = {out: 1}
        elif isinstance(op, arith.DivSIOp | arith.RemSIOp):
            x, c = operands[0], _constant(op.operands[1])
            if x is None or c is None or c <= 0:
                continue
            whole = _bounds(x, ranges)
            if whole is None or whole[0] < 0:
                continue
            q, r = _split(x, c)
            rest = _bounds(r, ranges)
            if rest is None or rest[0] < 0 or rest[1] >= c:
                continue
            result = q if isinstance(op, arith.DivSIOp) else r
            new = _spell(result, op)
            forms[new] = result  # its readers come later in the walk
            out.replace_all_uses_with(new)
            replaced += 1
    if replaced:
        _erase_dead(block)
    return replaced


def _spell(form: Form, before: Operation) -> SSAValue:
    """`form` as arith ops inserted before `before`."""
    block = before.parent_block()
    assert block is not None
    ops: list[Operation] = []

    def emit(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    total: SSAValue | None = None
    for v, k in form.items():
        if v == CONST or k == 0:
            continue
        assert isinstance(v, SSAValue)
        term = (
            v
            if k == 1
            else emit(arith.MuliOp(v, emit(arith.ConstantOp.from_int_and_width(k, i64))))
        )
        total = term if total is None else emit(arith.AddiOp(total, term))
    const = form.get(CONST, 0)
    if total is None or const:
        c = emit(arith.ConstantOp.from_int_and_width(const, i64))
        total = c if total is None else emit(arith.AddiOp(total, c))
    if ops:
        block.insert_ops_before(ops, before)
    return total


def _erase_dead(block: Block) -> None:
    """Erase the integer arith ops no one reads any more: in reverse order, so the
    operands of an erased op are seen after it, with one use fewer."""
    kinds = (
        arith.AddiOp,
        arith.SubiOp,
        arith.MuliOp,
        arith.DivSIOp,
        arith.RemSIOp,
        arith.ConstantOp,
    )
    for op in reversed(list(block.walk())):
        if isinstance(op, kinds) and not any(r.uses for r in op.results):
            owner = op.parent_block()
            assert owner is not None
            owner.erase_op(op)
