"""Types of the `graph` dialect: DLVM's type system (docs/reference/language.md).

| DLVM            | dlc type                                   | MLIR syntax                    |
|-----------------|--------------------------------------------|--------------------------------|
| `f32`           | `TensorType((), "f32")` (rank 0 = scalar)  | `!graph.tensor<f32>`           |
| `<2 x 3 x f32>` | `TensorType((2, 3), "f32")`                | `!graph.tensor<2x3xf32>`       |
| `<%n x 3 x f32>`| `TensorType(("n", 3), "f32")` (symbolic)   | `!graph.tensor<?nx3xf32>` (printed only) |
| `[4 x T]`       | `ArrayType(4, T)`                          | `!graph.array<4, T>`           |
| `(T, U)`/`void` | `TupleType([T, U])` / `TupleType([])`      | `!graph.tuple<T, U>`           |
| `(T) -> R`      | `FunctionType([T], R)`                     | `!graph.fn<(T) -> R>`          |
| `*T`            | `PointerType(T)`                           | `!graph.ptr<T>`                |
| `box{T}`        | `BoxType(T)`                               | `!graph.box<T>`                |
| `stack`         | `StackType()`                              | `!graph.stack`                 |
| `$S` (nominal)  | `NominalType("S", kind)`, kind ∈ struct/enum/opaque | `!graph.nominal<"S", "struct">` |

A symbolic dimension `%n` is a size known only when the function is called; within a
function, equal names are equal sizes (`dims` holds the name as a `str`). Only the
subset in `SYMBOLIC_OPS` accepts them (docs/reference/dynamic-shapes.md); static code
never sees one: `num_elements` raises on a symbolic type.

Transparent aliases (`type $A = T`) are resolved by the parser, so types compare
structurally after canonicalisation, as in DLVM. Nominal types compare by name.

Data types: `f16 f32 f64 bool`, `iN` for any width N ≥ 1 (two's complement, signed
where it matters), and dlc's additions to DLVM: the unsigned `u8 u16 u32 u64` and
`bf16`, a storage type (values move, cast and compare bit for bit, but arithmetic
needs a `dataTypeCast` to f32; NumPy's side is `ml_dtypes.bfloat16`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from dlc.dialects import graph_dims
from dlc.dtypes import (  # noqa: F401 -- re-exported: dialects and passes import them here
    NATIVE_DTYPES,
    dtype_base,
    dtype_bits,
    dtype_bytes,
    dtype_holds_floats,
    dtype_is_bool,
    dtype_is_float,
    dtype_is_int,
    dtype_is_numeric,
    dtype_is_unsigned,
    is_dtype,
    numpy_dtype,
)

T = TypeVar("T")

# Limits that keep types printable, hashable and allocatable (docs/reference/language.md, Limits).
MAX_RANK = 64
MAX_ELEMENTS = 2**40
MAX_BYTES = 2**42
MAX_PARTS = 2**16  # elements and fields of one value at all levels (values are flattened)
MAX_STACK_BYTES = 2**20  # allocateStack bytes per function (one native stack frame)


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """A tensor of fixed shape; rank 0 is a scalar. A dimension given as a `str` is
    symbolic (`%n` in DLVM)."""

    name = "graph.tensor"

    shape: ArrayAttr[IntAttr | StringAttr]
    dtype: StringAttr

    def __init__(self, shape: Sequence[int | str], dtype: str):
        dims = [StringAttr(d) if isinstance(d, str) else IntAttr(d) for d in shape]
        super().__init__(ArrayAttr(dims), StringAttr(dtype))

    @property
    def dims(self) -> tuple[int, ...]:
        """The extents; a symbolic one is its name (a `str`: only in `is_dynamic` types)."""
        return tuple(d.data for d in self.shape.data)  # type: ignore[misc]

    @property
    def symbols(self) -> tuple[str, ...]:
        """The names of the symbolic dimensions, in order (repeats kept)."""
        return tuple(d.data for d in self.shape.data if isinstance(d, StringAttr))

    @property
    def is_dynamic(self) -> bool:
        return any(isinstance(d, StringAttr) for d in self.shape.data)

    @property
    def rank(self) -> int:
        return len(self.shape.data)

    @property
    def dt(self) -> str:
        return self.dtype.data

    @property
    def is_scalar(self) -> bool:
        return not self.shape.data

    @property
    def num_elements(self) -> int:
        if self.is_dynamic:
            raise ValueError(f"{format_type(self)} has no static element count")
        n = 1
        for d in self.dims:
            n *= d
        return n

    def with_shape(self, shape: Sequence[int]) -> TensorType:
        return TensorType(shape, self.dt)

    def with_dtype(self, dtype: str) -> TensorType:
        return TensorType(self.dims, dtype)

    def print_parameters(self, printer: Printer) -> None:
        dims = "".join(f"?{d}x" if isinstance(d, str) else f"{d}x" for d in self.dims)
        printer.print_string("<" + dims + self.dt + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[ArrayAttr[IntAttr], StringAttr]:
        parser.parse_punctuation("<")
        dims = parser.parse_dimension_list()  # splits `0x5` (hex to xDSL's lexer) into 0, x5
        if any(d < 0 for d in dims):
            parser.raise_error("graph tensor dimensions must be static")
        if dims:
            parser.parse_shape_delimiter()
        word = parser.parse_identifier()
        parser.parse_punctuation(">")
        return ArrayAttr([IntAttr(d) for d in dims]), StringAttr(word)


def scalar(dtype: str) -> TensorType:
    return TensorType((), dtype)


@irdl_attr_definition
class TupleType(ParametrizedAttribute, TypeAttribute):
    """A tuple `(T, U)`; the empty tuple is DLVM's `void`."""

    name = "graph.tuple"

    elements: ArrayAttr[Attribute]

    def __init__(self, elements: Sequence[Attribute]):
        super().__init__(ArrayAttr(elements))

    @property
    def types(self) -> tuple[Attribute, ...]:
        return self.elements.data

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_list(self.types, printer.print_attribute)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[ArrayAttr[Attribute]]:
        types = parser.parse_comma_separated_list(parser.Delimiter.ANGLE, parser.parse_type)
        return (ArrayAttr(types),)


def void() -> TupleType:
    return TupleType([])


@irdl_attr_definition
class ArrayType(ParametrizedAttribute, TypeAttribute):
    """A fixed-size array `[n x T]`."""

    name = "graph.array"

    count: IntAttr
    element: Attribute

    def __init__(self, count: int, element: Attribute):
        super().__init__(IntAttr(count), element)


@irdl_attr_definition
class FunctionType(ParametrizedAttribute, TypeAttribute):
    """A function type `(T, U) -> R`."""

    name = "graph.fn"

    inputs: ArrayAttr[Attribute]
    output: Attribute

    def __init__(self, inputs: Sequence[Attribute], output: Attribute):
        super().__init__(ArrayAttr(inputs), output)

    @property
    def args(self) -> tuple[Attribute, ...]:
        return self.inputs.data


@irdl_attr_definition
class PointerType(ParametrizedAttribute, TypeAttribute):
    """A pointer `*T`."""

    name = "graph.ptr"

    pointee: Attribute

    def __init__(self, pointee: Attribute):
        super().__init__(pointee)


@irdl_attr_definition
class BoxType(ParametrizedAttribute, TypeAttribute):
    """A reference-counted box `box{T}` (no source syntax; made by `allocateBox`)."""

    name = "graph.box"

    element: Attribute

    def __init__(self, element: Attribute):
        super().__init__(element)


@irdl_attr_definition
class StackType(ParametrizedAttribute, TypeAttribute):
    """The AD stack type `stack`."""

    name = "graph.stack"


NOMINAL_KINDS = ("struct", "enum", "opaque")


@irdl_attr_definition
class NominalType(ParametrizedAttribute, TypeAttribute):
    """A nominal type `$Name`: a struct, an enum or an opaque alias, equal by name."""

    name = "graph.nominal"

    type_name: StringAttr
    kind: StringAttr

    def __init__(self, type_name: str, kind: str):
        super().__init__(StringAttr(type_name), StringAttr(kind))

    @property
    def ident(self) -> str:
        return self.type_name.data


GRAPH_TYPES: list[type[Attribute]] = [
    TensorType,
    TupleType,
    ArrayType,
    FunctionType,
    PointerType,
    BoxType,
    StackType,
    NominalType,
]


def is_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType)


def is_differentiable(t: Attribute) -> bool:
    """DLVM: a non-aliased numeric tensor (integers count, bool does not)."""
    return isinstance(t, TensorType) and dtype_is_numeric(t.dt)


def broadcast_shapes(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...] | None:
    """DLVM broadcasting: a scalar broadcasts to anything; otherwise equal ranks, 1 stretches."""
    if not lhs:
        return tuple(rhs)
    if not rhs:
        return tuple(lhs)
    if len(lhs) != len(rhs):
        return None
    out: list[int] = []
    for left, right in zip(lhs, rhs):
        if left == right or left == 1:
            out.append(right)
        elif right == 1:
            out.append(left)
        else:
            return None
    return tuple(out)


def nest_leaves(t: Attribute, leaves: Iterator[T], make: Callable[[list[Any]], Any]) -> Any:
    """The value of (nested) tuple type `t` built from `leaves` in order: a non-tuple type
    takes one leaf, a tuple becomes `make(items)`. Iterative: tuples may nest deeply."""
    if not isinstance(t, TupleType):
        return next(leaves)
    root: list[Any] = []
    stack: list[tuple[Iterator[Attribute], list[Any]]] = [(iter(t.types), root)]
    while stack:
        types, items = stack[-1]
        element = next(types, None)
        if element is None:
            stack.pop()
            if stack:
                stack[-1][1].append(make(items))
        elif isinstance(element, TupleType):
            stack.append((iter(element.types), []))
        else:
            items.append(next(leaves))
    return make(root)


def size_error(t: TensorType) -> str | None:
    """Why a tensor type exceeds dlc's limits, or None; an empty tensor counts the elements
    of its nonzero dimensions (its strides and loop bounds are i64 all the same)."""
    if t.rank > MAX_RANK:
        return f"tensor rank {t.rank} exceeds the limit of {MAX_RANK}"
    if t.is_dynamic:  # checked per call, on the sizes of the arguments
        return None
    extent = 1
    for d in t.dims:
        extent *= max(d, 1)
        if extent > MAX_ELEMENTS:
            where = " in its nonzero dimensions" if 0 in t.dims else ""
            return f"tensor type {format_type(t)} has more than 2^40 elements{where}"
    if t.num_elements * dtype_bytes(t.dt) > MAX_BYTES:
        return f"tensor type {format_type(t)} is larger than 2^42 bytes"
    return None


def dim_text(d: int | str) -> str:
    """DLVM's spelling of one dimension: `4`, or `%n` (`%past+1`) for a symbolic one."""
    return graph_dims.text(d)


def dynamic_types(t: Attribute) -> list[TensorType]:
    """The tensor types with symbolic dimensions in type `t` (tuples searched)."""
    found: list[TensorType] = []
    stack = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, TensorType) and item.is_dynamic:
            found.append(item)
        elif isinstance(item, TupleType | FunctionType):
            stack.extend(item.types if isinstance(item, TupleType) else (*item.args, item.output))
        elif isinstance(item, ArrayType | PointerType | BoxType):
            stack.append(item.element if not isinstance(item, PointerType) else item.pointee)
    return found


def format_type(t: Attribute) -> str:
    """Print a type in DLVM syntax (iteratively: types may nest deeply)."""
    out: list[str] = []
    stack: list[Attribute | str] = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        stack.extend(reversed(type_parts(item)))
    return "".join(out)


def type_parts(t: Attribute) -> list[Attribute | str]:
    """One level of a type's DLVM spelling: literal text pieces and nested types."""
    if isinstance(t, TensorType):
        if t.is_scalar:
            return [t.dt]
        return ["<" + " x ".join(dim_text(d) for d in t.dims) + " x " + t.dt + ">"]
    if isinstance(t, TupleType):
        parts: list[Attribute | str] = ["("]
        for i, e in enumerate(t.types):
            if i:
                parts.append(", ")
            parts.append(e)
        return parts + [")"]
    if isinstance(t, ArrayType):
        return [f"[{t.count.data} x ", t.element, "]"]
    if isinstance(t, FunctionType):
        parts = ["("]
        for i, e in enumerate(t.args):
            if i:
                parts.append(", ")
            parts.append(e)
        return parts + [") -> ", t.output]
    if isinstance(t, PointerType):
        return ["*", t.pointee]
    if isinstance(t, BoxType):
        return ["box{", t.element, "}"]
    if isinstance(t, StackType):
        return ["stack"]
    if isinstance(t, NominalType):
        return ["$" + t.ident]
    return [str(t)]
