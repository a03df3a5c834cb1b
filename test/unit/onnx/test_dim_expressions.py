"""ONNX `dim_param`s that name a sum or product of other dimensions
(`past_sequence_length + 1`) as dimension expressions (`dlc.onnx.graph_io`)."""

from __future__ import annotations

import pytest

from dlc.onnx.graph_io import dim_expression, is_expression

NAMES = {"past_sequence_length", "sequence_length", "batch"}


@pytest.mark.parametrize(
    ("dim_param", "expression"),
    [
        ("past_sequence_length + 1", "past_sequence_length+1"),
        ("past_sequence_length + sequence_length", "past_sequence_length+sequence_length"),
        ("sequence_length+past_sequence_length", "past_sequence_length+sequence_length"),
        ("batch * 4", "batch*4"),
        ("1 + past_sequence_length + 2", "past_sequence_length+3"),
    ],
)
def test_sums_of_known_names(dim_param: str, expression: str):
    assert is_expression(dim_param)
    assert dim_expression(dim_param, NAMES) == expression


@pytest.mark.parametrize(
    "dim_param", ["past_sequence_length", "total + 1", "2 + 3", "a - b", "batch size"]
)
def test_anything_else_stays_one_name(dim_param: str):
    """A plain name, a name no other dimension has, no name at all, other operators."""
    assert dim_expression(dim_param, NAMES) is None
