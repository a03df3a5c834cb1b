"""ONNX linear quantization: QuantizeLinear, DequantizeLinear, QLinearMatMul,
QLinearConv, MatMulInteger and ConvInteger (DynamicQuantizeLinear is imported as its
function body), as casts, `rint`, `min`/`max` and integer `dot`/`convolve`.

Integer products accumulate in i32 exactly (`(a - a_zero) · (b - b_zero)` in i32, as
ONNX specifies); rounding is half to even (`rint`) and saturation clamps to the
quantized type's range. The float arithmetic around them follows onnx's reference
implementation step by step, including NumPy's type promotion (an i32 accumulator
times an f32 scale is computed in f64; `promote.py` writes the rule out), so results
match it bit for bit; where the specification says otherwise it wins (from opset 23,
QuantizeLinear divides in y_scale's type unless `precision` names another). A NaN
quantizes to 0 (the reference's result there depends on the host's float -> int
conversion).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import TensorProto
from xdsl.ir import SSAValue

from dlc.onnx.emitter import ELEMENT_TYPES, Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_math import matmul_of
from dlc.onnx.ops_nn import convolution
from dlc.onnx.ops_slice import slice_axis
from dlc.onnx.promote import cast, promoted

QUANTIZED = {"i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767), "u16": (0, 65535)}
"""The integer types QuantizeLinear produces, with their saturation ranges."""
WIDE = 1 << 20
"""|rint(x / scale)| is clamped to this before the zero point is added in i32: beyond
every quantized range plus any zero point, so the final saturation is unchanged."""


def clamp(e: Emitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    dt = tensor_type(x).dt
    return e.binary("min", e.binary("max", x, e.scalar(lo, dt)), e.scalar(hi, dt))


def quant_param(
    node: Node, i: int, shape: Sequence[int], axis: int, block: int = 0
) -> SSAValue | None:
    """A scale or zero point (input i) made broadcastable to `shape`: one element is a
    scalar, a 1-D tensor runs along `axis`, a blocked one (block > 0) is repeated
    `block` times along `axis` (the last block may be cut short)."""
    value = node.optional(i)
    if value is None:
        return None
    e, dims = node.emit, shape_of(value)
    if int(np.prod(dims)) == 1:
        return e.reshape(value, ())
    axis = node.axis(axis, len(shape))  # read only for a per-axis or blocked parameter
    if not block:
        if len(dims) != 1 or dims[0] != shape[axis]:
            raise ImportProblem(
                f"input {i} of shape {list(dims)} is neither one value nor one per element "
                f"of axis {axis} of {list(shape)}"
            )
        return e.reshape(value, [shape[axis] if k == axis else 1 for k in range(len(shape))])
    count = -(-shape[axis] // block)
    expected = [count if k == axis else d for k, d in enumerate(shape)]
    if list(dims) != expected:
        raise ImportProblem(
            f"input {i} of shape {list(dims)} does not block {list(shape)} by {block} "
            f"along axis {axis} (expected {expected})"
        )
    split = [*dims[: axis + 1], 1, *dims[axis + 1 :]]
    repeated = e.broadcast_to(
        e.reshape(value, split), [*dims[: axis + 1], block, *dims[axis + 1 :]]
    )
    whole = e.reshape(repeated, [count * block if k == axis else d for k, d in enumerate(dims)])
    return slice_axis(e, whole, axis, 0, shape[axis])


def _axis_and_block(node: Node) -> tuple[int, int]:
    axis = node.attr("axis", 1)
    block = node.attr("block_size", 0)
    if block < 0:
        raise ImportProblem(f"block_size={block} must not be negative")
    return axis, block


def _quantized_type(node: Node, zero: SSAValue | None) -> str:
    """The output type: the zero point's, else `output_dtype`, else u8."""
    wanted = node.attr("output_dtype", 0)
    named = ELEMENT_TYPES.get(wanted) if wanted else None
    if wanted and named is None:
        kind = TensorProto.DataType.Name(wanted)
        raise ImportProblem(f"output_dtype={kind} is not supported (int8, uint8, int16, uint16)")
    dt = tensor_type(zero).dt if zero is not None else named or "u8"
    if named is not None and named != dt:
        raise ImportProblem(f"output_dtype {named} differs from the zero point's type {dt}")
    if dt not in QUANTIZED:
        raise ImportProblem(f"quantizing to {dt} is not supported (i8, u8, i16, u16)")
    return dt


def quantize(node: Node) -> list[Result]:
    """y = saturate(rint(x / scale) + zero_point)."""
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    axis, block = _axis_and_block(node)
    node.attr("saturate")  # float8 only: integer outputs always saturate
    scale = quant_param(node, 1, dims, axis, block)
    zero = quant_param(node, 2, dims, axis, block)
    assert scale is not None
    out = _quantized_type(node, zero)
    precision = node.attr("precision", 0)
    if precision:
        if ELEMENT_TYPES.get(precision) not in ("f16", "bf16", "f32", "f64"):
            raise ImportProblem(
                f"precision={TensorProto.DataType.Name(precision)} is not supported"
            )
        wide = ELEMENT_TYPES[precision]
    elif node.opset >= 23:  # the spec: y_scale's type is the division's precision
        wide = promoted(tensor_type(scale).dt, divide=True)
    else:  # x and y_scale have one type (T1); onnx's reference divides as NumPy does
        wide = promoted(tensor_type(x).dt, tensor_type(scale).dt, divide=True)
    q = e.unary("rint", e.binary("divide", cast(e, x, wide), cast(e, scale, wide)))
    return [saturated(e, q, zero, out)]


def saturated(e: Emitter, q: SSAValue, zero: SSAValue | None, out: str) -> SSAValue:
    """`out`(clamp(q + zero)) for an integral float q: q is clamped to ±WIDE first
    (so converting it to i32 is exact) and the zero point added in i32."""
    if tensor_type(q).dt in ("f16", "bf16"):
        q = cast(e, q, "f32")  # exact: an f16 or bf16 integer
    q = cast(e, clamp(e, q, -WIDE, WIDE), "i32")  # NaN -> 0
    if zero is not None:
        q = e.binary("add", q, cast(e, zero, "i32"))
    return cast(e, clamp(e, q, *QUANTIZED[out]), out)


def dequantize(node: Node) -> list[Result]:
    """y = (x - zero_point) · scale: x - zero_point in f32 (in f64 for i32 x, as NumPy
    promotes f32 - i32), times the scale, rounded to the scale's type or
    `output_dtype`."""
    e, x = node.emit, node.input(0)
    dims, xt = shape_of(x), tensor_type(x).dt
    if xt not in (*QUANTIZED, "i32"):
        raise ImportProblem(f"dequantizing {xt} is not supported (i8, u8, i16, u16, i32)")
    axis, block = _axis_and_block(node)
    scale = quant_param(node, 1, dims, axis, block)
    zero = quant_param(node, 2, dims, axis, block)
    assert scale is not None
    st = tensor_type(scale).dt
    if st not in ("f16", "bf16", "f32"):
        raise ImportProblem(f"a scale of type {st} is not supported (f16, bf16, f32)")
    wanted = node.attr("output_dtype", 0)
    out = ELEMENT_TYPES.get(wanted) if wanted else st
    if out not in ("f16", "bf16", "f32"):
        raise ImportProblem(f"output_dtype={TensorProto.DataType.Name(wanted)} is not supported")
    dx = cast(e, x, "f32")
    if zero is not None:
        if tensor_type(zero).dt != xt:
            raise ImportProblem(f"zero point of type {tensor_type(zero).dt} for x of type {xt}")
        wide = promoted("f32", xt)
        dx = e.binary("subtract", cast(e, dx, wide), cast(e, zero, wide))
    wide = promoted(tensor_type(dx).dt, st)
    y = e.binary("multiply", cast(e, dx, wide), cast(e, scale, wide))
    return [cast(e, y, out)]


def centered(node: Node, i: int, zero: SSAValue | None) -> SSAValue:
    """Input i minus its zero point, in i32 (exact)."""
    e, x = node.emit, node.input(i)
    if tensor_type(x).dt not in ("i8", "u8"):
        raise ImportProblem(f"input {i} of type {tensor_type(x).dt} is not supported (i8, u8)")
    x = cast(e, x, "i32")
    if zero is None:
        return x
    if tensor_type(zero).dt != tensor_type(node.input(i)).dt:
        raise ImportProblem(f"the zero point of input {i} has another type than the input")
    return e.binary("subtract", x, cast(e, zero, "i32"))


def scalar_param(node: Node, i: int, what: str) -> SSAValue | None:
    """An input that must hold one value (a per-tensor scale or zero point)."""
    value = node.optional(i)
    if value is None:
        return None
    if int(np.prod(shape_of(value))) != 1:
        raise ImportProblem(f"{what} (input {i}) must be one value, got {list(shape_of(value))}")
    return node.emit.reshape(value, ())


def column_param(node: Node, i: int, b: SSAValue, what: str) -> SSAValue | None:
    """One value, or one per column of the matrix operand `b` (per output column)."""
    value = node.optional(i)
    if value is None:
        return None
    dims, columns = shape_of(value), shape_of(b)[-1]
    if int(np.prod(dims)) == 1:
        return node.emit.reshape(value, ())
    if list(dims) != [columns]:
        raise ImportProblem(f"{what} (input {i}) must be one value or {columns} (one per column)")
    return value


def matmul_integer(node: Node) -> list[Result]:
    """(A - a_zero) · (B - b_zero) in i32; a per-row a_zero is refused (onnx's
    reference subtracts it along the wrong axis)."""
    a = centered(node, 0, scalar_param(node, 2, "a_zero_point"))
    b = centered(node, 1, column_param(node, 3, node.input(1), "b_zero_point"))
    return [matmul_of(node.emit, a, b)]


def qlinear_matmul(node: Node) -> list[Result]:
    """saturate(rint(((A - a_zero) · (B - b_zero)) · (a_scale · b_scale / y_scale) +
    y_zero)), the product in i32 and the rest in f64 (as NumPy promotes i32 × f32)."""
    e = node.emit
    a = centered(node, 0, scalar_param(node, 2, "a_zero_point"))
    b = centered(node, 3, column_param(node, 5, node.input(3), "b_zero_point"))
    a_scale = scalar_param(node, 1, "a_scale")
    b_scale = column_param(node, 4, node.input(3), "b_scale")
    y_scale = scalar_param(node, 6, "y_scale")
    y_zero = scalar_param(node, 7, "y_zero_point")
    assert a_scale is not None and b_scale is not None and y_scale is not None
    out = tensor_type(y_zero if y_zero is not None else node.input(0)).dt
    product = matmul_of(e, a, b)
    multiplier = _multiplier(e, a_scale, b_scale, y_scale)
    return [_requantized(e, product, multiplier, y_zero, out)]


def _multiplier(e: Emitter, x_scale: SSAValue, w_scale: SSAValue, y_scale: SSAValue) -> SSAValue:
    """x_scale · w_scale / y_scale in NumPy's types (f32, f16)."""
    st = promoted(*(tensor_type(s).dt for s in (x_scale, w_scale, y_scale)))
    if st not in ("f16", "f32"):
        raise ImportProblem(f"scales of type {st} are not supported (f16, f32)")
    ws = [cast(e, s, st) for s in (x_scale, w_scale, y_scale)]
    return e.binary("divide", e.binary("multiply", ws[0], ws[1]), ws[2])


def _requantized(
    e: Emitter, acc: SSAValue, multiplier: SSAValue, zero: SSAValue | None, out: str
) -> SSAValue:
    """saturate(rint(f64(acc) · multiplier + zero)) as `out` (i8 or u8)."""
    if out not in ("i8", "u8"):
        raise ImportProblem(f"an output of type {out} is not supported (i8, u8)")
    y = e.binary("multiply", cast(e, acc, "f64"), cast(e, multiplier, "f64"))
    if zero is not None:
        y = e.binary("add", y, cast(e, zero, "f64"))
    return saturated(e, e.unary("rint", y), None, out)


def _kernel_centered(node: Node, i: int, zero_index: int) -> SSAValue:
    """The weight minus its zero point: one value or one per output channel."""
    w = node.input(i)
    zero = node.optional(zero_index)
    if zero is not None and int(np.prod(shape_of(zero))) != 1:
        channels = shape_of(w)[0]
        if list(shape_of(zero)) != [channels]:
            raise ImportProblem(f"the weight's zero point must be one value or {channels}")
        zero = node.emit.reshape(zero, [channels] + [1] * (len(shape_of(w)) - 1))
    elif zero is not None:
        zero = node.emit.reshape(zero, ())
    return centered(node, i, zero)


def conv_integer(node: Node) -> list[Result]:
    """convolve(X - x_zero, W - w_zero) in i32 (Conv's attributes)."""
    x = centered(node, 0, scalar_param(node, 2, "x_zero_point"))
    w = _kernel_centered(node, 1, 3)
    return [convolution(node, x, w)]


def qlinear_conv(node: Node) -> list[Result]:
    """saturate(rint((convolve(X - x_zero, W - w_zero) + B) · x_scale · w_scale /
    y_scale + y_zero)), w_scale one value or one per output channel."""
    e = node.emit
    x = centered(node, 0, scalar_param(node, 2, "x_zero_point"))
    w = _kernel_centered(node, 3, 5)
    acc = convolution(node, x, w)
    channels = shape_of(w)[0]
    rank = len(shape_of(acc))
    bias = node.optional(8)
    if bias is not None:
        if tensor_type(bias).dt != "i32" or list(shape_of(bias)) != [channels]:
            raise ImportProblem(f"the bias must be {channels} i32 values")
        acc = e.binary("add", acc, e.reshape(bias, [1, channels] + [1] * (rank - 2)))
    w_scale = node.input(4)
    if int(np.prod(shape_of(w_scale))) == 1:
        w_scale = e.reshape(w_scale, ())
    elif list(shape_of(w_scale)) == [channels]:
        w_scale = e.reshape(w_scale, [1, channels] + [1] * (rank - 2))
    else:
        raise ImportProblem(f"w_scale must be one value or {channels} (one per output channel)")
    x_scale = scalar_param(node, 1, "x_scale")
    y_scale = scalar_param(node, 6, "y_scale")
    y_zero = scalar_param(node, 7, "y_zero_point")
    assert x_scale is not None and y_scale is not None
    out = tensor_type(y_zero if y_zero is not None else node.input(0)).dt
    return [_requantized(e, acc, _multiplier(e, x_scale, w_scale, y_scale), y_zero, out)]


CONVERTERS: dict[str, Converter] = {
    "QuantizeLinear": quantize,
    "DequantizeLinear": dequantize,
    "MatMulInteger": matmul_integer,
    "QLinearMatMul": qlinear_matmul,
    "ConvInteger": conv_integer,
    "QLinearConv": qlinear_conv,
}
