"""The columns of an unfolded convolution copied as vectors along the row
(dlc/passes/tensor/schedule_unfold.py) for x86-64 (4 f32 lanes), haswell (8) and
znver4 (16): rows of 7, 14 and 28, stride 2 (every second element, `vload2`), f64;
the results are opt_level 0's bits (the columns move values; the product keeps its
order without fma) on each target this machine runs. Other copies (a reshape that
writes no more than it reads) keep their schedules."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.dialects import tensor
from dlc.dialects.schedule import ScheduleAttr
from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
from dlc.parser import parse_module
from dlc.passes.tensor import schedule_unfold
from dlc.passes.tensor.fuse import FusePass
from dlc.passes.tensor.schedule import SchedulePass
from dlc.passes.tensor.unfold_convolutions import UnfoldConvolutionsPass
from dlc.pipeline import context
from dlc.target import Target, check_runnable

# (in channels, out channels, size, stride, dtype)
CASES = [
    (8, 12, 7, 1, "f32"),
    (16, 24, 14, 1, "f32"),
    (32, 16, 56, 2, "f32"),
    (16, 8, 28, 2, "f64"),
]
TARGETS = {"x86-64": 4, "haswell": 8, "znver4": 16}


def _source(case: tuple) -> str:
    ci, co, size, stride, dt = case
    out = (size + 2 - 3) // stride + 1
    x, y = f"<1 x {ci} x {size} x {size} x {dt}>", f"<1 x {co} x {out} x {out} x {dt}>"
    k = f"<{co} x {ci} x 3 x 3 x {dt}>"
    return f"""module "m"
stage raw
func @f: ({x}) -> {y} {{
'entry(%x: {x}):
    %k = literal 0.25: {k}
    %y = convolve %x: {x} kernel %k: {k} strides {stride}, {stride} padding (1, 1), (1, 1)
    return %y: {y}
}}
"""


def _cols_schedule(case: tuple, target: str) -> str:
    """The schedule of the compute that builds the columns (3·3·C rows)."""
    module = parse_module(_source(case))
    for p in (LowerGraphToTensorPass(), UnfoldConvolutionsPass(target=target), FusePass()):
        p.apply(context(), module)
    SchedulePass(target=target).apply(context(), module)
    computes = [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]
    (cols,) = [c for c in computes if c.domain[1] == 9 * case[0] and c.combinator is None]
    return str(cols.schedule)


# every pair but rows of 14 for x86-64: two of its vectors (8) fit them, no unfolding
PAIRS = [(c, t) for c in CASES for t in sorted(TARGETS) if (c[2], t) != (14, "x86-64")]


@pytest.mark.parametrize(("case", "target"), PAIRS, ids=[f"{c[2]}-{t}" for c, t in PAIRS])
def test_columns_as_vectors(case: tuple, target: str) -> None:
    _, _, size, stride, dt = case
    out = (size + 2 - 3) // stride + 1
    lanes = TARGETS[target] // (2 if dt == "f64" else 1)
    width = 1 << (min(lanes, out).bit_length() - 1)
    assert f"vectorize d3.1 x {width}" in _cols_schedule(case, target)
    try:
        check_runnable(target)
    except ValueError:
        return  # the schedule above is checked; this machine cannot run the code
    text = _source(case)
    x = (
        np.random.default_rng(1)
        .standard_normal((1, case[0], size, size))
        .astype({"f32": np.float32, "f64": np.float64}[dt])
    )
    unfolded = dlc.compile(text, fma=False, target_cpu=target, num_threads=2, bounds_check=True)
    assert f"reduce [{9 * case[0]}]" in unfolded.ir("tensor")
    np.testing.assert_array_equal(unfolded.f(x), dlc.compile(text, opt_level=0).f(x))


def test_copies_that_do_not_unfold() -> None:
    """A copy writing as many elements as it reads (a transpose, a reshape) or none
    with a vector read along its last axis is not an unfolding."""
    text = """module "m"
stage raw
func @f: (<16 x 32 x f32>) -> <32 x 16 x f32> {
'entry(%x: <16 x 32 x f32>):
    %t = transpose %x: <16 x 32 x f32>
    return %t: <32 x 16 x f32>
}
"""
    module = parse_module(text)
    LowerGraphToTensorPass().apply(context(), module)
    (copy,) = [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]
    copy.schedule = ScheduleAttr()
    assert schedule_unfold.unfolded_rows_schedule(copy, Target.from_cpu("haswell")) is None


CHAIN = """module "m"
stage raw
func @f: (<1 x 16 x 14 x 14 x f32>, <1 x 24 x 1 x 1 x f32>) -> <1 x 24 x 7 x 7 x f32> {
'entry(%x: <1 x 16 x 14 x 14 x f32>, %b: <1 x 24 x 1 x 1 x f32>):
    %k = literal 0.25: <24 x 16 x 3 x 3 x f32>
    %y = convolve %x: <1 x 16 x 14 x 14 x f32> kernel %k: <24 x 16 x 3 x 3 x f32> strides 2, 2 padding (1, 1), (1, 1)
    %z = add %y: <1 x 24 x 7 x 7 x f32>, %b: <1 x 24 x 1 x 1 x f32>
    %t = tanh %z: <1 x 24 x 7 x 7 x f32>
    return %t: <1 x 24 x 7 x 7 x f32>
}
"""


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_channel_rows_epilogue(target: str) -> None:
    """A strided convolution with more pixels (49) than channels (24): its bias and
    tanh run over the product's (1, 24, 49) domain as its epilogue on every target."""
    module = parse_module(CHAIN)
    for p in (LowerGraphToTensorPass(), UnfoldConvolutionsPass(target=target), FusePass()):
        p.apply(context(), module)
    SchedulePass(target=target).apply(context(), module)
    computes = [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]
    product, last = computes[-2], computes[-1]
    assert product.combinator is not None and product.schedule is not None
    assert product.schedule.epilogue == 1 and last.domain == (1, 24, 49)
