"""Regression tests: hostile inputs that once crashed or hung the compiler. Each must be
a located `DiagnosticError` (or a correct result), never a traceback or a hang."""

from __future__ import annotations

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
