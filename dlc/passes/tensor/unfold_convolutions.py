"""unfold-convolutions: 2-D convolutions with short or strided rows as a matrix
product over the unfolded image (im2col), where the register-tiled convolution
serves them badly.

Input: verified tensor level, before `fuse` and `schedule` (opt_level >= 1). Each
convolution `unfolds` picks from the `Target` becomes computes without schedules (the
columns, the product, and the image: the product's bytes seen as the image, its
element-wise chain over the product's domain, `unfold_image.py`; or, with pixel rows,
the product transposed) with bit-identical results; the others are unchanged. Why and
which: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, IntegerAttr, ModuleOp, i64
from xdsl.dialects.builtin import TensorType as BuiltinTensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.diagnostics import copy_loc
from dlc.dialects import tensor
from dlc.dialects.graph_literal import dense_array
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_memory import BitCastOp
from dlc.dialects.tensor_types import tensor_type
from dlc.passes.statistics import PassStatistics
from dlc.passes.tensor.conv2d import Conv2d, conv2d_of
from dlc.passes.tensor.unfold_image import flatten_image
from dlc.passes.tensor.unfold_rule import pixel_rows, pointwise, unfolds
from dlc.target import Target


class _Body:
    """A compute body under construction: index constants made once."""

    def __init__(self, rank: int):
        self.block = Block(arg_types=[i64] * rank)
        self.builder = Builder(InsertPoint.at_end(self.block))
        self._indices: dict[int, SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        return self.builder.insert(op).results[0]

    def index(self, value: int) -> SSAValue:
        if value not in self._indices:
            self._indices[value] = self.emit(arith.ConstantOp(IntegerAttr(value, i64)))
        return self._indices[value]

    def divmod(self, value: SSAValue, n: int) -> tuple[SSAValue, SSAValue]:
        if n == 1:
            return value, self.index(0)
        quotient = self.emit(arith.DivSIOp(value, self.index(n)))
        return quotient, self.emit(arith.RemSIOp(value, self.index(n)))

    def at(self, out: SSAValue, stride: int, tap: SSAValue, dilation: int) -> SSAValue:
        """out·stride + tap·dilation."""
        pos = out if stride == 1 else self.emit(arith.MuliOp(out, self.index(stride)))
        step = tap if dilation == 1 else self.emit(arith.MuliOp(tap, self.index(dilation)))
        return self.emit(arith.AddiOp(pos, step))

    def compute(
        self, inputs: list[SSAValue], value: SSAValue, out: TensorType, **reduce: object
    ) -> tensor.ComputeOp:
        self.builder.insert(tensor.YieldOp(value))
        return tensor.ComputeOp(inputs, out, self.block, **reduce)  # type: ignore[arg-type]


def _cols(conv: Conv2d) -> tensor.ComputeOp:
    """cols[n, c·KH·KW + kh·KW + kw, oh, ow] = x[n, c, oh·s + kh·d, ow·s + kw·d]: the
    pixel axes kept apart, so no element divides its index (only the row index k is
    split, once per row of oh·ow elements); `unfold` reads it as (n, K, OH·OW)."""
    batch, _, oh, ow = conv.domain
    kh, kw = conv.taps
    (sh, sw), (dh, dw) = conv.strides, conv.dilations
    s = _Body(4)
    n, kk, row, col = s.block.args
    c, tap = s.divmod(kk, kh * kw)
    th, tw = s.divmod(tap, kw)
    where = [n, c, s.at(row, sh, th, dh), s.at(col, sw, tw, dw)]
    value = s.emit(tensor.ReadOp(conv.x, where))
    out = TensorType((batch, conv.channels * kh * kw, oh, ow), conv.dtype)
    return s.compute([conv.x], value, out)


def _product(conv: Conv2d, cols: SSAValue, weights: SSAValue | None) -> tensor.ComputeOp:
    """flat[n, o, p] = sum over k of cols[n, k, p] · w[o, k]: `weights` (the flat
    kernel), the 1 x 1 kernel read in place, or the body's splat constant."""
    batch, channels, oh, ow = conv.domain
    depth = tensor_type(cols, "unfold-convolutions: columns").dims[1]
    s = _Body(4)
    n, o, p, k = s.block.args
    inputs = [cols]
    value = s.emit(tensor.ReadOp(cols, [n, k, p]))
    if conv.kernel is None:
        assert conv.splat is not None, "a convolution without kernel operand has a splat"
        weight = s.emit(conv.splat.clone())
    elif weights is None:
        inputs.append(conv.kernel)
        weight = s.emit(tensor.ReadOp(conv.kernel, [o, k, s.index(0), s.index(0)]))
    else:
        inputs.append(weights)
        weight = s.emit(tensor.ReadOp(weights, [o, k]))
    product = s.emit(arith.MulfOp(value, weight))
    out = TensorType((batch, channels, oh * ow), conv.dtype)
    init = conv.op.init_value
    return s.compute(inputs, product, out, reduction=[depth], combinator="add", init_value=init)


def _pixel_rows_product(conv: Conv2d, cols: SSAValue, weights: SSAValue | None) -> tensor.ComputeOp:
    """flat[n, p, o] = sum over k of cols[n, k, p] · w[k, o] (the output channels as the
    product's columns; `weights` the kernel as a (C·KH·KW, O) literal, None: a splat);
    without the batch axis when it is 1 (a matrix product, whose B may be packed)."""
    batch, channels, oh, ow = conv.domain
    depth = tensor_type(cols, "unfold-convolutions: columns").dims[1]
    s = _Body(3 if batch == 1 else 4)
    *outer, p, o, k = s.block.args
    n = outer[0] if outer else s.index(0)
    inputs = [cols]
    value = s.emit(tensor.ReadOp(cols, [n, k, p]))
    if weights is None:
        assert conv.splat is not None, "a convolution without kernel operand has a splat"
        weight = s.emit(conv.splat.clone())
    else:
        inputs.append(weights)
        weight = s.emit(tensor.ReadOp(weights, [k, o]))
    product = s.emit(arith.MulfOp(value, weight))
    out = TensorType((*([batch] if outer else []), oh * ow, channels), conv.dtype)
    init = conv.op.init_value
    return s.compute(inputs, product, out, reduction=[depth], combinator="add", init_value=init)


def _image(conv: Conv2d, flat: SSAValue) -> tensor.ComputeOp:
    """y[n, o, oh, ow] = flat[n, oh·OW + ow, o] (flat[oh·OW + ow, o] without the batch
    axis): the pixel-rows product transposed. (Channel rows: `unfold_image.py`.)"""
    s = _Body(4)
    n, o, row, col = s.block.args
    pixel = s.emit(arith.AddiOp(s.emit(arith.MuliOp(row, s.index(conv.domain[3]))), col))
    where = [pixel, o] if tensor_type(flat, "unfold-convolutions").rank == 2 else [n, pixel, o]
    value = s.emit(tensor.ReadOp(flat, where))
    return s.compute([flat], value, TensorType(conv.domain, conv.dtype))


def _kernel_columns(b: Builder, conv: Conv2d) -> SSAValue:
    """The literal kernel as a (C·KH·KW, O) literal: its (O, C·KH·KW) matrix transposed."""
    owner = conv.kernel.owner if conv.kernel is not None else None
    assert isinstance(owner, tensor.ConstantOp)
    depth = conv.channels * conv.taps[0] * conv.taps[1]
    data = owner.value
    matrix = dense_array(data.data.data, conv.dtype, (conv.domain[1], depth))
    shape = (depth, conv.domain[1])
    element = data.get_element_type()
    dense = DenseIntOrFPElementsAttr(
        BuiltinTensorType(element, shape), BytesAttr(matrix.T.tobytes())
    )
    columns = tensor.ConstantOp.build(
        result_types=[TensorType(shape, conv.dtype)], properties={"value": dense}
    )
    return b.insert(columns).result


def _flat_kernel(b: Builder, conv: Conv2d) -> SSAValue | None:
    """The literal kernel as an (O, C·KH·KW) literal with the same bytes; None for a
    splat or a 1 x 1 kernel that is not a literal (read in place)."""
    owner = conv.kernel.owner if conv.kernel is not None else None
    if not isinstance(owner, tensor.ConstantOp):
        return None
    shape = (conv.domain[1], conv.channels * conv.taps[0] * conv.taps[1])
    data = owner.value
    dense = DenseIntOrFPElementsAttr(BuiltinTensorType(data.get_element_type(), shape), data.data)
    flat = tensor.ConstantOp.build(
        result_types=[TensorType(shape, conv.dtype)], properties={"value": dense}
    )
    return b.insert(flat).result


def _as_rows(b: Builder, op: Operation, cols: SSAValue, rows: TensorType) -> SSAValue:
    """`cols` seen as `rows`: a new bitcast, or the source of the view `cols` is (an
    earlier unfolded convolution's image) when that has this type."""
    owner = cols.owner
    if isinstance(owner, BitCastOp) and owner.source.type == rows:
        return owner.source
    cast = b.insert(BitCastOp(cols, rows))
    copy_loc(op, cast)
    return cast.result


def unfold(conv: Conv2d, target: Target) -> None:
    """Replace `conv` by cols, the product and the image (module docstring)."""
    op = conv.op
    b = Builder(InsertPoint.before(op))
    batch, _, oh, ow = conv.domain
    unfolded = None if pointwise(conv) else b.insert(_cols(conv))
    cols = conv.x if unfolded is None else unfolded.result
    depth = tensor_type(cols, "unfold-convolutions: columns").dims[1]
    rows = _as_rows(b, op, cols, TensorType((batch, depth, oh * ow), conv.dtype))
    if pixel_rows(conv, target):
        literal = conv.kernel is not None
        weights = _kernel_columns(b, conv) if literal else None
        flat = b.insert(_pixel_rows_product(conv, rows, weights))
        image: Operation = b.insert(_image(conv, flat.result))
    else:
        weights = _flat_kernel(b, conv)
        flat = b.insert(_product(conv, rows, weights))
        image = b.insert(BitCastOp(flat.result, TensorType(conv.domain, conv.dtype)))
    copy_loc(op, flat, image, *([] if unfolded is None else [unfolded]))
    op.result.replace_all_uses_with(image.results[0])
    op.detach()
    op.erase()
    if isinstance(image, BitCastOp):
        flatten_image(image)
    for unused in (conv.kernel, conv.x):  # a literal kernel, a view read through
        owner = unused.owner if unused is not None else None
        if isinstance(owner, tensor.ConstantOp | BitCastOp) and not owner.result.uses:
            owner.detach()
            owner.erase()


@dataclass(frozen=True)
class UnfoldConvolutionsPass(ModulePass, PassStatistics):
    """Rewrite the 2-D convolutions `unfolds` chooses for `target` as im2col + a
    matrix product (module docstring).

    Input: verified tensor level, computes without schedules (before `fuse`).
    Output: verified tensor level with the same values (bit-identical); `target`
    and `triple` name the CPU as for `schedule`.
    """

    name = "unfold-convolutions"

    target: str = "host"
    triple: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "tensor", self.name)
        target = Target.from_cpu(self.target, self.triple)
        for compute in [c for c in op.walk() if isinstance(c, tensor.ComputeOp)]:
            if compute.parent is None:
                continue  # erased: computed over an unfolded product's domain instead
            conv = conv2d_of(compute)
            if conv is not None and unfolds(conv, target):
                unfold(conv, target)
                self.count("convolutions unfolded")
