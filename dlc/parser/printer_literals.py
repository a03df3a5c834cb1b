"""Literal and attribute texts of the DLVM printer (docs/reference/language.md).

`format_literal` prints a literal use `LIT: T` iteratively (nesting depth is unbounded),
`TypeTexts` memoizes type texts for it, and `format_scalar`, `format_ints`,
`format_shape` and `format_string` spell scalar payloads, index lists, shapes and
string literals.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute

from dlc.dialects import graph_dims
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_literal import LitTree
from dlc.dialects.graph_types import (
    ArrayType,
    NominalType,
    TensorType,
    TupleType,
    format_type,
    type_parts,
)

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


class TypeTexts:
    """Memoized `format_type` that also memoizes nested types, so printing each level of a
    deeply nested literal stays cheap. Keyed by identity: hashing a deep type recurses."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Attribute, str]] = {}  # the type keeps its id unique

    def __call__(self, t: Attribute) -> str:
        work = [t]
        while work:
            top = work[-1]
            if id(top) in self._texts:
                work.pop()
                continue
            parts = type_parts(top)
            missing = [p for p in parts if not isinstance(p, str) and id(p) not in self._texts]
            if missing:
                work.extend(missing)
                continue
            text = "".join(p if isinstance(p, str) else self._texts[id(p)][1] for p in parts)
            self._texts[id(top)] = (top, text)
            work.pop()
        return self._texts[id(t)][1]


def format_scalar(kind: str, value: Any) -> str:
    """`3`, `1.5`, `1e-05`, `inf`, `nan`, `true`: the DLVM spelling of a scalar payload."""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value))
    return str(int(value))


def format_dense(data: bytes) -> str:
    """The payload of a dense literal: its bytes as a base64 string."""
    return '"' + base64.b64encode(data).decode("ascii") + '"'


def format_literal(
    tree: LitTree,
    ty: Attribute,
    symbols: Symbols | None = None,
    operand: Callable[[int], str] | None = None,
    dense: Callable[[bytes], str] = format_dense,
) -> str:
    """A literal as a DLVM use, `LIT: T` (elements of aggregates carry their own types).

    `operand(k)` prints the literal op's k-th operand (a `("operand", k)` element);
    `symbols` gives struct fields and enum cases; `dense(data)` spells the payload of a
    dense literal (`dense PAYLOAD: T`). Iterative: nesting depth is unbounded.
    """
    types = TypeTexts()
    out: list[str] = []
    work: list[str | tuple[LitTree, Attribute]] = [(tree, ty)]
    while work:
        item = work.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, t = item
        if node[0] == "operand":
            if operand is None:
                raise ValueError("literal operand element printed without its operands")
            out.append(operand(node[1]))
            continue
        if node[0] == "dense":
            out.append(f"dense {dense(node[1])}: {types(t)}")
            continue
        work.extend(reversed(_literal_parts(node, t, types(t), symbols)))
    return "".join(out)


def _literal_parts(
    node: LitTree, t: Attribute, type_text: str, symbols: Symbols | None
) -> list[str | tuple[LitTree, Attribute]]:
    """One level of a literal use: text pieces and (element, element type) pairs."""
    kind = node[0]
    if kind in ("int", "float", "bool"):
        return [f"{format_scalar(kind, node[1])}: {type_text}"]
    if kind in ("zero", "undefined", "null"):
        return [f"{kind}: {type_text}"]
    if kind == "struct":
        fields = dict(_struct_fields(t, symbols))
        pairs = [(f"#{name} = ", (value, fields[name])) for name, value in node[1]]
        return _joined("{", pairs, "}", type_text)
    if kind == "enum":
        case_types = _enum_case(t, node[1], symbols)
        return _joined(
            f"?{node[1]}(", [("", p) for p in zip(node[2], case_types, strict=True)], ")", type_text
        )
    brackets = {"tensor": ("<", ">"), "tuple": ("(", ")"), "array": ("[", "]")}
    if kind not in brackets:
        raise ValueError(f"unknown literal kind {kind!r}")
    elems = node[1]
    open_, close = brackets[kind]
    return _joined(
        open_,
        [("", p) for p in zip(elems, _element_types(kind, t, len(elems)), strict=True)],
        close,
        type_text,
    )


def _joined(
    open_: str, items: list[tuple[str, tuple[LitTree, Attribute]]], close: str, type_text: str
) -> list[str | tuple[LitTree, Attribute]]:
    parts: list[str | tuple[LitTree, Attribute]] = [open_]
    for i, (prefix, elem) in enumerate(items):
        parts.append((", " if i else "") + prefix)
        parts.append(elem)
    parts.append(f"{close}: {type_text}")
    return parts


def _element_types(kind: str, t: Attribute, count: int) -> Iterable[Attribute]:
    if kind == "tensor" and isinstance(t, TensorType) and t.rank >= 1:
        return [t.with_shape(t.dims[1:])] * count
    if kind == "tuple" and isinstance(t, TupleType) and len(t.types) == count:
        return t.types
    if kind == "array" and isinstance(t, ArrayType):
        return [t.element] * count
    raise ValueError(f"{kind} literal is not a valid value of type {format_type(t)}")


def _struct_fields(t: Attribute, symbols: Symbols | None) -> list[tuple[str, Attribute]]:
    if not isinstance(t, NominalType) or symbols is None or t.ident not in symbols.structs:
        raise ValueError(f"struct literal of type {format_type(t)} has no known struct")
    return symbols.structs[t.ident]


def _enum_case(t: Attribute, case: str, symbols: Symbols | None) -> tuple[Attribute, ...]:
    cases = dict(symbols.enums.get(t.ident, [])) if isinstance(t, NominalType) and symbols else {}
    if case not in cases:
        raise ValueError(f"enum literal ?{case} is not a case of {format_type(t)}")
    return cases[case]


def format_ints(attr: Attribute | None) -> str:
    assert isinstance(attr, ArrayAttr)
    return ", ".join(str(x.data) for x in attr.data)


def format_shape(attr: ArrayAttr[IntAttr] | ArrayAttr[IntAttr | StringAttr]) -> str:
    """`2 x 3`, `%n x 4` (a symbolic dimension) or `scalar`."""
    dims = (graph_dims.text(d.data) for d in attr.data)
    return " x ".join(dims) or "scalar"


def format_string(text: str) -> str:
    """A DLVM string literal with the escapes \\" \\\\ \\n \\t \\r."""
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in text) + '"'
