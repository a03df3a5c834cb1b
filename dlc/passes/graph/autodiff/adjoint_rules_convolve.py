"""Adjoint rule of `convolve` (every clause: strides s, padding (lo, hi), leftDilation
ld, rightDilation rd, groups).

With x' the input dilated by ld and padded, y[o] = Σ_k x'[o·s + k·rd] · w[k] (per
group, summed over its input channels). Both adjoints are convolutions again:

- dx: dx'[p] = Σ_{o·s + k·rd = p} D[o] · w[k], the convolution of D dilated by s with
  the spatially flipped kernel whose input and output channels are swapped (per
  group), read at the positions p = lo + i·ld of x: strides ld and padding
  (K-1)·rd - lo before, (X-1)·ld - (O-1)·s + lo after. A negative padding is raised
  by whole strides and the extra outputs sliced off.
- dw: dw[m, c, k] = Σ_{n, o} D[n, m, o] · x'[n, c, k·rd + o·s], a convolution of x with
  the batch as channels (x as (C/g, g·N, …), D as (M, N, …), groups g) with strides rd,
  the forward padding and leftDilation, and rightDilation s; its result, at least K
  long, is cut to K.

A kernel whose output channels do not divide into the groups has no rule.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import SSAValue

from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph_props import int_array
from dlc.dialects.graph_reduction import conv_config
from dlc.passes.graph.autodiff.adjoint_emitter import Adj, Emitter, tensor_of
from dlc.passes.graph.permutations import permute


def _config(op: gt.ConvolveOp) -> dict[str, list[int]]:
    return conv_config(dict(op.properties), tensor_of(op.lhs).rank - 2)


def has_rule(op: gt.ConvolveOp) -> bool:
    groups = _config(op)["groups"][0]
    return tensor_of(op.kernel).dims[0] % groups == 0


def _input_adjoint(e: Emitter, op: gt.ConvolveOp, d: SSAValue) -> SSAValue:
    cfg, x, w = _config(op), tensor_of(op.lhs), tensor_of(op.kernel)
    groups, spatial = cfg["groups"][0], x.rank - 2
    m, cg, kernel = w.dims[0], w.dims[1], w.dims[2:]
    flipped = e.reshape(op.kernel, [groups, m // groups, cg, *kernel])
    flipped = permute(e, flipped, [0, 2, 1, *range(3, 3 + spatial)])
    flipped = e.reshape(flipped, [groups * cg, m // groups, *kernel])
    flipped = e.emit(gt.ReverseOp, [flipped], dims=int_array(range(2, 2 + spatial)))
    pads, extra = [], []
    out = tensor_of(d).dims[2:]
    for i in range(spatial):
        s, rd, ld = cfg["strides"][i], cfg["right_dilation"][i], cfg["left_dilation"][i]
        lo = cfg["padding"][2 * i]
        before = (kernel[i] - 1) * rd - lo
        after = (x.dims[2 + i] - 1) * ld - (out[i] - 1) * s + lo
        raise_lo, raise_hi = -(-max(-before, 0) // ld), -(-max(-after, 0) // ld)
        pads += [before + raise_lo * ld, after + raise_hi * ld]
        extra.append((raise_lo, raise_hi))
    props = {
        "strides": int_array(cfg["left_dilation"]),
        "padding": int_array(pads),
        "left_dilation": int_array(cfg["strides"]),
        "right_dilation": int_array(cfg["right_dilation"]),
        "groups": IntAttr(groups),
    }
    dx = e.emit(gt.ConvolveOp, [d, flipped], **props)
    for i, (cut_lo, cut_hi) in enumerate(extra):
        if cut_lo or cut_hi:
            length = tensor_of(dx).dims[2 + i]
            dx = e.slice_axis(dx, 2 + i, cut_lo, length - cut_hi - 1)
    return dx


def _kernel_adjoint(e: Emitter, op: gt.ConvolveOp, d: SSAValue) -> SSAValue:
    cfg, x, w = _config(op), tensor_of(op.lhs), tensor_of(op.kernel)
    groups, spatial = cfg["groups"][0], x.rank - 2
    n, cg = x.dims[0], w.dims[1]
    rest = list(range(3, 3 + spatial))
    xs = e.reshape(op.lhs, [n, groups, cg, *x.dims[2:]])
    xs = e.reshape(permute(e, xs, [2, 1, 0, *rest]), [cg, groups * n, *x.dims[2:]])
    ds = permute(e, d, [1, 0, *(r - 1 for r in rest)])
    props = {
        "strides": int_array(cfg["right_dilation"]),
        "padding": int_array(cfg["padding"]),
        "left_dilation": int_array(cfg["left_dilation"]),
        "right_dilation": int_array(cfg["strides"]),
        "groups": IntAttr(groups),
    }
    dw = e.emit(gt.ConvolveOp, [xs, ds], **props)  # (C/g, M, K' ≥ K)
    for i, k in enumerate(w.dims[2:]):
        if tensor_of(dw).dims[2 + i] != k:
            dw = e.slice_axis(dw, 2 + i, 0, k - 1)
    return permute(e, dw, [1, 0, *(r - 1 for r in rest)])


def convolve_rule(e: Emitter, op: gt.ConvolveOp, d: SSAValue, want: set[int]) -> dict[int, Adj]:
    out: dict[int, Adj] = {}
    if 0 in want:
        out[0] = _input_adjoint(e, op, d)
    if 1 in want:
        out[1] = _kernel_adjoint(e, op, d)
    return out
