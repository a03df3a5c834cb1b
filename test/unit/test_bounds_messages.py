"""Out-of-bounds errors say what was accessed and the offending index: the message is
baked into the code, the index travels in the call context's `CTX_FAULT` word."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlc
from dlc.dialects import abi
from dlc.runtime.context import CallContext

SOURCE = """module "b"
stage raw

func @get: (<4 x f32>, i64) -> f32 {
'entry(%t: <4 x f32>, %i: i64):
    %v = extract %i: i64 from %t: <4 x f32>
    return %v: f32
}

func @put: (<2 x 3 x f32>, <3 x f32>, i32) -> <2 x 3 x f32> {
'entry(%m: <2 x 3 x f32>, %row: <3 x f32>, %i: i32):
    %r = insert %row: <3 x f32> to %m: <2 x 3 x f32> at %i: i32
    return %r: <2 x 3 x f32>
}

func @load_at: (*<4 x f32>, i64) -> f32 {
'entry(%p: *<4 x f32>, %i: i64):
    %q = elementPointer %p: *<4 x f32> at %i: i64
    %v = load %q: *f32
    return %v: f32
}

func @store_at: (*<4 x f64>, i64) -> f64 {
'entry(%p: *<4 x f64>, %i: i64):
    %q = elementPointer %p: *<4 x f64> at %i: i64
    store 2.5: f64 to %q: *f64
    return 2.5: f64
}

func @copy_n: (*<4 x f32>, *<4 x f32>, i64) -> f32 {
'entry(%src: *<4 x f32>, %dst: *<4 x f32>, %n: i64):
    copy from %src: *<4 x f32> to %dst: *<4 x f32> count %n: i64
    return 0.0: f32
}

func @fails: (f32) -> f32 {
'entry(%x: f32):
    trap
    return %x: f32
}
"""


@pytest.fixture(scope="module")
def checked():  # noqa: ANN201
    return dlc.compile(SOURCE, filename="b.dl", bounds_check=True)


@pytest.fixture(scope="module")
def unchecked():  # noqa: ANN201
    return dlc.compile(SOURCE, filename="b.dl", bounds_check=False)


def raises(message: str) -> pytest.RaisesContext:  # type: ignore[type-arg]
    return pytest.raises(IndexError, match=f"^{re.escape(message)}$")


T = np.arange(4, dtype=np.float32)
M = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("index", [4, 9, -1, -(2**63), 2**63 - 1])
def test_extract_index(checked, index: int) -> None:  # noqa: ANN001
    with raises(f"b.dl:6:10: out-of-bounds extract index {index} into <4 x f32>"):
        checked.get(T, np.int64(index))
    assert checked.get(T, np.int64(3)) == 3.0  # the module stays usable


@pytest.mark.parametrize("index", [2, -5, 2**31 - 1])
def test_insert_index_of_a_narrower_type(checked, index: int) -> None:  # noqa: ANN001
    with raises(f"b.dl:12:10: out-of-bounds insert index {index} into <2 x 3 x f32>"):
        checked.put(M, np.ones(3, np.float32), np.int32(index))


@pytest.mark.parametrize(("index", "offset"), [(4, 16), (-1, -4), (1 << 40, 4 << 40)])
def test_pointer_load_gives_the_byte_offset(checked, unchecked, index: int, offset: int) -> None:  # noqa: ANN001
    for mod in (checked, unchecked):  # pointer accesses are always checked
        with raises(
            f"b.dl:19:10: out-of-bounds load of 4 bytes through a pointer at byte offset {offset}"
        ):
            mod.load_at(T.copy(), np.int64(index))


def test_pointer_store_gives_the_byte_offset(unchecked) -> None:  # noqa: ANN001
    buffer = np.zeros(4, np.float64)
    with raises("b.dl:26:5: out-of-bounds store of 8 bytes through a pointer at byte offset 32"):
        unchecked.store_at(buffer, np.int64(4))
    assert not buffer.any()  # nothing was written
    assert unchecked.store_at(buffer, np.int64(3)) == 2.5 and buffer[3] == 2.5


def test_copy_with_a_dynamic_count(unchecked) -> None:  # noqa: ANN001
    src, dst = T.copy(), np.zeros(4, np.float32)
    with raises("b.dl:32:5: out-of-bounds load through a pointer at byte offset 0"):
        unchecked.copy_n(src, dst, np.int64(5))
    assert not dst.any()


def test_other_traps_keep_their_messages(checked) -> None:  # noqa: ANN001
    with pytest.raises(dlc.TrapError, match=r"^b\.dl:38:5: trap$"):
        checked.fails(1.0)


def test_messages_baked_into_the_code() -> None:
    """The value goes at the last tab of a "bounds-value" message; ctx word CTX_FAULT."""
    messages = dlc.compile(SOURCE, filename="b.dl", bounds_check=True).ir_module("llvm")
    texts = [m.data for m in messages.attributes[abi.MESSAGES].data]  # type: ignore[attr-defined]
    assert "bounds-value\tb.dl:6:10: out-of-bounds extract index \t into <4 x f32>" in texts
    assert abi.CTX_FAULT < abi.CTX_WORDS and len({abi.CTX_FAULT, abi.CTX_THREADS}) == 2
    assert CallContext(0).words.shape == (abi.CTX_WORDS,)
