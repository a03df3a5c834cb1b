"""Index divisions decided by ranges (`simplify_indices`, run by `fuse`): random chains
of reshapes and slices compute what the reference interpreter does, and the channel
split the superoptimizer emits reads its input without a division."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def chain(rng: np.random.Generator) -> tuple[str, tuple[int, ...]]:
    """A function applying 3-5 random shapeCasts and row slices to x, then adding 1."""
    dims = tuple(int(d) for d in rng.integers(1, 7, size=int(rng.integers(2, 5))))
    lines, value, shape = [], "%x", dims
    for step in range(int(rng.integers(3, 6))):
        t = f"<{' x '.join(map(str, shape))} x f32>"
        if step % 2 == 0 or shape[0] == 1:
            total = int(np.prod(shape))
            first = int(rng.choice(divisors(total)))
            rest = total // first
            second = int(rng.choice(divisors(rest)))
            new = tuple(d for d in (first, second, rest // second) if d > 1) or (1,)
            lines.append(f"    %v{step} = shapeCast {value}: {t} to {' x '.join(map(str, new))}")
        else:
            lo = int(rng.integers(0, shape[0]))
            hi = int(rng.integers(lo, shape[0]))
            new = (hi - lo + 1, *shape[1:])
            lines.append(f"    %v{step} = slice {value}: {t} from {lo} upto {hi}")
        value, shape = f"%v{step}", new
    t = f"<{' x '.join(map(str, shape))} x f32>"
    x = f"<{' x '.join(map(str, dims))} x f32>"
    body = "\n".join(lines)
    text = f"""module "c"
stage raw

func @f: ({x}) -> {t} {{
'entry(%x: {x}):
{body}
    %y = add {value}: {t}, 1.0: f32
    return %y: {t}
}}
"""
    return text, dims


@pytest.mark.parametrize("seed", range(24))
def test_reshape_and_slice_chains_match_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    text, dims = chain(rng)
    x = rng.standard_normal(dims).astype(np.float32)
    want = run_function(parse_module(text), "f", [x])
    np.testing.assert_array_equal(dlc.compile(text, opt_level=2).f(x), want)


def test_a_channel_split_reads_without_division() -> None:
    t = "<1 x 8 x 5 x 5 x f32>"
    text = f"""module "s"
stage raw

func @f: ({t}) -> <1 x 3 x 5 x 5 x f32> {{
'entry(%x: {t}):
    %m = shapeCast %x: {t} to 8 x 25
    %s = slice %m: <8 x 25 x f32> from 4 upto 6
    %b = shapeCast %s: <3 x 25 x f32> to 1 x 3 x 5 x 5
    %r = max %b: <1 x 3 x 5 x 5 x f32>, 0.0: f32
    return %r: <1 x 3 x 5 x 5 x f32>
}}
"""
    compiled = dlc.compile(text)
    tensor = compiled.ir("tensor")
    assert "arith.divsi" not in tensor and "arith.remsi" not in tensor
    x = np.random.default_rng(0).standard_normal((1, 8, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(compiled.f(x), np.maximum(x[:, 4:7], 0))


def test_a_concatenation_of_a_split_matches_numpy() -> None:
    """The concatenation's clamped reads through a channel split (the merged 1 x 1
    convolutions' relu and concatenation in W12)."""
    text = """module "c"
stage raw

func @f: (<1 x 8 x 5 x 5 x f32>, <1 x 2 x 5 x 5 x f32>) -> <1 x 5 x 5 x 5 x f32> {
'entry(%x: <1 x 8 x 5 x 5 x f32>, %z: <1 x 2 x 5 x 5 x f32>):
    %m = shapeCast %x: <1 x 8 x 5 x 5 x f32> to 8 x 25
    %s = slice %m: <8 x 25 x f32> from 2 upto 4
    %b = shapeCast %s: <3 x 25 x f32> to 1 x 3 x 5 x 5
    %c = concatenate %b: <1 x 3 x 5 x 5 x f32>, %z: <1 x 2 x 5 x 5 x f32> along 1
    %y = add %c: <1 x 5 x 5 x 5 x f32>, 1.0: f32
    return %y: <1 x 5 x 5 x 5 x f32>
}
"""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float32)
    z = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    compiled = dlc.compile(text)
    assert "arith.divsi" not in compiled.ir("tensor")
    want = np.concatenate([x[:, 2:5], z], axis=1) + 1
    np.testing.assert_array_equal(compiled.f(x, z), want)
