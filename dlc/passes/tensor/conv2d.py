"""Recognizing an ungrouped 2-D convolution among `tensor.compute`s.

`lower-graph-to-tensor` lowers `convolve` to one compute (dlc/lowering/
graph_to_tensor/windows.py); once its padding is materialized, an ungrouped 2-D
convolution is the nest

    y[n, o, oh, ow] = sum over (c, kh, kw) of x[n, c, oh·sh + kh·dh, ow·sw + kw·dw]
                                              · k[o, c, kh, kw]

with the kernel read in place, or a splat kernel folded into the body as a float
constant. `conv2d_of` finds that shape by the affine forms of the read indices, so a
hand-written compute of the same shape is recognized too; anything else (selects,
gathers, groups, other bodies) is not a `Conv2d`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import SSAValue

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.passes.tensor.affine import CONST, Form, combine

Affine = Form
"""index argument number -> coefficient; key `CONST` (-1) holds the constant term."""


@dataclass(frozen=True)
class Conv2d:
    """A recognized 2-D convolution compute and its parameters."""

    op: tensor.ComputeOp
    x: SSAValue
    kernel: SSAValue | None  # None: a splat, the body's constant `splat`
    splat: arith.ConstantOp | None
    strides: tuple[int, int]
    dilations: tuple[int, int]

    @property
    def domain(self) -> tuple[int, ...]:
        return self.op.domain

    @property
    def dtype(self) -> str:
        t = self.op.result.type
        assert isinstance(t, TensorType)
        return t.dt

    @property
    def channels(self) -> int:
        return self.op.reduction_extents[0]

    @property
    def taps(self) -> tuple[int, int]:
        _, kh, kw = self.op.reduction_extents
        return kh, kw


def _affine_forms(op: tensor.ComputeOp) -> dict[SSAValue, Affine] | None:
    """The affine form of every i64 value of `op`'s body, or None when the body holds
    an op a convolution's body does not (module docstring)."""
    forms: dict[SSAValue, Affine] = {a: {a.index: 1} for a in op.body.block.args}
    for inner in op.body.block.ops:
        if isinstance(inner, tensor.ReadOp | tensor.YieldOp | arith.MulfOp):
            continue
        if isinstance(inner, arith.ConstantOp) and inner.result.type != i64:
            continue  # a splat kernel's value
        if isinstance(inner, arith.ConstantOp) and isinstance(inner.value, IntegerAttr):
            forms[inner.result] = {CONST: inner.value.value.data}
            continue
        if not isinstance(inner, arith.AddiOp | arith.SubiOp | arith.MuliOp):
            return None
        lhs, rhs = forms.get(inner.lhs), forms.get(inner.rhs)
        if lhs is None or rhs is None:
            return None
        form = combine(inner, lhs, rhs)
        if form is None:
            return None
        forms[inner.result] = form
    return forms


def _is(form: Affine | None, terms: Affine) -> bool:
    """`form` has exactly the positive coefficients `terms` and no constant."""
    if form is None:
        return False
    return {k: v for k, v in form.items() if v != 0} == terms


def conv2d_of(op: tensor.ComputeOp) -> Conv2d | None:
    """`op` as a `Conv2d` (module docstring), or None."""
    if op.combinator is None or op.combinator.data != "add" or op.init is not None:
        return None
    if op.schedule is not None or len(op.domain) != 4 or len(op.reduction_extents) != 3:
        return None
    forms = _affine_forms(op)
    block = op.body.block
    yielded = block.last_op
    if forms is None or not isinstance(yielded, tensor.YieldOp):
        return None
    product = yielded.value.owner
    if not isinstance(product, arith.MulfOp):
        return None
    for value, weight in (product.operands, product.operands[::-1]):
        conv = _match(op, forms, value, weight)
        if conv is not None:
            return conv
    return None


def _match(
    op: tensor.ComputeOp, forms: dict[SSAValue, Affine], value: SSAValue, weight: SSAValue
) -> Conv2d | None:
    read = value.owner
    if not isinstance(read, tensor.ReadOp) or len(read.indices) != 4:
        return None
    reads = [r for r in op.body.block.ops if isinstance(r, tensor.ReadOp)]
    n, o, oh, ow, c, kh, kw = range(7)
    where = [forms.get(i) for i in read.indices]
    if not (_is(where[0], {n: 1}) and _is(where[1], {c: 1})):
        return None
    rows, cols = where[2] or {}, where[3] or {}
    if rows.get(-1, 0) or cols.get(-1, 0) or set(rows) - {-1} != {oh, kh}:
        return None
    if set(cols) - {-1} != {ow, kw} or min(rows[oh], rows[kh], cols[ow], cols[kw]) < 1:
        return None
    strides, dilations = (rows[oh], cols[ow]), (rows[kh], cols[kw])
    source = weight.owner
    if isinstance(source, arith.ConstantOp) and len(reads) == 1:
        return Conv2d(op, read.tensor, None, source, strides, dilations)
    if not isinstance(source, tensor.ReadOp) or len(reads) != 2:
        return None
    taps = [forms.get(i) for i in source.indices]
    if len(taps) != 4 or not all(_is(f, {a: 1}) for f, a in zip(taps, (o, c, kh, kw), strict=True)):
        return None
    return Conv2d(op, read.tensor, source.tensor, None, strides, dilations)
