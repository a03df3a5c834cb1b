"""Dimension expressions (`dlc.dialects.graph_dims`): canonical spellings, sums and
products as polynomials, evaluation at bound sizes, DLVM text."""

from __future__ import annotations

import pytest

from dlc.dialects import graph_dims


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("1+past", "past+1"),
        ("b+a", "a+b"),
        ("a+a", "a*2"),
        ("seq*12", "seq*12"),
        ("12*seq", "seq*12"),
        ("%a+%b+2+3", "a+b+5"),
        ("2*3", 6),
        ("n*0", 0),
        (7, 7),
    ],
)
def test_normalize_gives_one_spelling(given: int | str, canonical: int | str):
    assert graph_dims.normalize(given) == canonical


def test_sums_and_products():
    assert graph_dims.add(["past", 1]) == "past+1"
    assert graph_dims.add(["past+1", 1]) == "past+2"
    assert graph_dims.add(["a", "b", "a"]) == "a*2+b"
    assert graph_dims.add([2, 3]) == 5
    assert graph_dims.multiply(["past+1", 4]) == "past*4+4"
    assert graph_dims.multiply(["seq", 3, 4]) == "seq*12"
    assert graph_dims.multiply([2, 3]) == 6
    # a merge of a sum and its split agree as polynomials (shapeCast's check)
    assert graph_dims.product_poly(["past+1", 4]) == graph_dims.product_poly(["past*4+4"])


def test_evaluate_names_and_kinds():
    sizes = {"past": 5, "a": 2, "b": 3}
    assert graph_dims.evaluate("past+1", sizes) == 6
    assert graph_dims.evaluate("a*b+a+4", sizes) == 12
    assert graph_dims.evaluate("past", sizes) == 5 and graph_dims.evaluate(9, sizes) == 9
    assert graph_dims.names("b*a+a+1") == ["a", "b"]
    assert graph_dims.is_name("past") and not graph_dims.is_name("past+1")
    assert not graph_dims.is_name(3)
    assert graph_dims.kind("past+1") == "sum" and graph_dims.kind("seq*12") == "product"


def test_dlvm_text():
    assert graph_dims.text("past+1") == "%past+1"
    assert graph_dims.text("a+b") == "%a+%b"
    assert graph_dims.text("seq*12") == "%seq*12"
    assert graph_dims.text("past*4+4") == "%past*4+4"
    assert graph_dims.text(3) == "3"


def test_an_invalid_expression_is_refused():
    with pytest.raises(ValueError, match="invalid dimension expression 'a-b'"):
        graph_dims.poly("a-b")
