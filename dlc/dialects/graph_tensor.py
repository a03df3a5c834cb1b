"""Shape, reduction and linear-algebra ops of the `graph` dialect.

Type rules follow shared/DLVM.md §2.1 with dlc's fixes: `slice from L upto U` is the
closed range [L, U] of dimension 0 with 0 ≤ L ≤ U < dim0; reduction combinator
functions have type `(T, T) -> T` on scalars (DLVM's unary type is a bug).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_canonicalization import GraphCanonicalization
from dlc.dialects.graph_elementwise import tensor_operand
from dlc.dialects.graph_types import (
    FunctionType,
    TensorType,
    dtype_bytes,
    dtype_is_bool,
    dtype_is_numeric,
    format_type,
    scalar,
)


def ints(attr: Attribute | None) -> list[int]:
    """The Python ints of an `ArrayAttr[IntAttr]` property (empty when absent)."""
    if attr is None:
        return []
    assert isinstance(attr, ArrayAttr)
    return [x.data for x in attr.data]  # type: ignore[union-attr]


def int_prop(props: Props, key: str) -> int:
    attr = props[key]
    assert isinstance(attr, IntAttr)
    return attr.data


def int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(v) for v in values])


BOOLEAN_COMBINATORS = ("and", "or")
NUMERIC_COMBINATORS = (
    "add subtract multiply divide min max truncateDivide floorDivide modulo power".split()
)


def check_combinator(opcode: str, x: TensorType, props: Props, fn_type: Attribute | None) -> None:
    """`by add` / `by and` / `by @f: (T, T) -> T`."""
    if fn_type is not None:
        elem = scalar(x.dt)
        if fn_type != FunctionType([elem, elem], elem):
            raise InferenceError(
                f"{opcode}: combinator function must have type ({x.dt}, {x.dt}) -> {x.dt}, "
                f"got {format_type(fn_type)}"
            )
        return
    comb = props.get("combinator")
    assert isinstance(comb, StringAttr), f"{opcode} needs a combinator"
    if comb.data in BOOLEAN_COMBINATORS:
        if not dtype_is_bool(x.dt):
            raise InferenceError(f"{opcode}: combinator '{comb.data}' needs bool, got {x.dt}")
        return
    if comb.data not in NUMERIC_COMBINATORS:
        raise InferenceError(f"{opcode}: unknown combinator '{comb.data}'")
    if not dtype_is_numeric(x.dt):
        raise InferenceError(f"{opcode}: combinator '{comb.data}' needs numeric data, got {x.dt}")


def check_dims(opcode: str, x: TensorType, dims: Sequence[int], allow_empty: bool = False) -> None:
    if not dims and not allow_empty:
        raise InferenceError(f"{opcode}: needs at least one dimension")
    for d in dims:
        if not 0 <= d < x.rank:
            raise InferenceError(f"{opcode}: dimension {d} out of range for {format_type(x)}")
    if len(set(dims)) != len(dims):
        raise InferenceError(f"{opcode}: duplicate dimensions {list(dims)}")


@irdl_op_definition
class ScanOp(GraphInstruction):
    """`scan %x by add along 0`: inclusive prefix combination along the dimensions."""

    name = "graph.scan"
    OPCODE: ClassVar[str] = "scan"
    operand = operand_def()
    combinator_fn = opt_operand_def()
    combinator = opt_prop_def(StringAttr)
    dims = prop_def(ArrayAttr[IntAttr])
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("scan", operand_types[0])
        check_combinator("scan", x, props, operand_types[1] if len(operand_types) > 1 else None)
        check_dims("scan", x, ints(props["dims"]))
        return [x]


@irdl_op_definition
class ReduceOp(GraphInstruction):
    """`reduce %x by add init 0: f32 along 0, 1`: drops the listed dimensions."""

    name = "graph.reduce"
    OPCODE: ClassVar[str] = "reduce"
    operand = operand_def()
    init = operand_def()
    combinator_fn = opt_operand_def()
    combinator = opt_prop_def(StringAttr)
    dims = prop_def(ArrayAttr[IntAttr])
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("reduce", operand_types[0])
        init = operand_types[1]
        check_combinator("reduce", x, props, operand_types[2] if len(operand_types) > 2 else None)
        if init != scalar(x.dt):
            raise InferenceError(f"reduce: init must be a {x.dt} scalar, got {format_type(init)}")
        dims = ints(props["dims"])
        check_dims("reduce", x, dims)
        return [TensorType([d for i, d in enumerate(x.dims) if i not in dims], x.dt)]


PADDINGS = ("none", "half", "full")


@irdl_op_definition
class ReduceWindowOp(GraphInstruction):
    """`reduceWindow %x by max init 0: f32 dims 2, 2 strides 2, 2 padding none`"""

    name = "graph.reduce_window"
    OPCODE: ClassVar[str] = "reduceWindow"
    operand = operand_def()
    init = operand_def()
    combinator_fn = opt_operand_def()
    combinator = opt_prop_def(StringAttr)
    window = prop_def(ArrayAttr[IntAttr])
    strides = prop_def(ArrayAttr[IntAttr])
    padding = prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("reduceWindow", operand_types[0])
        init = operand_types[1]
        fn = operand_types[2] if len(operand_types) > 2 else None
        check_combinator("reduceWindow", x, props, fn)
        if init != scalar(x.dt):
            raise InferenceError(
                f"reduceWindow: init must be a {x.dt} scalar, got {format_type(init)}"
            )
        window, strides = ints(props["window"]), ints(props["strides"])
        padding = props["padding"]
        assert isinstance(padding, StringAttr)
        if len(window) != x.rank:
            raise InferenceError(
                f"reduceWindow: {len(window)} window dimensions for {format_type(x)}"
            )
        if len(strides) != x.rank:
            raise InferenceError(f"reduceWindow: {len(strides)} strides for {format_type(x)}")
        if any(w <= 0 for w in window) or any(s < 1 for s in strides):
            raise InferenceError("reduceWindow: window sizes must be > 0 and strides ≥ 1")
        if padding.data not in PADDINGS:
            raise InferenceError(f"reduceWindow: unknown padding '{padding.data}'")
        return [TensorType(window_shape(x.dims, window, strides, padding.data), x.dt)]


def window_shape(
    dims: Sequence[int], window: Sequence[int], strides: Sequence[int], padding: str
) -> list[int]:
    """DLVM's reduceWindow output size per dimension (integer division toward zero)."""
    out: list[int] = []
    for n, w, s in zip(dims, window, strides):
        if padding == "none":
            out.append(max(_tdiv(n - w, s) + 1, 0))
        elif padding == "half":
            out.append(_tdiv(n - 1, s) + 1)
        else:
            out.append(_tdiv(n + w - 2, s) + 1)
    return out


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@irdl_op_definition
class DotOp(GraphInstruction):
    """`dot %a, %b`: (batched) matrix product, or vector·vector giving a scalar."""

    name = "graph.dot"
    OPCODE: ClassVar[str] = "dot"
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        lhs = tensor_operand("dot", operand_types[0], "lhs")
        rhs = tensor_operand("dot", operand_types[1], "rhs")
        what = f"dot: cannot multiply {format_type(lhs)} by {format_type(rhs)}"
        if lhs.dt != rhs.dt:
            raise InferenceError(what + ": data types differ")
        if lhs.rank == 1 and rhs.rank == 1:
            if lhs.dims != rhs.dims:
                raise InferenceError(what + ": lengths differ")
            return [scalar(lhs.dt)]
        if lhs.rank < 2 or lhs.rank != rhs.rank:
            raise InferenceError(what + ": ranks must be equal and at least 2")
        if lhs.dims[:-2] != rhs.dims[:-2]:
            raise InferenceError(what + ": batch dimensions differ")
        if lhs.dims[-1] != rhs.dims[-2]:
            raise InferenceError(what + ": inner dimensions differ")
        return [lhs.with_shape([*lhs.dims[:-1], rhs.dims[-1]])]


@irdl_op_definition
class ConcatenateOp(GraphInstruction):
    """`concatenate %a, %b along 0`"""

    name = "graph.concatenate"
    OPCODE: ClassVar[str] = "concatenate"
    inputs = var_operand_def()
    axis = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        if not operand_types:
            raise InferenceError("concatenate: needs at least one operand")
        axis = int_prop(props, "axis")
        first = tensor_operand("concatenate", operand_types[0])
        if not 0 <= axis < first.rank:
            raise InferenceError(f"concatenate: axis {axis} out of range for {format_type(first)}")
        total = 0
        for t in operand_types:
            x = tensor_operand("concatenate", t)
            same = x.rank == first.rank and all(
                a == b for i, (a, b) in enumerate(zip(x.dims, first.dims)) if i != axis
            )
            if x.dt != first.dt or not same:
                raise InferenceError(
                    f"concatenate: {format_type(x)} does not match {format_type(first)} "
                    f"along axis {axis}"
                )
            total += x.dims[axis]
        dims = list(first.dims)
        dims[axis] = total
        return [first.with_shape(dims)]


@irdl_op_definition
class TransposeOp(GraphInstruction):
    """`transpose %x`: reverses all dimensions."""

    name = "graph.transpose"
    OPCODE: ClassVar[str] = "transpose"
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("transpose", operand_types[0])
        return [x.with_shape(x.dims[::-1])]


@irdl_op_definition
class ReverseOp(GraphInstruction):
    """`reverse %x along 0, 1`"""

    name = "graph.reverse"
    OPCODE: ClassVar[str] = "reverse"
    operand = operand_def()
    dims = prop_def(ArrayAttr[IntAttr])
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("reverse", operand_types[0])
        check_dims("reverse", x, ints(props["dims"]))
        return [x]


@irdl_op_definition
class SliceOp(GraphInstruction):
    """`slice %x from L upto U`: rows L..U (closed) of dimension 0."""

    name = "graph.slice"
    OPCODE: ClassVar[str] = "slice"
    operand = operand_def()
    lower = prop_def(IntAttr)
    upper = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("slice", operand_types[0])
        if x.rank == 0:
            raise InferenceError(f"slice: operand must have rank ≥ 1, got {format_type(x)}")
        lo, hi = int_prop(props, "lower"), int_prop(props, "upper")
        if not 0 <= lo <= hi < x.dims[0]:
            raise InferenceError(
                f"slice: range [{lo}, {hi}] is not within dimension 0 of {format_type(x)}"
            )
        return [x.with_shape([hi - lo + 1, *x.dims[1:]])]


@irdl_op_definition
class ConvolveOp(GraphInstruction):
    """`convolve %x kernel %k strides … padding (lo, hi), … leftDilation … rightDilation …
    groups g`; absent clauses take DLVM's defaults."""

    name = "graph.convolve"
    OPCODE: ClassVar[str] = "convolve"
    lhs = operand_def()
    kernel = operand_def()
    strides = opt_prop_def(ArrayAttr[IntAttr])
    padding = opt_prop_def(ArrayAttr[IntAttr])  # flattened (lo, hi) pairs
    left_dilation = opt_prop_def(ArrayAttr[IntAttr])
    right_dilation = opt_prop_def(ArrayAttr[IntAttr])
    groups = opt_prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("convolve", operand_types[0], "input")
        k = tensor_operand("convolve", operand_types[1], "kernel")
        if x.dt != k.dt or x.rank != k.rank:
            raise InferenceError(
                f"convolve: input {format_type(x)} and kernel {format_type(k)} differ in rank or data type"
            )
        if x.rank < 3:
            raise InferenceError(f"convolve: operands need rank ≥ 3, got {format_type(x)}")
        cfg = conv_config(props, x.rank - 2)
        groups = cfg["groups"][0]
        if not 1 <= groups <= k.dims[0] or x.dims[1] // groups != k.dims[1] or x.dims[1] % groups:
            raise InferenceError(
                f"convolve: {groups} groups do not fit input channels {x.dims[1]} and kernel {format_type(k)}"
            )
        out = [x.dims[0], (k.dims[0] // groups) * groups]
        for i in range(x.rank - 2):
            base = (x.dims[2 + i] - 1) * cfg["left_dilation"][i] + 1
            base += cfg["padding"][2 * i] + cfg["padding"][2 * i + 1]
            win = (k.dims[2 + i] - 1) * cfg["right_dilation"][i] + 1
            out.append(0 if win > base else (base - win) // cfg["strides"][i] + 1)
        return [x.with_shape(out)]


def conv_config(props: Props, n: int) -> dict[str, list[int]]:
    """convolve's clauses with defaults, checked for length and range."""
    cfg = {
        "strides": ints(props.get("strides")) or [1] * n,
        "padding": ints(props.get("padding")) or [0] * (2 * n),
        "left_dilation": ints(props.get("left_dilation")) or [1] * n,
        "right_dilation": ints(props.get("right_dilation")) or [1] * n,
        "groups": [int_prop(props, "groups") if "groups" in props else 1],
    }
    for key, want in (
        ("strides", n),
        ("padding", 2 * n),
        ("left_dilation", n),
        ("right_dilation", n),
    ):
        if len(cfg[key]) != want:
            count = len(cfg[key]) // 2 if key == "padding" else len(cfg[key])
            raise InferenceError(
                f"convolve: {count} {key.replace('_', ' ')} entries for {n} spatial dimensions"
            )
    if any(s < 1 for s in cfg["strides"]):
        raise InferenceError("convolve: strides must be ≥ 1")
    if any(p < 0 for p in cfg["padding"]):
        raise InferenceError("convolve: padding must be ≥ 0")
    if any(d < 1 for d in cfg["left_dilation"] + cfg["right_dilation"]):
        raise InferenceError("convolve: dilations must be ≥ 1")
    return cfg


class _ShapeQueryOp(GraphInstruction):
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure())


@irdl_op_definition
class RankOp(_ShapeQueryOp):
    """`rank of %x` -> i64"""

    name = "graph.rank"
    OPCODE: ClassVar[str] = "rank"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        tensor_operand("rank", operand_types[0])
        return [scalar("i64")]


@irdl_op_definition
class ShapeOp(_ShapeQueryOp):
    """`shape of %x` -> <rank x i64>"""

    name = "graph.shape"
    OPCODE: ClassVar[str] = "shape"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("shape", operand_types[0])
        return [TensorType([x.rank], "i64")]


@irdl_op_definition
class UnitCountOp(_ShapeQueryOp):
    """`unitCount of %x` -> i64"""

    name = "graph.unit_count"
    OPCODE: ClassVar[str] = "unitCount"

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        tensor_operand("unitCount", operand_types[0])
        return [scalar("i64")]


@irdl_op_definition
class PadShapeOp(GraphInstruction):
    """`padShape %x at i`: inserts a dimension of size 1 at i (0 ≤ i ≤ rank)."""

    name = "graph.pad_shape"
    OPCODE: ClassVar[str] = "padShape"
    operand = operand_def()
    index = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("padShape", operand_types[0])
        i = int_prop(props, "index")
        if not 0 <= i <= x.rank:
            raise InferenceError(f"padShape: index {i} out of range for {format_type(x)}")
        return [x.with_shape([*x.dims[:i], 1, *x.dims[i:]])]


@irdl_op_definition
class SqueezeShapeOp(GraphInstruction):
    """`squeezeShape %x at i`: removes dimension i, which must be 1."""

    name = "graph.squeeze_shape"
    OPCODE: ClassVar[str] = "squeezeShape"
    operand = operand_def()
    index = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("squeezeShape", operand_types[0])
        i = int_prop(props, "index")
        if not 0 <= i < x.rank or x.dims[i] != 1:
            raise InferenceError(f"squeezeShape: dimension {i} of {format_type(x)} is not 1")
        return [x.with_shape([*x.dims[:i], *x.dims[i + 1 :]])]


@irdl_op_definition
class ShapeCastOp(GraphInstruction):
    """`shapeCast %x to 2 x 3` (or `to scalar`): same elements, new shape."""

    name = "graph.shape_cast"
    OPCODE: ClassVar[str] = "shapeCast"
    operand = operand_def()
    shape = prop_def(ArrayAttr[IntAttr])
    result = result_def()
    traits = traits_def(Pure(), GraphCanonicalization())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x = tensor_operand("shapeCast", operand_types[0])
        target = x.with_shape(ints(props["shape"]))
        if target.num_elements != x.num_elements:
            raise InferenceError(
                f"shapeCast: cannot cast {format_type(x)} to {format_type(target)}: "
                f"element counts differ"
            )
        return [target]


@irdl_op_definition
class BitCastOp(GraphInstruction):
    """`bitCast %x to T`: reinterprets the bits; sizes must match when both are tensors."""

    name = "graph.bit_cast"
    OPCODE: ClassVar[str] = "bitCast"
    operand = operand_def()
    target = prop_def(Attribute)
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        x, target = operand_types[0], props["target"]
        if isinstance(x, TensorType) and isinstance(target, TensorType):
            src = x.num_elements * dtype_bytes(x.dt)
            dst = target.num_elements * dtype_bytes(target.dt)
            if src != dst:
                raise InferenceError(
                    f"bitCast: {format_type(x)} ({src} bytes) and {format_type(target)} "
                    f"({dst} bytes) differ in size"
                )
        return [target]


OPS: list[type[Operation]] = [
    ScanOp,
    ReduceOp,
    ReduceWindowOp,
    DotOp,
    ConcatenateOp,
    TransposeOp,
    ReverseOp,
    SliceOp,
    ConvolveOp,
    RankOp,
    ShapeOp,
    UnitCountOp,
    PadShapeOp,
    SqueezeShapeOp,
    ShapeCastOp,
    BitCastOp,
]

__all__ = ["StringAttr", "int_array"]
