"""The importer's type promotion (dlc/onnx/promote.py) is a written rule, not NumPy's
answer of the day: the same pairs promote the same way whatever ml_dtypes is installed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dlc.dtypes import numpy_dtype
from dlc.onnx.promote import promoted

NOT_BF16 = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"]


@pytest.mark.parametrize("a, b", list(itertools.combinations_with_replacement(NOT_BF16, 2)))
def test_numpys_array_promotion_without_bf16(a, b):
    """Without bf16 the rule is NumPy's for arrays (onnx's reference computes with it)."""
    assert numpy_dtype(promoted(a, b)) == np.result_type(numpy_dtype(a), numpy_dtype(b))
    assert promoted(a, b) == promoted(b, a)


@pytest.mark.parametrize(
    "dts, expected",
    [
        (("bf16", "bf16"), "bf16"),
        (("i8", "bf16"), "bf16"),  # 8-bit integers fit bf16's 8-bit significand
        (("u8", "bf16"), "bf16"),
        (("bool", "bf16"), "bf16"),
        (("i16", "bf16"), "f32"),
        (("u16", "bf16"), "f32"),
        (("i32", "bf16"), "f64"),
        (("u64", "bf16"), "f64"),
        (("f16", "bf16"), "f32"),  # neither holds the other
        (("bf16", "f32"), "f32"),
        (("f64", "bf16"), "f64"),
        (("f32", "f16", "bf16"), "f32"),
    ],
)
def test_bf16_promotes_to_the_least_type_holding_both(dts, expected):
    assert promoted(*dts) == expected
    assert promoted(*reversed(dts)) == expected


def test_true_division_of_integers_is_f64():
    assert promoted("i32", "i8", divide=True) == "f64"
    assert promoted("i32", divide=True) == "f64"
    assert promoted("bf16", "u8", divide=True) == "bf16"
    assert promoted("f16", divide=True) == "f16"
