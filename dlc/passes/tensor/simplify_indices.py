"""Integer division and remainder out of index expressions, where ranges allow.

A reshape reads its input through a linear offset taken apart again by `divsi` and
`remsi` (`lower_shape_cast`). Once fusion has inlined chains of reshapes and slices
(a channel split of an NCHW tensor is shapeCast · slice · shapeCast), a body computes
offsets such as ((c + 80)·784 + h·28 + w) / 28 % 28, which is just h: the divisions
stay in the loop, keep it from vectorizing, and cost tens of cycles per element.

Each i64 value of a `tensor.compute` body that is an affine form of the body's
indices (sums, differences, products by constants: Σ aᵢ·xᵢ + b) is tracked with its
range (an index ranges over its extent); a clamp (`minsi`, `maxsi`, `select`: how a
concatenation or a padding reads) is a variable of its own, ranging as its operands
allow. For `x / c` and `x % c` (c > 0) with x ≥ 0,
the terms of x whose coefficients c divides (and the multiple of c in b) are the
quotient's; when the rest r lies in [0, c), x / c = (x − r) / c exactly and x % c = r,
and the division is replaced by that affine form, spelled with `muli`/`addi` (the ops
it replaces are erased when nothing else reads them). Anything else is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects.tensor_compute import ComputeOp


@dataclass(frozen=True)
class Affine:
    """Σ coeff·var + const over index values, with the range that follows from theirs."""

    terms: tuple[tuple[SSAValue, int], ...]
    const: int
    lo: int | None
    hi: int | None

    def key(self) -> dict[SSAValue, int]:
        return dict(self.terms)


def _combine(a: Affine, b: Affine, sign: int, ranges: dict[SSAValue, tuple[int, int]]) -> Affine:
    terms = a.key()
    for v, k in b.terms:
        terms[v] = terms.get(v, 0) + sign * k
    return _make(terms, a.const + sign * b.const, ranges)


def _make(
    terms: dict[SSAValue, int], const: int, ranges: dict[SSAValue, tuple[int, int]]
) -> Affine:
    kept = tuple((v, k) for v, k in terms.items() if k != 0)
    lo: int | None = const
    hi: int | None = const
    for v, k in kept:
        r = ranges.get(v)
        if r is None or lo is None or hi is None:
            lo = hi = None
            continue
        a, b = k * r[0], k * r[1]
        lo, hi = lo + min(a, b), hi + max(a, b)
    return Affine(kept, const, lo, hi)


def _split(x: Affine, c: int, ranges: dict[SSAValue, tuple[int, int]]) -> tuple[Affine, Affine]:
    """(q, r) with x = c·q + r: q the terms c divides and ⌊b / c⌋, r the rest."""
    q_terms = {v: k // c for v, k in x.terms if k % c == 0}
    r_terms = {v: k for v, k in x.terms if k % c != 0}
    return _make(q_terms, x.const // c, ranges), _make(r_terms, x.const % c, ranges)


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
    ranges: dict[SSAValue, tuple[int, int]] = {
        a: (0, n - 1) for a, n in zip(block.args, extents, strict=True) if n > 0
    }
    forms: dict[SSAValue, Affine] = {a: _make({a: 1}, 0, ranges) for a in ranges}
    replaced = 0
    for op in list(block.walk()):
        if not op.results or op.results[0].type != i64:
            continue
        out = op.results[0]
        value = _constant(out)
        if value is not None:
            forms[out] = _make({}, value, ranges)
            continue
        operands = [forms.get(v) for v in op.operands]
        if isinstance(op, arith.AddiOp | arith.SubiOp) and None not in operands:
            a, b = operands
            assert a is not None and b is not None
            forms[out] = _combine(a, b, 1 if isinstance(op, arith.AddiOp) else -1, ranges)
        elif isinstance(op, arith.MuliOp) and None not in operands:
            a, b = operands
            assert a is not None and b is not None
            scale, form = (
                (a.const, b) if not a.terms else (b.const, a) if not b.terms else (None, a)
            )
            if scale is not None:
                forms[out] = _make(
                    {v: k * scale for v, k in form.terms}, form.const * scale, ranges
                )
        elif isinstance(op, arith.MinSIOp | arith.MaxSIOp | arith.SelectOp):
            # a clamp (a concatenation's or a padding's read): a new variable whose range
            # follows from its operands'
            known = [f for f in operands[-2:] if f is not None and f.lo is not None]
            if len(known) == 2:
                (a, b), pick = known, min if isinstance(op, arith.MinSIOp) else max
                if isinstance(op, arith.SelectOp):
                    lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)  # type: ignore[type-var]
                else:
                    lo, hi = pick(a.lo, b.lo), pick(a.hi, b.hi)  # type: ignore[type-var]
                ranges[out] = (lo, hi)  # type: ignore[assignment]
                forms[out] = _make({out: 1}, 0, ranges)
        elif isinstance(op, arith.DivSIOp | arith.RemSIOp):
            x, c = operands[0], _constant(op.operands[1])
            if x is None or c is None or c <= 0 or x.lo is None or x.lo < 0:
                continue
            q, r = _split(x, c, ranges)
            if r.lo is None or r.hi is None or r.lo < 0 or r.hi >= c:
                continue
            result = q if isinstance(op, arith.DivSIOp) else r
            new = _spell(result, op)
            forms[new] = result  # its readers come later in the walk
            op.results[0].replace_all_uses_with(new)
            replaced += 1
    if replaced:
        _erase_dead(block)
    return replaced


def _spell(form: Affine, before: Operation) -> SSAValue:
    """`form` as arith ops inserted before `before`."""
    block = before.parent_block()
    assert block is not None
    ops: list[Operation] = []

    def emit(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    total: SSAValue | None = None
    for v, k in form.terms:
        term = (
            v
            if k == 1
            else emit(arith.MuliOp(v, emit(arith.ConstantOp.from_int_and_width(k, i64))))
        )
        total = term if total is None else emit(arith.AddiOp(total, term))
    if total is None or form.const:
        c = emit(arith.ConstantOp.from_int_and_width(form.const, i64))
        total = c if total is None else emit(arith.AddiOp(total, c))
    if ops:
        block.insert_ops_before(ops, before)
    return total


def _erase_dead(block: Block) -> None:
    """Erase the integer arith ops no one reads any more (in reverse order)."""
    kinds = (
        arith.AddiOp,
        arith.SubiOp,
        arith.MuliOp,
        arith.DivSIOp,
        arith.RemSIOp,
        arith.ConstantOp,
    )
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.walk())):
            if isinstance(op, kinds) and not any(r.uses for r in op.results):
                block_of = op.parent_block()
                assert block_of is not None
                block_of.erase_op(op)
                changed = True
