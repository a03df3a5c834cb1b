"""Sums of symbolic dimensions (`%past+1`): a KV cache concatenated with a new token's
keys. Parsed and printed, inferred through `concatenate`, lowered with run-time offsets
and compared with the reference interpreter and a static compile; results returned as
tuples; the errors of sums where sizes are bound; a small GPT-2-style decoder that
generates with a growing cache, one compile, token by token against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.diagnostics import DiagnosticError
from dlc.parser import parse_module, print_module
from dlc.runtime.symbolic import ShapeError
from dlc.semantics.interpreter import run_function

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


def _function(signature: str, params: str, body: str) -> str:
    return f'module "m"\nstage raw\n\nfunc @f: {signature} {{\n\'entry({params}):\n{body}\n}}\n'


def test_sums_print_and_parse_back():
    module = parse_module(CACHE, "cache.dl")
    assert print_module(module) == CACHE
    swapped = _function(
        "(<%b x f32>, <%a x f32>) -> <%b+%a x f32>",
        "%x: <%b x f32>, %y: <%a x f32>",
        "    %c = concatenate %x: <%b x f32>, %y: <%a x f32> along 0\n    return %c: <%b+%a x f32>",
    )
    text = print_module(parse_module(swapped, "ab.dl"))
    assert "-> <%a+%b x f32>" in text and "return %c: <%a+%b x f32>" in text


def _static(past: int) -> str:
    """The cache program at one size (the reference interpreter's shapes are static)."""
    return CACHE.replace("%past+1", str(past + 1)).replace("%past", str(past))


@pytest.mark.parametrize("opt_level", [0, 2])
def test_concatenate_along_a_symbolic_axis(opt_level: int):
    module = dlc.compile(CACHE, opt_level=opt_level)
    rng = np.random.default_rng(opt_level)
    for past in (0, 1, 4, 33):
        p = rng.standard_normal((2, past, 3)).astype(np.float32)
        k = rng.standard_normal((2, 1, 3)).astype(np.float32)
        c, s = module.step(p, k)
        assert c.shape == (2, past + 1, 3) and s.shape == (2, past + 1)
        np.testing.assert_array_equal(c, np.concatenate([p, k], axis=1))
        want_c, want_s = run_function(parse_module(_static(past), "s.dl"), "step", [p, k])  # type: ignore[misc]
        np.testing.assert_array_equal(c, want_c)
        np.testing.assert_allclose(s, want_s, rtol=1e-6)
    stats = module.stats("step")
    assert stats["compiles"] == 1 and stats["sizes_called"] == 4


@pytest.mark.parametrize("past", [0, 5])
def test_opt_level_0_matches_a_static_compile_bit_for_bit(past: int):
    rng = np.random.default_rng(past)
    p = rng.standard_normal((2, past, 3)).astype(np.float32)
    k = rng.standard_normal((2, 1, 3)).astype(np.float32)
    got = dlc.compile(CACHE, opt_level=0).step(p, k)
    want = dlc.compile(_static(past), opt_level=0).step(p, k)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


THREE = _function(
    "(<%n x %a x i32>, <%n x 2 x i32>, <%n x %b x i32>) -> <1 x %a+%b+2 x i32>",
    "%x: <%n x %a x i32>, %y: <%n x 2 x i32>, %z: <%n x %b x i32>",
    "    %c = concatenate %x: <%n x %a x i32>, %y: <%n x 2 x i32>, %z: <%n x %b x i32> along 1\n"
    "    %s = reduce %c: <%n x %a+%b+2 x i32> by max init -100: i32 along 0\n"
    "    %t = padShape %s: <%a+%b+2 x i32> at 0\n"
    "    return %t: <1 x %a+%b+2 x i32>",
)


@pytest.mark.parametrize("opt_level", [0, 1])
@pytest.mark.parametrize(("n", "a", "b"), [(1, 0, 1), (3, 4, 2), (40, 300, 1)])
def test_three_operands_and_symbolic_other_axes(opt_level: int, n: int, a: int, b: int):
    rng = np.random.default_rng(n + a + b)
    x, y, z = (rng.integers(-50, 50, (n, w), dtype=np.int32) for w in (a, 2, b))
    got = dlc.compile(THREE, opt_level=opt_level).f(x, y, z)
    np.testing.assert_array_equal(got, np.concatenate([x, y, z], axis=1).max(0)[None])
    assert got.shape == (1, a + b + 2)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            _function(
                "(<%n+1 x f32>) -> <%n+1 x f32>", "%x: <%n+1 x f32>", "    return %x: <%n+1 x f32>"
            ),
            "p.dl:4:12: error: symbolic dimension %n+1 of a parameter is a sum of %n, "
            "which no parameter's dimension names alone",
        ),
        (
            _function(
                "(<%n x f32>) -> <%n+%k x f32>", "%x: <%n x f32>", "    return %x: <%n x f32>"
            ),
            "p.dl:4:12: error: symbolic dimension %k of the result is not the size of any parameter",
        ),
        (
            _function(
                "(<%n x f32>, <1 x f32>) -> <%n x f32>",
                "%x: <%n x f32>, %w: <1 x f32>",
                "    %c = concatenate %x: <%n x f32>, %w: <1 x f32> along 0\n"
                "    %y = add %c: <%n+1 x f32>, %x: <%n x f32>\n    return %x: <%n x f32>",
            ),
            "p.dl:7:10: error: add: shapes <%n+1 x f32> and <%n x f32> are not broadcastable",
        ),
    ],
)
def test_sums_where_sizes_are_bound_are_located_errors(source: str, message: str):
    with pytest.raises(DiagnosticError) as info:
        parse_module(source, "p.dl")
    assert str(info.value).startswith(message)


def test_a_tuple_result_must_be_a_tuple_of_values():
    src = _function(
        "(<%n x f32>) -> (<%n x f32>, f32)",
        "%x: <%n x f32>",
        "    %t = literal (%x: <%n x f32>, 1.0: f32): (<%n x f32>, f32)\n"
        "    return %t: (<%n x f32>, f32)",
    )
    with pytest.raises(DiagnosticError) as info:
        dlc.compile(src, filename="p.dl")
    assert str(info.value).startswith(
        "p.dl:7:5: error: a tuple result: return a tuple literal of its elements' values"
    )


SLICE = _function(
    "(<5 x %n x f32>) -> <%n x 2 x f32>",
    "%x: <5 x %n x f32>",
    "    %s = slice %x: <5 x %n x f32> from 1 upto 2\n"
    "    %t = transpose %s: <2 x %n x f32>\n"
    "    return %t: <%n x 2 x f32>",
)


@pytest.mark.parametrize("opt_level", [0, 2])
def test_slice_of_a_static_dimension(opt_level: int):
    module = dlc.compile(SLICE, opt_level=opt_level)
    for n in (0, 3, 40):
        x = np.arange(5 * n, dtype=np.float32).reshape(5, n)
        np.testing.assert_array_equal(module.f(x), x[1:3].T)
    assert module.stats("f")["compiles"] == 1


def test_slice_of_a_symbolic_dimension_is_located():
    src = _function(
        "(<%n x 4 x f32>) -> <%n x 4 x f32>",
        "%x: <%n x 4 x f32>",
        "    %s = slice %x: <%n x 4 x f32> from 0 upto 1\n    return %x: <%n x 4 x f32>",
    )
    with pytest.raises(DiagnosticError) as info:
        parse_module(src, "s.dl")
    assert str(info.value).startswith(
        "s.dl:6:10: error: slice of symbolic dimension %n: not supported yet"
    )


MASKED = _function(
    "(<%n x f32>, <1 x f32>, <%n+1 x f32>) -> <%n+1 x f32>",
    "%x: <%n x f32>, %w: <1 x f32>, %m: <%n+1 x f32>",
    "    %c = concatenate %x: <%n x f32>, %w: <1 x f32> along 0\n"
    "    %y = add %c: <%n+1 x f32>, %m: <%n+1 x f32>\n"
    "    return %y: <%n+1 x f32>",
)


def test_a_sum_in_a_parameter_is_checked_per_call():
    """`%n+1` in a parameter binds nothing: %n comes from %x, and %m's extent must be
    its value (a mask over a cache grown by one, say)."""
    module = dlc.compile(MASKED, filename="m.dl")
    x, w = np.arange(3, dtype=np.float32), np.ones(1, np.float32)
    np.testing.assert_array_equal(module.f(x, w, np.full(4, 2, np.float32)), [2, 3, 4, 3])
    with pytest.raises(ShapeError) as info:
        module.f(x, w, np.zeros(5, np.float32))
    assert str(info.value).startswith(
        "m.dl:4:6: error: @f: symbolic dimension %n+1 is 4 (%n = 3) but 5 in %m (dimension 0)"
    )
