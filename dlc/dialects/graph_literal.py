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

In MLIR syntax the payload prints as JSON: `#graph.lit<"[\"int\", 3]">`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from xdsl.ir import Data
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

LitTree = tuple[Any, ...]


@irdl_attr_definition
class LiteralAttr(Data[LitTree]):
    """A literal value tree (see the module docstring for its shape)."""

    name = "graph.lit"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> LitTree:
        with parser.in_angle_brackets():
            text = parser.parse_str_literal()
        try:
            tree = _freeze(json.loads(text, parse_float=_parse_float))
        except _OutOfRange as err:
            parser.raise_error(f"float {err} in #graph.lit is out of range for f64")
        except (ValueError, RecursionError):
            parser.raise_error("malformed #graph.lit payload")
        if not well_formed(tree):
            parser.raise_error("malformed #graph.lit payload")
        return tree

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_string_literal(json.dumps(self.data))
        printer.print_string(">")


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
