"""2-D convolutions as a matrix product over the flattened image (im2col), for the
shapes the register-tiled convolution serves badly (see `im2col_fits`).

The tiled convolution (dlc/passes/tensor/schedule_conv.py) vectorizes along the
output row: a row shorter than two vectors wastes most lanes (ResNet's 7 x 7 and
14 x 14 stages: rows of 7 as vectors of 4 + 2 + 1 lanes, 6 GFLOP/s where 56-wide
rows run at 30 on the 2-core AVX2 host), and a strided row is no vector at all (a
scalar tile). Here the convolution becomes

    cols[n, c·KH·KW + kh·KW + kw, oh·OW + ow] = x[n, c, oh·s + kh·d, ow·s + kw·d]
    flat[n, o, p] = sum over k of cols[n, k, p] · w[o, k]        (a `dot`-like compute)
    y[n, o, oh, ow] = flat[n, o, oh·OW + ow]

so the product's columns are the whole image (OH·OW, 49 or 196 for ResNet's late
stages) and the default policy gives it the matrix-product register tile (12 or 24
vector accumulators) and unit-stride vector loads whatever the stride. `cols` is
materialized (fusion keeps it: every element is read once per output channel) and
`w[o, k]` is the kernel's data seen as a (O, C·KH·KW) matrix: a literal with the
same bytes, so only constant (or 1 x 1) kernels take this form. The sum runs over
k = (c, kh, kw) in the convolution's order and the padded positions hold zeros as
before, so results are bit-identical to the convolution's nest.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.dialects.builtin import TensorType as BuiltinTensorType
from xdsl.ir import SSAValue

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.lowering.graph_to_tensor.compute_builder import (
    BodyBuilder,
    Lowered,
    Splat,
    build_compute,
)

SHORT_ROW = 16
"""Output rows narrower than this go through im2col (two AVX2 vectors, one AVX-512)."""
MIN_COLUMNS = 16
"""At least this many output pixels (OH·OW): the product's columns fill a register tile."""
MAX_COLS_BYTES = 32 << 20
"""Largest `cols` buffer; larger convolutions keep the tiled nest."""


def im2col_fits(
    k: Lowered, xt: TensorType, kt: TensorType, out: TensorType, cfg: dict[str, list[int]]
) -> bool:
    """A 2-D float convolution, ungrouped, undilated on the left and unpadded (padding
    is materialized first), whose rows are short or strided, with a constant or 1 x 1
    kernel and a `cols` buffer of at most `MAX_COLS_BYTES`."""
    if xt.rank != 4 or out.dt not in ("f32", "f64") or cfg["groups"][0] != 1:
        return False
    if any(cfg["padding"]) or any(d != 1 for d in cfg["left_dilation"]):
        return False
    oh, ow = out.dims[2:]
    if ow >= SHORT_ROW and all(s == 1 for s in cfg["strides"]):
        return False
    if oh * ow < MIN_COLUMNS:
        return False
    constant = isinstance(k, Splat) or isinstance(k.owner, tensor.ConstantOp)  # type: ignore[union-attr]
    if not constant and kt.dims[2:] != (1, 1):
        return False
    size = 4 if out.dt == "f32" else 8
    return xt.dims[0] * kt.dims[1] * kt.dims[2] * kt.dims[3] * oh * ow * size <= MAX_COLS_BYTES


def lower_im2col(
    b: Builder,
    x: Lowered,
    k: Lowered,
    xt: TensorType,
    kt: TensorType,
    out: TensorType,
    cfg: dict[str, list[int]],
) -> SSAValue:
    """The convolution `out = x * k` as cols, a product and a reshape (module doc)."""
    batch, channels = xt.dims[:2]
    kh, kw = kt.dims[2:]
    oh, ow = out.dims[2:]
    taps, pixels = kh * kw, oh * ow
    depth = channels * taps
    (sh, sw), (dh, dw) = cfg["strides"], cfg["right_dilation"]

    def cols_body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        n, kk, p = i
        c, tap = _divmod(s, kk, taps)
        th, tw = _divmod(s, tap, kw)
        row, col = _divmod(s, p, ow)
        return s.read(x, [n, c, _at(s, row, sh, th, dh), _at(s, col, sw, tw, dw)])

    cols_type = TensorType((batch, depth, pixels), xt.dt)
    cols = build_compute(b, cols_type, cols_body).result
    weights = _flat_kernel(b, k, kt)

    def dot_body(s: BodyBuilder, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, o, p = i
        if weights is None:  # a 1 x 1 kernel read in place
            weight = s.read(k, [o, r[0], s.index(0), s.index(0)])
        else:
            weight = s.read(weights, [o, r[0]])
        return s.binary("multiply", out.dt, s.read(cols, [n, r[0], p]), weight)

    flat_type = TensorType((batch, kt.dims[0], pixels), out.dt)
    zero = Splat(0, TensorType((), out.dt))
    flat = build_compute(
        b, flat_type, dot_body, reduction=[depth], combinator="add", init=zero
    ).result

    def image(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        n, o, row, col = i
        pixel = s.emit(arith.AddiOp(s.emit(arith.MuliOp(row, s.index(ow))), col))
        return s.read(flat, [n, o, pixel])

    return build_compute(b, out, image).result


def _divmod(s: BodyBuilder, value: SSAValue, n: int) -> tuple[SSAValue, SSAValue]:
    if n == 1:
        return value, s.index(0)
    quotient = s.emit(arith.DivSIOp(value, s.index(n)))
    return quotient, s.emit(arith.RemSIOp(value, s.index(n)))


def _at(s: BodyBuilder, out: SSAValue, stride: int, tap: SSAValue, dilation: int) -> SSAValue:
    """out·stride + tap·dilation."""
    pos = out if stride == 1 else s.emit(arith.MuliOp(out, s.index(stride)))
    step = tap if dilation == 1 else s.emit(arith.MuliOp(tap, s.index(dilation)))
    return s.emit(arith.AddiOp(pos, step))


def _flat_kernel(b: Builder, k: Lowered, kt: TensorType) -> Lowered | None:
    """The kernel as an (O, C·KH·KW) matrix: a splat, the literal's bytes under the
    new shape, or None for a 1 x 1 kernel that is not a literal (read in place)."""
    shape = (kt.dims[0], kt.dims[1] * kt.dims[2] * kt.dims[3])
    if isinstance(k, Splat):
        return Splat(k.value, TensorType(shape, kt.dt))
    assert isinstance(k, SSAValue)
    owner = k.owner
    if not isinstance(owner, tensor.ConstantOp):
        return None
    data = owner.value
    dense = DenseIntOrFPElementsAttr(BuiltinTensorType(data.get_element_type(), shape), data.data)
    flat = tensor.ConstantOp.build(
        result_types=[TensorType(shape, kt.dt)], properties={"value": dense}
    )
    return b.insert(flat).result
