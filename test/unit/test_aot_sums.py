"""A C library of a function with a sum of symbolic dimensions and several results (a
KV cache grown by one): the header spells `%past+1` and its element count `(past + 1)`,
and the entry point returns what the JIT returns at every size."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import numpy as np
import pytest

import dlc

CACHE = """\
module "cache"
stage raw

func @step: (<2 x %past x 3 x f32>, <2 x 1 x 3 x f32>) -> (<2 x %past+1 x 3 x f32>, <2 x %past+1 x f32>) {
'entry(%p: <2 x %past x 3 x f32>, %k: <2 x 1 x 3 x f32>):
    %c = concatenate %p: <2 x %past x 3 x f32>, %k: <2 x 1 x 3 x f32> along 1
    %e = exp %c: <2 x %past+1 x 3 x f32>
    %s = reduce %e: <2 x %past+1 x 3 x f32> by add init 0: f32 along 2
    %t = literal (%c: <2 x %past+1 x 3 x f32>, %s: <2 x %past+1 x f32>): (<2 x %past+1 x 3 x f32>, <2 x %past+1 x f32>)
    return %t: (<2 x %past+1 x 3 x f32>, <2 x %past+1 x f32>)
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on this machine")
def test_a_grown_cache_from_c(tmp_path: Path) -> None:
    module = dlc.compile(CACHE, filename="cache.dl")
    module.export(tmp_path / "libcache.so")
    header = (tmp_path / "cache.h").read_text()
    assert (
        "out  result0: f32 [2 x %past+1 x 3] (C-contiguous, written by the call, 2 * (past + 1) * 3 elements)"
        in header
    )
    library = ctypes.CDLL(str(tmp_path / "libcache.so"))
    pointer = ctypes.c_void_p
    library.cache_step.argtypes = [ctypes.c_int64, pointer, pointer, pointer, pointer]
    library.cache_step.restype = ctypes.c_int32
    rng = np.random.default_rng(0)
    for past in (0, 3, 17):
        p = rng.standard_normal((2, past, 3)).astype(np.float32)
        k = rng.standard_normal((2, 1, 3)).astype(np.float32)
        grown = np.empty((2, past + 1, 3), np.float32)
        sums = np.empty((2, past + 1), np.float32)
        addresses = [a.ctypes.data for a in (p, k, grown, sums)]
        assert library.cache_step(past, *addresses) == 0
        want = module.step(p, k)
        np.testing.assert_array_equal(grown, want[0])
        np.testing.assert_array_equal(sums, want[1])
