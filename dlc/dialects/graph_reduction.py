"""Reduction, window and convolution ops of the `graph` dialect.

Type rules follow docs/reference/language.md with dlc's fix: reduction combinator functions
have type `(T, T) -> T` on scalars (DLVM's unary type is a bug).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from dlc.dialects.graph_elementwise import tensor_operand
from dlc.dialects.graph_module import GraphInstruction, InferenceError, Props, Symbols
from dlc.dialects.graph_props import check_dims, int_prop, ints
from dlc.dialects.graph_types import (
    MAX_ELEMENTS,
    FunctionType,
    TensorType,
    dtype_is_bool,
    dtype_is_numeric,
    format_type,
    scalar,
)

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
        if any(v > MAX_ELEMENTS for v in window + strides):  # like tensor dimensions
            raise InferenceError("reduceWindow: window sizes and strides must be ≤ 2^40")
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
        if x.dt == "bf16":
            raise InferenceError("convolve: bf16 is a storage type (cast to f32 to compute)")
        if x.dt != k.dt or x.rank != k.rank:
            raise InferenceError(
                f"convolve: input {format_type(x)} and kernel {format_type(k)} differ in rank or data type"
            )
        if x.rank < 3:
            raise InferenceError(f"convolve: operands need rank ≥ 3, got {format_type(x)}")
        cfg = conv_config(props, x.rank - 2)
        groups = cfg["groups"][0]
        # DLVM's rule (FileCheck/convolve.dl): C / g == kernel[1] in integer division; the
        # C mod g channels beyond g · kernel[1] are not read
        if not 1 <= groups <= k.dims[0] or x.dims[1] // groups != k.dims[1]:
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
    for key in ("strides", "padding", "left_dilation", "right_dilation"):
        if any(v > MAX_ELEMENTS for v in cfg[key]):  # like tensor dimensions
            raise InferenceError(f"convolve: {key.replace('_', ' ')} must be ≤ 2^40")
    return cfg
