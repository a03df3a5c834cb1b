"""The Python entries check arguments natively (python_entry.py): an exact `ndarray` of
the parameter's dtype and shape, C-contiguous, runs at once; anything else returns
`BAD_ARGUMENTS` before any code runs, and the general path converts it or names the
argument in its error. No object, whatever its type, crashes the check."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import dlc
from dlc.dialects import abi
from dlc.runtime.fastcall import ARRAY_LAYOUT, FAST_CALLS

PROGRAM = """module "n"
stage raw

func @scale: (<2 x 3 x f32>, f32) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>, %s: f32):
    %y = multiply %x: <2 x 3 x f32>, %s: f32
    return %y: <2 x 3 x f32>
}
"""

pytestmark = pytest.mark.skipif(ARRAY_LAYOUT is None, reason="NumPy's array layout unknown")

X = np.arange(6, dtype=np.float32).reshape(2, 3)
S = np.float32(2.0)


@pytest.fixture(scope="module")
def scale():  # noqa: ANN201
    return dlc.compile(PROGRAM).scale


def entry_status(scale, *objects: object) -> int:  # noqa: ANN001
    """Call the native entry itself with these objects (and a fresh result array)."""
    out = np.full((2, 3), -1, np.float32)
    ctx = scale._contexts.get()
    status = scale._native(ctx.address, *map(id, objects), id(out))
    if status == abi.BAD_ARGUMENTS:
        assert (out == -1).all()  # nothing ran
    return status


def test_exact_arrays_pass(scale) -> None:  # noqa: ANN001
    assert entry_status(scale, X, np.array(S)) == 0
    np.testing.assert_array_equal(scale(X, np.array(S)), 2 * X)


@pytest.mark.parametrize(
    "bad",
    [
        np.arange(6, dtype=np.float64).reshape(2, 3),  # dtype
        np.arange(6, dtype=">f4").reshape(2, 3),  # byte order: another dtype object
        np.zeros((3, 2), np.float32),  # shape
        np.zeros((2, 3, 1), np.float32),  # rank
        np.zeros((6,), np.float32),  # rank
        np.zeros((3, 2), np.float32).T,  # not C-contiguous
        np.zeros((2, 6), np.float32)[:, ::2],  # strided
        np.zeros((2, 3), np.float32).view(np.matrix),  # a subclass
        [[0.0] * 3] * 2,  # not an array
        None,
        1.5,
        "text",
        b"bytes",
        object(),
    ],
)
def test_anything_else_runs_nothing(scale, bad: object) -> None:  # noqa: ANN001
    assert entry_status(scale, bad, np.array(S)) == abi.BAD_ARGUMENTS


def test_a_scalar_array_is_checked_too(scale) -> None:  # noqa: ANN001
    assert entry_status(scale, X, S) == abi.BAD_ARGUMENTS  # a NumPy scalar, not an array
    assert entry_status(scale, X, np.array([S])) == abi.BAD_ARGUMENTS  # rank 1


def test_the_general_path_takes_over(scale) -> None:  # noqa: ANN001
    np.testing.assert_array_equal(scale(X, 2.0), 2 * X)  # a Python float is converted
    np.testing.assert_array_equal(scale(np.asfortranarray(X), S), 2 * X)  # made contiguous
    np.testing.assert_array_equal(scale(X.T.copy().T, S), 2 * X)
    with pytest.raises(TypeError, match=r"argument 0 \(%x\) of @scale: expected"):
        scale(X.astype(np.float64), S)
    with pytest.raises(ValueError, match=r"argument 0 \(%x\) of @scale: expected"):
        scale(np.zeros((3, 2), np.float32), S)
    with pytest.raises(TypeError, match=r"argument 0 \(%x\) of @scale: expected"):
        scale([[0.0] * 3] * 2, S)


TRAPS = """module "t"
stage raw

func @checked_get: (<4 x f32>, i64) -> f32 {
'entry(%t: <4 x f32>, %i: i64):
    %v = extract %i: i64 from %t: <4 x f32>
    return %v: f32
}
"""


@pytest.mark.skipif(not FAST_CALLS, reason="not a 64-bit CPython with the GIL")
def test_the_builtin_entry_counts_references(scale) -> None:  # noqa: ANN001
    """The METH_FASTCALL entry returns new references: the result is owned by the
    caller alone, and no call leaks a reference to an argument."""
    assert scale._fast is not None
    s = np.array(S)
    before = sys.getrefcount(X), sys.getrefcount(s)
    for _ in range(1000):
        y = scale(X, s)
    assert sys.getrefcount(y) == 2  # `y` and getrefcount's argument
    assert (sys.getrefcount(X), sys.getrefcount(s)) == before
    failed = scale._builtin.failed
    count = sys.getrefcount(failed)
    for _ in range(100):
        scale(X, 2.0)  # refused natively: `self` comes back, then the general path
    assert sys.getrefcount(failed) == count


def test_arity_and_keywords_take_the_general_path(scale) -> None:  # noqa: ANN001
    with pytest.raises(TypeError, match=r"scale\(\) takes 2 arguments \(x, s\), got 1"):
        scale(X)
    with pytest.raises(TypeError, match=r"scale\(\) takes 2 arguments \(x, s\), got 3"):
        scale(X, S, S)
    np.testing.assert_array_equal(scale(X, s=np.array(S)), 2 * X)


def test_a_failed_call_leaves_a_clean_context() -> None:
    get = dlc.compile(TRAPS, bounds_check=True).checked_get
    t = np.arange(4, dtype=np.float32)
    with pytest.raises(IndexError, match="index 7"):
        get(t, np.array(7, np.int64))
    assert get(t, np.array(2, np.int64)) == 2.0
    with pytest.raises(IndexError):
        get(t, np.array(-9, np.int64))
    assert get(t, np.array(3, np.int64)) == 3.0
