"""`convolve`, `reduceWindow` and `scan` as `tensor.compute`s (see graph_to_tensor_ops).

Semantics follow the reference interpreter (dlc/semantics/tensor.py):

* convolve: output [n, o, y...] = sum over (c, q...) of x'[n, j·cg + c, y·s + q·rd − lo]
  · k[o, c, q...] with j = o // (O // g) the group and x' the input dilated by
  leftDilation; positions outside x' (padding) or between dilated elements read 0.
* reduceWindow: output[o...] = fold(init, window elements in C order) where padded
  positions (low side total // 2, semantics.tensor.window_padding) contribute `init`.
* scan (add, multiply, min, max, and, or): along each listed dimension in turn,
  out[..i..] = fold over k of (k <= i ? x[..k..] : identity), a left fold in
  increasing k like the reference's sequential accumulate. Other combinators (no
  identity: function combinators `@f`, subtract, ...) become one `tensor.scan` per
  dimension: out[0] = x[0], out[k] = comb(out[k-1], x[k]), the reference's order.

Reads outside an operand are never emitted: a convolution or window that reaches into
padding reads a padded copy of its input (`_padded`: zeros for a convolution, the
window's `init` for reduceWindow, both what the reference folds there), whose
positions are affine in the output and tap indices: no clamps or selects per tap, and
a unit-stride window walks rows that vectorize (measured: docs/performance.md,
"Measurements behind the defaults"). Each window is folded
in the same order as before, so results do not change. (Whether a 2-D convolution
runs as a matrix product over the unfolded image instead is the tensor-level pass
`unfold-convolutions`'s decision, dlc/passes/tensor/unfold_convolutions.py.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from dlc.dialects import graph_tensor as gt
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_is_float
from dlc.lowering.graph_to_tensor.compute_builder import (
    BodyBuilder,
    Lowered,
    Splat,
    build_compute,
    lowered_type,
)
from dlc.lowering.graph_to_tensor.ops import Rule, combinator_name


def _out(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t


def _mul(s: BodyBuilder, a: SSAValue, k: int) -> SSAValue:
    return a if k == 1 else s.emit(arith.MuliOp(a, s.index(k)))


def _add(s: BodyBuilder, a: SSAValue, b: SSAValue) -> SSAValue:
    return s.emit(arith.AddiOp(a, b))


def _and(s: BodyBuilder, a: SSAValue | None, b: SSAValue) -> SSAValue:
    return b if a is None else s.emit(arith.AndIOp(a, b))


def _position(
    s: BodyBuilder, out: SSAValue, stride: int, tap: SSAValue, dilation: int, low: int
) -> SSAValue:
    """out·stride + tap·dilation − low (i64)."""
    pos = _add(s, _mul(s, out, stride), _mul(s, tap, dilation))
    return s.emit(arith.SubiOp(pos, s.index(low))) if low else pos


def _clamped(
    s: BodyBuilder, pos: SSAValue, size: int, dilation: int, check: bool
) -> tuple[SSAValue, SSAValue | None]:
    """(index into the undilated operand, validity i1 or None when always valid)."""
    if not check and dilation == 1:
        return pos, None
    valid = s.emit(
        arith.AndIOp(
            s.cmpi("sge", pos, s.index(0)), s.cmpi("slt", pos, s.index((size - 1) * dilation + 1))
        )
    )
    if dilation != 1:
        rem = s.emit(arith.RemSIOp(pos, s.index(dilation)))
        valid = s.emit(arith.AndIOp(valid, s.cmpi("eq", rem, s.index(0))))
    clamped = s.emit(arith.MaxSIOp(pos, s.index(0)))
    clamped = s.emit(arith.MinSIOp(clamped, s.index((size - 1) * dilation)))
    if dilation != 1:
        clamped = s.emit(arith.DivSIOp(clamped, s.index(dilation)))
    return clamped, valid


def _needs_check(
    size: int, out: int, stride: int, taps: int, dilation: int, low: int, left: int
) -> bool:
    """True when some (out, tap) position falls outside the (dilated) operand."""
    if out == 0 or taps == 0:
        return False
    last = (out - 1) * stride + (taps - 1) * dilation - low
    return low > 0 or last > (size - 1) * left


def lower_convolve(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.ConvolveOp)
    x, k = args
    xt, kt, out = lowered_type(x), lowered_type(k), _out(op)
    n = xt.rank - 2
    cfg = gt.conv_config(dict(op.properties), n)
    groups = cfg["groups"][0]
    og, cg = kt.dims[0] // groups, kt.dims[1]
    boolean = out.dt == "bool"
    if 0 in out.dims:
        return Splat(False if boolean else 0, out)
    checks = [
        _needs_check(
            xt.dims[2 + d],
            out.dims[2 + d],
            cfg["strides"][d],
            kt.dims[2 + d],
            cfg["right_dilation"][d],
            cfg["padding"][2 * d],
            cfg["left_dilation"][d],
        )
        for d in range(n)
    ]

    if any(checks) or any(d != 1 for d in cfg["left_dilation"]):
        x = _padded_input(b, x, xt, cfg)
        checks = [False] * n
        cfg = {**cfg, "padding": [0] * (2 * n), "left_dilation": [1] * n}
        xt = lowered_type(x)

    def body(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        c, taps = r[0], r[1:]
        channel = c
        if groups > 1:
            group = s.emit(arith.DivSIOp(i[1], s.index(og)))
            channel = _add(s, _mul(s, group, cg), c)
        indices, valid = [i[0], channel], None
        for d in range(n):
            pos = _position(
                s,
                i[2 + d],
                cfg["strides"][d],
                taps[d],
                cfg["right_dilation"][d],
                cfg["padding"][2 * d],
            )
            index, ok = _clamped(s, pos, xt.dims[2 + d], cfg["left_dilation"][d], checks[d])
            indices.append(index)
            if ok is not None:
                valid = _and(s, valid, ok)
        value = s.read(x, indices)
        if valid is not None:
            value = s.select(valid, value, s.const(False if boolean else 0, out.dt))
        weight = s.read(k, [i[1], c, *taps])
        return s.binary("and" if boolean else "multiply", out.dt, value, weight)

    init = Splat(False if boolean else 0, TensorType((), out.dt))
    compute = build_compute(
        b,
        out,
        body,
        reduction=[cg, *kt.dims[2:]],
        combinator="or" if boolean else "add",
        init=init,
    )
    return compute.result


def _padded_input(b: Builder, x: Lowered, xt: TensorType, cfg: dict[str, list[int]]) -> Lowered:
    """The input dilated by leftDilation and zero-padded: the convolution then reads it
    at affine indices without bounds selects."""
    n = xt.rank - 2
    pads = [(0, 0), (0, 0)] + [(cfg["padding"][2 * d], cfg["padding"][2 * d + 1]) for d in range(n)]
    zero = False if xt.dt == "bool" else 0
    return _padded(b, x, xt, pads, [1, 1, *cfg["left_dilation"]], lambda s: s.const(zero, xt.dt))


def _padded(
    b: Builder,
    x: Lowered,
    xt: TensorType,
    pads: Sequence[tuple[int, int]],
    dilations: Sequence[int],
    fill: Callable[[BodyBuilder], SSAValue],
) -> Lowered:
    """`x` dilated by `dilations` and padded by `pads` (low, high) per axis, the new
    positions holding `fill`: a window or convolution then reads it at affine indices,
    without clamps and selects (and, at unit stride, as contiguous rows)."""
    dims = [
        (size - 1) * dil + 1 + lo + hi if size else 0
        for size, dil, (lo, hi) in zip(xt.dims, dilations, pads, strict=True)
    ]
    padded = xt.with_shape(tuple(dims))

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        indices, valid = [], None
        for d, size in enumerate(xt.dims):
            lo, hi = pads[d]
            if not (lo or hi or dilations[d] != 1):
                indices.append(i[d])
                continue
            pos = s.emit(arith.SubiOp(i[d], s.index(lo))) if lo else i[d]
            index, ok = _clamped(s, pos, size, dilations[d], True)
            indices.append(index)
            valid = _and(s, valid, ok)  # type: ignore[arg-type]
        value = s.read(x, indices)
        return s.select(valid, value, fill(s)) if valid is not None else value

    return build_compute(b, padded, body).result


def lower_reduce_window(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    from dlc.semantics.tensor import window_padding

    assert isinstance(op, gt.ReduceWindowOp)
    comb = combinator_name(op, "reduceWindow")
    x, init = args[:2]
    xt, out = lowered_type(x), _out(op)
    window, strides = gt.ints(op.window), gt.ints(op.strides)
    if 0 in out.dims:
        return Splat(False if out.dt == "bool" else 0, out)
    pads = window_padding(xt.dims, window, strides, op.padding.data, out.dims)
    checks = [
        _needs_check(n, o, st, w, 1, lo, 1)
        for n, o, st, w, (lo, _) in zip(xt.dims, out.dims, strides, window, pads, strict=True)
    ]
    if any(checks):  # padded positions hold `init`: the window reads need no selects
        x = _padded(b, x, xt, pads, [1] * xt.rank, lambda s: s.read(init, []))
        xt = lowered_type(x)
        pads = [(0, 0)] * xt.rank
        checks = [False] * xt.rank

    def body(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        indices, valid = [], None
        for d, n in enumerate(xt.dims):
            pos = _position(s, i[d], strides[d], r[d], 1, pads[d][0])
            index, ok = _clamped(s, pos, n, 1, checks[d])
            indices.append(index)
            if ok is not None:
                valid = _and(s, valid, ok)
        value = s.read(x, indices)
        if valid is not None:
            value = s.select(valid, value, s.read(init, []))
        return value

    return build_compute(b, out, body, reduction=window, combinator=comb, init=init).result


def _identity(comb: str, dtype: str) -> int | float | bool:
    if dtype == "bool":
        return {"and": True, "or": False}[comb]
    if dtype_is_float(dtype):
        return {"add": -0.0, "multiply": 1.0, "min": math.inf, "max": -math.inf}[comb]
    bits = int(dtype[1:])
    if dtype.startswith("u"):
        return {"add": 0, "multiply": 1, "min": (1 << bits) - 1, "max": 0}[comb]
    return {"add": 0, "multiply": 1, "min": (1 << (bits - 1)) - 1, "max": -(1 << (bits - 1))}[comb]


def lower_scan(b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
    assert isinstance(op, gt.ScanOp)
    out = _out(op)
    comb = combinator_name(op, "scan")
    dims = gt.ints(op.dims)
    identity = None if comb.startswith("@") else _identity_or_none(comb, out.dt)
    value = args[0]
    for dim in dims:
        if identity is None:
            value = _sequential_scan_dim(b, value, out, dim, comb)
        else:
            value = _scan_dim(b, value, out, dim, comb, identity)
    return value


def _identity_or_none(comb: str, dtype: str) -> int | float | bool | None:
    try:
        return _identity(comb, dtype)
    except KeyError:
        return None


def _sequential_scan_dim(b: Builder, x: Lowered, out: TensorType, dim: int, comb: str) -> Lowered:
    """`tensor.scan`: out[0] = x[0], out[k] = comb(out[k-1], x[k]) (any combinator)."""
    if out.dims[dim] <= 1:
        return x
    if isinstance(x, Splat):
        x = build_compute(b, out, lambda s, i, _: s.read(x, i)).result
    assert isinstance(x, SSAValue)
    return b.insert(tensor.ScanOp(x, dim, comb)).result


def _scan_dim(
    b: Builder, x: Lowered, out: TensorType, dim: int, comb: str, identity: int | float | bool
) -> Lowered:
    if out.dims[dim] <= 1:
        return x

    def body(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        value = s.read(x, [r[0] if d == dim else v for d, v in enumerate(i)])
        inside = s.cmpi("sle", r[0], i[dim])
        return s.select(inside, value, s.const(identity, out.dt))

    init = Splat(identity, TensorType((), out.dt))
    return build_compute(b, out, body, reduction=[out.dims[dim]], combinator=comb, init=init).result


RULES: dict[type[Operation], Rule] = {
    gt.ConvolveOp: lower_convolve,
    gt.ReduceWindowOp: lower_reduce_window,
    gt.ScanOp: lower_scan,
}
