"""Regression tests: programs that once compiled to wrong results, against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.api import compile_graph_module
from dlc.semantics.interpreter import run_function

HERE = Path(__file__).parent


def test_fused_nest_does_not_overwrite_a_buffer_it_still_reads() -> None:
    """plan-memory once gave `%g = tanh %g0` the bytes of `%f` in place, although the fused
    nest that stores g reads f (for `%fc = multiply %f, %c`) after that store."""
    module = dlc.parse((HERE / "regress_fused_inplace.dl").read_text(), "regress_fused_inplace.dl")
    rng = np.random.default_rng(1)
    shapes = [(4, 16), (4, 8), (4, 8), (16, 32), (8, 32), (1, 32), (4, 8)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    expected = run_function(module, "cg", args)
    compiled = compile_graph_module(module)
    np.testing.assert_allclose(compiled.cg(*args), expected, rtol=1e-5, atol=1e-6)


def test_f64_to_f16_cast_is_correctly_rounded_and_does_not_crash() -> None:
    """f64 -> f16 once called compiler-rt's `__truncdfhf2`, absent from the JIT: a segfault.
    Now it rounds to odd through f32; check it against NumPy on values halfway between
    neighbouring f16 numbers (where a naive double rounding goes wrong) and specials."""
    rng = np.random.default_rng(0)
    low = rng.standard_normal(2000).astype(np.float16)
    high = np.nextafter(low, np.float16(np.inf))
    mid = (low.astype(np.float64) + high.astype(np.float64)) / 2
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 65504.0, 65520.0, 65519.99, 6e-8, 3e-8]
    x = np.concatenate([mid, mid * (1 + 1e-12), mid * (1 - 1e-12), specials])
    x = np.concatenate([x, rng.standard_normal(4000) * 1e-5, rng.standard_normal(4000) * 3e4])
    n = x.size
    source = f"""module "cast"
stage raw

func @f: (<{n} x f64>) -> <{n} x f16> {{
'entry(%x: <{n} x f64>):
    %y = dataTypeCast %x: <{n} x f64> to f16
    return %y: <{n} x f16>
}}
"""
    got = dlc.compile(source).f(x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got, want)


def test_function_combinator_that_reenters_the_reducing_function() -> None:
    """`@total` reduces by `@comb`, which calls `@total` again: the function is reentrant
    through `loop.scalar_call`, so plan-memory must not give it a static arena."""
    text = (HERE / "regress_combinator_reentry.dl").read_text()
    module = dlc.parse(text, "regress_combinator_reentry.dl")
    compiled = dlc.compile(text)
    for values in ([1, 2, 3, 4], [50, 60, 70, 80], [20, 5, 10, 30]):
        x = np.array(values, np.float32)
        np.testing.assert_allclose(compiled.total(x), run_function(module, "total", [x]), rtol=1e-6)


def test_out_of_range_pointer_access_raises_without_bounds_checking() -> None:
    """A load through an out-of-range `elementPointer` once read arbitrary memory (and
    segfaulted) unless bounds checking was on; pointer accesses are now always checked."""
    text = (HERE / "regress_pointer_oob.dl").read_text()
    compiled = dlc.compile(text, filename="regress_pointer_oob.dl", bounds_check=False)
    buffer = np.arange(4, dtype=np.float32)
    assert compiled.f(buffer, 3) == 3.0
    for index in (4, -1, 1 << 40):
        with pytest.raises(IndexError, match=r"regress_pointer_oob.dl:7:10: out-of-bounds load"):
            compiled.f(buffer, index)
    assert compiled.f(buffer, 2) == 2.0


def test_failed_heap_allocation_traps_instead_of_writing_through_null() -> None:
    """`allocateHeap` with a negative or huge count once returned NULL with bounds that
    claimed the requested size, so the next store wrote near address 0 (a segfault)."""
    text = (HERE / "regress_heap_failure.dl").read_text()
    compiled = dlc.compile(text, filename="regress_heap_failure.dl")
    assert compiled.f(10) == 1.0
    for count in (-1, 1 << 50):
        with pytest.raises(
            dlc.TrapError, match="regress_heap_failure.dl:6:10: heap allocation failed"
        ):
            compiled.f(count)
    with pytest.raises(IndexError, match="out-of-bounds store"):
        compiled.f(0)  # an empty allocation: the store is out of its bounds
    assert compiled.f(1) == 1.0


@pytest.mark.parametrize("plan_memory", [True, False])
def test_failed_buffer_allocation_traps(plan_memory: bool) -> None:
    """A 4 TiB intermediate (arena or heap buffer) once came back NULL from aligned_alloc
    and the loop nest wrote through it; now the call raises TrapError("out of memory")."""
    text = (HERE / "regress_out_of_memory.dl").read_text()
    compiled = dlc.compile(text, filename="regress_out_of_memory.dl", plan_memory=plan_memory)
    with pytest.raises(dlc.TrapError, match="out of memory allocating 4398046511104 bytes"):
        compiled.f(np.float32(1))


def test_tuple_arguments_are_callable_from_python() -> None:
    """A function taking a plain tuple of tensors was rejected as "not made of tensors"."""
    compiled = dlc.compile((HERE / "regress_tuple_argument.dl").read_text())
    result = compiled.f((np.float32(2), np.array([1, 2], np.float32)))
    np.testing.assert_array_equal(result, np.array([2, 4], np.float32))
    with pytest.raises(TypeError, match=r"argument 0 \(%t\) of @f: expected a tuple of 2 values"):
        compiled.f((np.float32(2),))


def test_autodiff_errors_from_the_api_are_located() -> None:
    """`dlc.compile` differentiates a clone of the module; the clone once lost the source
    locations, so autodiff diagnostics from the API said only `error: …`."""
    text = (HERE / "regress_located_autodiff_error.dl").read_text()
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text, filename="regress_located_autodiff_error.dl")
    assert (info.value.line, info.value.column) == (7, 10)
    assert info.value.message.startswith("cannot differentiate through 'digamma' (%d)")
