"""Regression tests: hostile inputs that once crashed or hung the compiler. Each must be
a located `DiagnosticError` (or a correct result), never a traceback or a hang."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import NominalType, PointerType, TensorType, TupleType
from dlc.dialects.layout import LayoutError, layout

# DLVM's own examples/enum.dl declares this enum.
RECURSIVE_ENUM = """module "enum"
stage raw

enum $Tree {
    ?leaf(f32)
    ?node($Tree, f32)
}

func @f: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
"""


@pytest.mark.parametrize("entry", [dlc.parse, dlc.compile])
def test_recursive_enum_is_a_located_error(entry) -> None:  # noqa: ANN001
    """`layout` once looped forever on an enum that holds itself by value."""
    with pytest.raises(dlc.DiagnosticError) as info:
        entry(RECURSIVE_ENUM, filename="enum.dl")
    assert (info.value.filename, info.value.line, info.value.column) == ("enum.dl", 4, 6)
    assert info.value.message == (
        "recursive type $Tree has infinite size: it contains itself by value "
        "(hold it through a pointer or a box)"
    )


def test_layout_of_unverified_recursive_type_stops() -> None:
    """Unverified IR reaching `layout` gets a LayoutError, not an endless loop."""
    tree = NominalType("Tree", "enum")
    symbols = Symbols(enums={"Tree": [("node", (TupleType([tree]),))]})
    with pytest.raises(LayoutError, match=r"values of the recursive type \$Tree"):
        layout(tree, symbols)
    symbols = Symbols(enums={"List": [("cons", (PointerType(NominalType("List", "enum")),))]})
    assert layout(NominalType("List", "enum"), symbols).size == 32
    f32 = TensorType((), "f32")
    symbols = Symbols(structs={"P": [("a", f32), ("b", f32)]})
    assert layout(TupleType([NominalType("P", "struct")] * 2), symbols).size == 16


def _one_op(body: str, signature: str = "(f32) -> f32", params: str = "%x: f32") -> str:
    return f"""module "m"
stage raw

func @f: {signature} {{
'entry({params}):
{body}
}}
"""


@pytest.mark.parametrize(
    ("literal", "dtype", "message"),
    [
        ("1e39", "f32", "float literal 1e39 is out of range for f32"),
        ("-3.4028236e38", "f32", "float literal -3.4028236e38 is out of range for f32"),
        ("70000.0", "f16", "float literal 70000.0 is out of range for f16"),
        ("65520", "f16", "integer literal 65520 is out of range for f16"),
        ("1e400", "f64", "float literal 1e400 is out of range for f64"),
        ("1" + "0" * 309, "f64", f"integer literal 1{'0' * 309} is out of range for f64"),
    ],
)
@pytest.mark.parametrize("entry", [dlc.parse, dlc.compile])
def test_float_literal_out_of_range_is_a_located_error(
    entry,  # noqa: ANN001
    literal: str,
    dtype: str,
    message: str,
) -> None:
    """Such literals once raised OverflowError from xDSL's FloatAttr while lowering."""
    text = _one_op(
        f"    %y = add %x: {dtype}, {literal}: {dtype}\n    return %y: {dtype}",
        f"({dtype}) -> {dtype}",
        f"%x: {dtype}",
    )
    with pytest.raises(dlc.DiagnosticError) as info:
        entry(text)
    assert (info.value.line, info.value.column, info.value.message) == (6, 23, message)


def test_float_literals_at_the_edge_of_the_range_compile() -> None:
    text = _one_op(
        "    %y = literal <3.4028235e38: f32, -inf: f32, 1e-50: f32>: <3 x f32>\n"
        "    return %y: <3 x f32>",
        "() -> <3 x f32>",
        "",
    )
    got = dlc.compile(text).f()
    assert got.tolist() == [np.float32(3.4028235e38), -np.inf, 0.0]
