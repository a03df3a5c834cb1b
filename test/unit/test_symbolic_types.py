"""Symbolic dimensions at the graph level: `<%n x 4 x f32>` parsed, printed, inferred
through the supported ops, and a located "not supported yet" error everywhere else."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc import pipeline
from dlc.diagnostics import DiagnosticError
from dlc.dialects.graph_symbolic import is_symbolic
from dlc.dialects.graph_types import TensorType, format_type, size_error
from dlc.parser import parse_module, print_module

MLP = """\
module "mlp"
stage raw

func @mlp: (<%batch x 8 x f32>, <8 x 16 x f32>, <1 x 16 x f32>) -> <%batch x 16 x f32> {
'entry(%x: <%batch x 8 x f32>, %w: <8 x 16 x f32>, %b: <1 x 16 x f32>):
    %h = dot %x: <%batch x 8 x f32>, %w: <8 x 16 x f32>
    %a = add %h: <%batch x 16 x f32>, %b: <1 x 16 x f32>
    %r = max %a: <%batch x 16 x f32>, 0: f32
    return %r: <%batch x 16 x f32>
}
"""


def _function(signature: str, params: str, body: str) -> str:
    return f"""\
module "m"
stage raw

func @f: {signature} {{
'entry({params}):
{body}
}}
"""


def test_type_keeps_names_and_spells_them():
    t = TensorType(("n", 4), "f32")
    assert t.dims == ("n", 4) and t.symbols == ("n",) and t.is_dynamic
    assert format_type(t) == "<%n x 4 x f32>"
    assert not TensorType((2, 4), "f32").is_dynamic
    assert size_error(t) is None  # sizes are checked per call
    with pytest.raises(ValueError, match="no static element count"):
        _ = t.num_elements


def test_parse_print_round_trip_and_inference():
    module = parse_module(MLP, "mlp.dl")
    assert is_symbolic(module)
    text = print_module(module)
    assert "func @mlp: (<%batch x 8 x f32>, <8 x 16 x f32>, <1 x 16 x f32>)" in text
    assert "%h = dot %x: <%batch x 8 x f32>, %w: <8 x 16 x f32>" in text
    again = parse_module(text, "again.dl")
    assert again.is_structurally_equivalent(module)
    module.verify()


def test_static_module_is_not_symbolic():
    static = MLP.replace("%batch", "2")
    assert not is_symbolic(parse_module(static, "static.dl"))


def test_reduce_drops_the_axis_and_keeps_the_name():
    src = _function(
        "(<%n x 4 x f32>) -> <%n x f32>",
        "%x: <%n x 4 x f32>",
        "    %r = reduce %x: <%n x 4 x f32> by add init 0: f32 along 1\n    return %r: <%n x f32>",
    )
    assert "-> <%n x f32>" in print_module(parse_module(src, "r.dl"))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "reverse %x: <%n x 4 x f32> along 0",
            "reverse: not supported yet with symbolic dimension %n",
        ),
        ("literal 0.0: <%n x 4 x f32>", "literal: not supported yet with symbolic dimension %n"),
        (
            "reduce %x: <%n x 4 x f32> by subtract init 0: f32 along 1",
            "reduce by subtract: not supported yet with symbolic dimension %n",
        ),
        (
            "add %x: <%n x 4 x f32>, %y: <%m x 4 x f32>",
            "add: shapes <%n x 4 x f32> and <%m x 4 x f32> are not broadcastable",
        ),
        (
            "concatenate %x: <%n x 4 x f32>, %y: <%m x 4 x f32> along 1",
            "concatenate: <%m x 4 x f32> does not match <%n x 4 x f32> along axis 1",
        ),
    ],
)
def test_outside_the_subset_is_a_located_error(line: str, message: str):
    src = _function(
        "(<%n x 4 x f32>, <%m x 4 x f32>) -> <%n x 4 x f32>",
        "%x: <%n x 4 x f32>, %y: <%m x 4 x f32>",
        f"    %z = {line}\n    return %x: <%n x 4 x f32>",
    )
    with pytest.raises(DiagnosticError) as info:
        parse_module(src, "sub.dl")
    assert str(info.value).startswith(f"sub.dl:6:10: error: {message}")


def test_result_dimension_must_be_bound_by_a_parameter():
    src = _function(
        "(<%n x 4 x f32>) -> <%k x 4 x f32>",
        "%x: <%n x 4 x f32>",
        "    return %x: <%n x 4 x f32>",
    )
    with pytest.raises(DiagnosticError) as info:
        parse_module(src, "free.dl")
    assert str(info.value).startswith(
        "free.dl:4:12: error: symbolic dimension %k of the result is not the size of any parameter"
    )


MERGED = """\
module "t"
stage raw

func @f: (<2 x %seq x 3 x f32>) -> <3 x %seq x 2 x f32> {
'entry(%x: <2 x %seq x 3 x f32>):
    %m = shapeCast %x: <2 x %seq x 3 x f32> to 2 x %seq*3
    %t = transpose %m: <2 x %seq*3 x f32>
    %r = shapeCast %t: <%seq*3 x 2 x f32> to 3 x %seq x 2
    return %r: <3 x %seq x 2 x f32>
}
"""


def test_a_product_of_dimensions_round_trips():
    """`%seq*3` (adjacent dimensions merged, as an ONNX transpose of blocks of axes
    is imported) prints and parses back, and compiles."""
    assert print_module(parse_module(MERGED, "t.dl")) == MERGED
    x = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    expected = x.reshape(2, 15).T.reshape(3, 5, 2)
    np.testing.assert_array_equal(dlc.compile(MERGED).f(x), expected)


def test_a_product_of_dimensions_in_a_parameter_is_located():
    src = _function(
        "(<%n*2 x f32>) -> <%n*2 x f32>", "%x: <%n*2 x f32>", "    return %x: <%n*2 x f32>"
    )
    with pytest.raises(DiagnosticError) as info:
        parse_module(src, "p.dl")
    assert str(info.value).startswith(
        "p.dl:4:12: error: symbolic dimension %n*2 of a parameter is a product of %n, "
        "which no parameter's dimension names alone"
    )


def test_dot_of_vectors_is_outside_the_subset():
    src = _function(
        "(<%n x f32>, <%n x f32>) -> <%n x f32>",
        "%x: <%n x f32>, %w: <%n x f32>",
        "    %y = dot %x: <%n x f32>, %w: <%n x f32>\n    return %x: <%n x f32>",
    )
    with pytest.raises(DiagnosticError, match="dot: not supported yet with symbolic dimension %n"):
        parse_module(src, "dot3.dl")


def test_inner_symbolic_dimension_must_match_by_name():
    src = _function(
        "(<4 x %k x f32>, <%j x 3 x f32>) -> <4 x 3 x f32>",
        "%a: <4 x %k x f32>, %b: <%j x 3 x f32>",
        "    %y = dot %a: <4 x %k x f32>, %b: <%j x 3 x f32>\n    return %y: <4 x 3 x f32>",
    )
    with pytest.raises(DiagnosticError, match="inner dimensions differ"):
        parse_module(src, "inner.dl")


@pytest.mark.parametrize("name", ["fold-constants", "superoptimize", "lower-graph-to-tensor"])
def test_static_only_passes_refuse_with_a_location(name: str):
    module = parse_module(MLP, "mlp.dl")
    with pytest.raises(DiagnosticError) as info:
        pipeline.make_pass(name).apply(pipeline.context(), module)
    assert str(info.value).startswith(
        f"mlp.dl:4:6: error: {name}: not supported yet with symbolic dimension %batch"
    )
