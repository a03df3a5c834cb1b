"""Literal values of the `graph` dialect.

A DLVM literal is a tree. dlc stores it in one immutable attribute, `#graph.lit`, whose
payload is a plain Python tuple tree (hashable, compared and hashed in C, so deep trees
need no Python recursion):

| DLVM                      | payload                                   |
|---------------------------|-------------------------------------------|
| `3`                       | `("int", 3)`                              |
| `1.5`, `inf`, `nan`       | `("float", 1.5)`                          |
| `true`                    | `("bool", True)`                          |
| `%v` inside an aggregate  | `("operand", k)`: the literal op's k-th operand |
| `<e0, e1>`                | `("tensor", (e0, e1))`                    |
| `(e0, e1)`                | `("tuple", (e0, e1))`                     |
| `[e0, e1]`                | `("array", (e0, e1))`                     |
| `{#a = e0, #b = e1}`      | `("struct", (("a", e0), ("b", e1)))`      |
| `?c(e0, e1)`              | `("enum", "c", (e0, e1))`                 |
| `zero` `undefined` `null` | `("zero",)` `("undefined",)` `("null",)`  |
| `dense "<base64>"`        | `("dense", b"...")`                       |

A **dense** node (dlc's addition) is a whole tensor as the raw little-endian bytes of
its elements, row-major, in the NumPy layout of its data type (bool: one byte, 0 or 1;
bf16: its 16 bits); the type it stands for (the op's type, or the element type where it
is an element) gives the data type and shape. Weights are dense: one bytes object,
never a Python object per element, so they are checked, compared, hashed and lowered
in bulk. `array_tree` makes the literal of a NumPy array: a splat when all elements are
equal, a nested `tensor` tree up to `DENSE_MIN_ELEMENTS - 1` elements, dense beyond.

In MLIR syntax the payload prints as JSON, the bytes of a dense node as base64:
`#graph.lit<"[\"int\", 3]">`, `#graph.lit<"[\"dense\", {\"base64\": \"AACAPw==\"}]">`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

import numpy as np
from xdsl.ir import Data
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from dlc.dtypes import NATIVE_DTYPES, dtype_holds_floats, dtype_is_bool, numpy_dtype

LitTree = tuple[Any, ...]

DENSE_MIN_ELEMENTS = 17
"""Arrays of at least this many elements (not all equal) become dense literals."""


@irdl_attr_definition
class LiteralAttr(Data[LitTree]):
    """A literal value tree (see the module docstring for its shape)."""

    name = "graph.lit"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> LitTree:
        with parser.in_angle_brackets():
            text = parser.parse_str_literal()
        try:
            tree = _freeze(json.loads(text, parse_float=_parse_float, object_hook=_from_json))
        except _OutOfRange as err:
            parser.raise_error(f"float {err} in #graph.lit is out of range for f64")
        except (ValueError, RecursionError):
            parser.raise_error("malformed #graph.lit payload")
        if not well_formed(tree):
            parser.raise_error("malformed #graph.lit payload")
        return tree

    def print_parameter(self, printer: Printer) -> None:
        # `printer.print_string_literal` escapes byte by byte in Python (12 s for a
        # 1024 x 1024 weight). JSON text is printable ASCII (`ensure_ascii`, control
        # characters escaped), so its escapes are these two, done in C.
        text = json.dumps(self.data, default=_to_json)
        escaped = text.replace("\\", "\\\\").replace('"', "\\22")
        printer.print_string(f'<"{escaped}">')


def _to_json(obj: object) -> object:
    """The JSON form of a dense node's bytes (`json.dumps`' hook for what it lacks)."""
    if isinstance(obj, bytes):
        return {"base64": base64.b64encode(obj).decode("ascii")}
    raise TypeError(f"{type(obj).__name__} in a literal tree")


def _from_json(obj: dict[str, Any]) -> object:
    """`{"base64": "..."}` -> its bytes (ValueError when malformed); other objects stay
    dicts, which `well_formed` refuses."""
    if set(obj) != {"base64"} or not isinstance(obj["base64"], str):
        return obj
    try:
        return base64.b64decode(obj["base64"], validate=True)
    except binascii.Error:
        raise ValueError("malformed base64") from None


class _OutOfRange(ValueError):
    """A finite JSON number beyond f64's range (Python would read it as infinity)."""


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _OutOfRange(text)
    return value


def _freeze(obj: Any) -> Any:
    """JSON lists -> tuples, iteratively (post-order with an explicit stack)."""
    if not isinstance(obj, list):
        return obj
    stack: list[tuple[Any, list[Any]]] = [(iter(obj), [])]
    while True:
        items, acc = stack[-1]
        for x in items:
            if isinstance(x, list):
                stack.append((iter(x), []))
                break
            acc.append(x)
        else:
            stack.pop()
            done = tuple(acc)
            if not stack:
                return done
            stack[-1][1].append(done)


_LEAVES = {"zero", "undefined", "null"}
_SEQUENCES = {"tensor", "tuple", "array"}


def well_formed(tree: object) -> bool:
    """`tree` has the shape of the module docstring's table (iteratively): what MLIR
    input must give before the literal checks (`graph_check`) look at its values."""
    work = [tree]
    while work:
        node = work.pop()
        if not isinstance(node, tuple) or not node or not isinstance(node[0], str):
            return False
        kind, rest = node[0], node[1:]
        if kind in _LEAVES:
            ok = not rest
        elif kind in ("int", "operand"):
            ok = len(rest) == 1 and type(rest[0]) is int
        elif kind == "float":
            ok = len(rest) == 1 and type(rest[0]) in (int, float)
        elif kind == "bool":
            ok = len(rest) == 1 and type(rest[0]) is bool
        elif kind == "dense":
            ok = len(rest) == 1 and type(rest[0]) is bytes
        elif kind in _SEQUENCES:
            ok = len(rest) == 1 and isinstance(rest[0], tuple)
            work.extend(rest[0] if ok else ())
        elif kind == "struct":
            ok = len(rest) == 1 and isinstance(rest[0], tuple)
            ok = ok and all(_is_field(f) for f in rest[0])
            work.extend(f[1] for f in rest[0] if ok)
        elif kind == "enum":
            ok = len(rest) == 2 and isinstance(rest[0], str) and isinstance(rest[1], tuple)
            work.extend(rest[1] if ok else ())
        else:
            ok = False
        if not ok:
            return False
    return True


def _is_field(field: object) -> bool:
    return isinstance(field, tuple) and len(field) == 2 and isinstance(field[0], str)


def is_scalar_lit(tree: LitTree) -> bool:
    return tree[0] in ("int", "float", "bool")


def scalar_value(tree: LitTree) -> int | float | bool:
    return tree[1]


# -- dense literals -----------------------------------------------------------------


def dense_dtype(dt: str) -> np.dtype:
    """The NumPy dtype of a dense node's bytes for data type `dt` (little-endian)."""
    dtype = numpy_dtype(dt)
    return dtype if dtype.itemsize == 1 else dtype.newbyteorder("<")


def dense_array(data: bytes, dt: str, dims: tuple[int, ...]) -> np.ndarray:
    """The elements of a dense node of type `<dims x dt>` as a read-only array (a view of
    the bytes, no copy); the node must have been checked (`graph_check`)."""
    return np.frombuffer(data, dtype=dense_dtype(dt)).reshape(dims)


def dense_tree(value: np.ndarray, dt: str) -> LitTree:
    """The dense node of `value` (converted to `dt`'s NumPy type, row-major): the bytes
    object `value` views when it views one whole (an ONNX weight's raw data: the
    weights are not copied), else a copy."""
    assert dt in NATIVE_DTYPES, f"no dense literal of {dt}"
    contiguous = np.ascontiguousarray(value, dtype=dense_dtype(dt))
    whole = viewed_bytes(contiguous)
    return ("dense", whole if whole is not None else contiguous.tobytes())


def viewed_bytes(value: np.ndarray) -> bytes | None:
    """The bytes object whose whole buffer row-major `value` views, or None. Bytes are
    immutable, so the node can hold them instead of a copy."""
    base = value.base
    while isinstance(base, np.ndarray):
        base = base.base
    if not isinstance(base, bytes) or len(base) != value.nbytes or not value.flags.c_contiguous:
        return None
    return base if np.frombuffer(base, np.uint8).ctypes.data == value.ctypes.data else None


def scalar_tree(x: Any, dt: str) -> LitTree:
    """The scalar node of `x` as a `dt` element: bool, float or int."""
    if dtype_is_bool(dt):
        return ("bool", bool(x))
    return ("float", float(x)) if dtype_holds_floats(dt) else ("int", int(x))


def all_equal(value: np.ndarray) -> bool:
    """Whether every element of `value` has the bits of the first (-0.0 is not 0.0, a
    NaN equals the same NaN); False for an empty array. In growing chunks, so the
    usual weight, whose first elements already differ, costs almost nothing."""
    flat = np.ascontiguousarray(value).reshape(-1)
    if flat.size == 0:
        return False
    raw = flat.view(np.uint8).reshape(flat.size, flat.itemsize)
    start, chunk = 0, 64
    while start < flat.size:
        if not (raw[start : start + chunk] == raw[0]).all():
            return False
        start, chunk = start + chunk, min(chunk * 4, 1 << 20)
    return True


def array_tree(value: np.ndarray, dt: str) -> LitTree:
    """The literal of array `value` as type `<shape x dt>`: a splat when all elements
    have the same bits, a dense node from `DENSE_MIN_ELEMENTS` elements (on native data
    types), else a `<…>` tree nested per dimension."""
    value = np.asarray(value)
    if all_equal(value):
        return scalar_tree(value.reshape(-1)[0], dt)
    if value.size >= DENSE_MIN_ELEMENTS and dt in NATIVE_DTYPES:
        return dense_tree(value, dt)
    kind = scalar_tree(0, dt)[0]
    python = bool if kind == "bool" else float if kind == "float" else int
    tree: Any = [(kind, python(x)) for x in value.reshape(-1).tolist()]
    for n in reversed(value.shape):  # group innermost dimension first
        tree = (
            [("tensor", tuple(tree[i : i + n])) for i in range(0, len(tree), n)]
            if n
            else [("tensor", ())]
        )
    return tree[0]
