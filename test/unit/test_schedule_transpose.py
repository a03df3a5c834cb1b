"""Blocked transposes (`transpose_schedule` in dlc/passes/tensor/schedule_policy.py):
element-wise nests that read an operand across their last two axes get 16 x 16 blocks
(a last axis shorter than two blocks: the axis read across moved just outside it);
the copies are exact for any shape, also with partial blocks, batch axes, bounds
checks and several threads; small or contiguous nests keep the plain order."""

from __future__ import annotations

import numpy as np
import pytest

import dlc


def _source(shape: tuple[int, ...]) -> str:
    """2 * transpose(x): DLVM's transpose reverses all axes."""
    dims = " x ".join(map(str, shape))
    out_dims = " x ".join(map(str, reversed(shape)))
    return (
        'module "t"\nstage raw\n'
        f"func @t: (<{dims} x f32>) -> <{out_dims} x f32> {{\n"
        f"'entry(%x: <{dims} x f32>):\n"
        f"    %y = transpose %x: <{dims} x f32>\n"
        f"    %z = multiply %y: <{out_dims} x f32>, 2.0: f32\n"
        f"    return %z: <{out_dims} x f32>\n}}\n"
    )


@pytest.mark.parametrize(
    ("shape", "order"),
    [
        ((100, 70), "d0.0, d1.0, d0.1, d1.1"),  # partial blocks on both axes
        ((33, 5, 40), "d1, d0.0, d2.0, d0.1, d2.1"),  # an axis outside the blocks
        ((64, 64), "d0.0, d1.0, d0.1, d1.1"),  # whole blocks
        ((5, 7, 40), "d1, d0, d2"),  # a short last axis: the axis read across just outside it
    ],
)
@pytest.mark.parametrize("options", [{}, {"bounds_check": True}, {"num_threads": 3}])
def test_blocked_transposes_are_exact(
    shape: tuple[int, ...], order: str, options: dict[str, object]
) -> None:
    mod = dlc.compile(_source(shape), **options)  # type: ignore[arg-type]
    assert f"interchange [{order}]" in mod.ir("tensor")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(mod.t(x), 2 * x.T)


def test_small_nests_keep_the_plain_order() -> None:
    assert "tile [" not in dlc.compile(_source((20, 40))).ir("tensor")
