"""Symbol hijacking (issue 28): a program's function named like a libc, libm, LLVM or
dlc runtime symbol once replaced the compiler's own calls (wrong results, SIGSEGV) or
broke the compile (bare IndexError, TypeError, DuplicatedNameError). Program functions
live in their own namespace (`dlc.fn.<name>`, `dlc.dialects.abi.function_symbol`), so
no name collides."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.dialects.abi import function_symbol

NAMES = [
    "memcpy",
    "memmove",
    "memset",
    "exp",
    "expf",
    "log",
    "logf",
    "sin",
    "free",
    "calloc",
    "realloc",
    "aligned_alloc",
    "tanh",
    "erf",
    "llvm.memcpy.p0.p0.i64",
    "llvm.exp.f32",
    "GOMP_parallel",
    "_dlc_py_f",
    "_dlc_pyfast_f",
    "_dlc_var_x",
    "__dlc_const_0",
    "f.nest0",
    "f.omp0",
    "dlc.fn.f",
]


def _program(name: str) -> str:
    return f"""module "m"
stage raw

func @{name}: (<4 x f32>) -> <4 x f32> {{
'entry(%x: <4 x f32>):
    %y = add %x: <4 x f32>, 1: f32
    return %y: <4 x f32>
}}

func @f: (<64 x f32>, <4 x f32>) -> (<64 x f32>, <4 x f32>) {{
'entry(%x: <64 x f32>, %z: <4 x f32>):
    %p = allocateHeap f32 count 4: i64
    %s = createStack
    push %z: <4 x f32> to %s: stack
    %t = pop <4 x f32> from %s: stack
    destroyStack %s: stack
    deallocate %p: *f32
    %e = exp %x: <64 x f32>
    %l = log %e: <64 x f32>
    %s1 = sin %l: <64 x f32>
    %w = apply @{name}(%t: <4 x f32>): (<4 x f32>) -> <4 x f32>
    %r = literal (%s1: <64 x f32>, %w: <4 x f32>): (<64 x f32>, <4 x f32>)
    return %r: (<64 x f32>, <4 x f32>)
}}
"""


@pytest.mark.parametrize(
    ("name", "opt_level"), [*((n, 2) for n in NAMES), ("memcpy", 0), ("exp", 0), ("free", 0)]
)
def test_program_functions_never_take_runtime_names(name: str, opt_level: int) -> None:
    mod = dlc.compile(_program(name), opt_level=opt_level)
    x = np.linspace(0.1, 1, 64, dtype=np.float32)
    got, w = mod.f(x, np.ones(4, np.float32))
    np.testing.assert_allclose(got, np.sin(x), rtol=1e-5, atol=1e-6)
    assert w.tolist() == [2.0] * 4
    assert mod[name](np.zeros(4, np.float32)).tolist() == [1.0] * 4


def test_function_symbols_are_one_namespace() -> None:
    """Distinct DLVM names give distinct symbols, none of them a C or LLVM name."""
    symbols = {function_symbol(n) for n in NAMES}
    assert len(symbols) == len(NAMES)
    assert all(s.startswith("dlc.fn.") for s in symbols)
